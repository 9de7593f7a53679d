"""`evalgate push` and `publish: {hf_hub: ...}` with the real huggingface_hub client against a
local server speaking the Hub's endpoints (HF_ENDPOINT)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from tests.conftest import answer_arith, write_config
from tests.hub_server import FakeHub, serve_hub

pytest.importorskip("huggingface_hub", reason="needs huggingface_hub (the hub extra)")
TOKEN = "hf_secret_do_not_print_1234567890"


@pytest.fixture
def hub():
    yield from serve_hub(TOKEN)


def _local_run(tmp: Path, url: str, out: Path, extra: str = "", env: Any = None) -> str:
    cfg = write_config(
        tmp,
        f"""
models:
  - {{name: scripted, backend: openai, base_url: "{url}", model: org/m}}
benchmarks:
  - name: arith
    eval: {{num_examples: 5}}
{extra}""",
    )
    assert main(["local", str(cfg), "--output", str(out), "--no-cache"], environ=env or {}) == 0
    (run,) = {p.name for p in out.glob("evals/*/*")} - _pushed_before(out)
    return run


def _pushed_before(out: Path) -> set[str]:
    marker = out / ".seen"
    seen = set(marker.read_text().split()) if marker.is_file() else set()
    marker.write_text(" ".join(p.name for p in out.glob("evals/*/*")))
    return seen


def test_push_two_runs_adds_a_folder_each(
    tmp_path: Path, scripted_server: Any, hub: FakeHub, capsys: pytest.CaptureFixture[str]
) -> None:
    server = scripted_server(answer_arith)
    out = tmp_path / "out"
    env = {"HF_TOKEN": TOKEN, "HF_ENDPOINT": hub.url}
    first = _local_run(tmp_path, server.base_url, out)
    buf = io.StringIO()
    assert (
        main(["push", first, "--repo", "acme/evals", "--output", str(out)], environ=env, out=buf)
        == 0
    )
    repo = hub.repos["acme/evals"]
    assert repo.private  # private unless --public
    folder = f"runs/{first}/arith--org--m"
    for name in ("results.jsonl", "metadata.json", "run_config.json"):
        local = next(out.glob(f"evals/*/{first}/{name}")).read_bytes()
        assert repo.files[f"{folder}/{name}"] == local
    assert repo.files[f"runs/{first}/scorecard.md"] == (out / "scorecard.md").read_bytes()
    assert buf.getvalue().strip().startswith(f"{hub.url}/datasets/acme/evals/commit/")
    first_files = {p: b for p, b in repo.files.items() if p.startswith(f"runs/{first}/")}

    second = _local_run(tmp_path, server.base_url, out)
    assert second != first
    assert main(["push", second, "--repo", "acme/evals", "--output", str(out)], environ=env) == 0
    assert len(repo.commits) == 2
    # The second commit wrote only the new run's folder and the card; the first run is intact.
    assert all(
        p.startswith(f"runs/{second}/") or p == "README.md" for p in repo.commits[1]["paths"]
    )
    assert {p: b for p, b in repo.files.items() if p.startswith(f"runs/{first}/")} == first_files
    card = repo.files["README.md"].decode()
    assert card.startswith("---\n") and "data_files:" in card
    assert f"[`{first}`](runs/{first})" in card and f"[`{second}`](runs/{second})" in card
    assert card.index(second) < card.index(first)  # newest first

    assert set(hub.authorization) == {f"Bearer {TOKEN}"}  # the token went to the server...
    captured = capsys.readouterr()
    assert TOKEN not in captured.out + captured.err + buf.getvalue()  # ...and nowhere else


def test_publish_hf_hub_in_evals_yaml(tmp_path: Path, scripted_server: Any, hub: FakeHub) -> None:
    server = scripted_server(answer_arith)
    out = tmp_path / "out"
    env = {"HF_TOKEN": TOKEN, "HF_ENDPOINT": hub.url}
    extra = "publish: {hf_hub: {repo: acme/auto, private: false}}\n"
    run = _local_run(tmp_path, server.base_url, out, extra, env)
    repo = hub.repos["acme/auto"]
    assert not repo.private
    assert f"runs/{run}/arith--org--m/results.jsonl" in repo.files
    meta = json.loads(repo.files[f"runs/{run}/arith--org--m/metadata.json"])
    assert meta["num_examples"] == 5


def test_push_errors_are_one_line(
    tmp_path: Path, scripted_server: Any, hub: FakeHub, capsys: pytest.CaptureFixture[str]
) -> None:
    server = scripted_server(answer_arith)
    out = tmp_path / "out"
    run = _local_run(tmp_path, server.base_url, out)
    args = ["push", run, "--repo", "acme/evals", "--output", str(out)]
    assert main(args, environ={"HF_ENDPOINT": hub.url}) == 2
    assert "HF_TOKEN is not set" in capsys.readouterr().err
    wrong = {"HF_TOKEN": "hf_wrong_token_value", "HF_ENDPOINT": hub.url}
    assert main(args, environ=wrong) == 3
    err = capsys.readouterr().err
    assert "push to the Hub dataset acme/evals: HTTP 401" in err and "hf_wrong" not in err
    assert len(err.strip().splitlines()) == 1
    assert main(["push", "nope", "--repo", "acme/evals", "--output", str(out)], environ={}) == 2
    assert main(["push", run, "--repo", "no-slash", "--output", str(out)], environ={}) == 2

"""verifiers environments as benchmarks: the example environment against a scripted server.

Real verifiers (0.4.x in the project environment), real example package
(``pip install -e examples/verifiers``), real HTTP; the embedded-model runs are in
``test_verifiers_embedded.py``.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from evalgate.errors import ConfigError
from tests.conftest import answer_arith, read_jsonl, write_config

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("verifiers") is None
    or importlib.util.find_spec("evalgate_arith") is None,
    reason="needs verifiers and the example environment: "
    "pip install verifiers==0.4.0 -e examples/verifiers",
)


def _answer(body: dict[str, Any], n: int) -> tuple[int, str, dict[str, str]]:
    """answer_arith as a complete chat.completion: verifiers v1 validates the upstream response
    against the OpenAI schema (conftest's scripted reply has no `created`, which v1 rejects)."""
    reply = {
        "id": f"cmpl-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer_arith(body, n)},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    }
    return 200, json.dumps(reply), {"Content-Type": "application/json"}


def _has_v1() -> bool:
    return importlib.util.find_spec("verifiers.v1") is not None


def _has_legacy() -> bool:
    return importlib.util.find_spec("verifiers.legacy") is not None


needs_v1 = pytest.mark.skipif(not _has_v1(), reason="needs verifiers>=0.3.1 (verifiers.v1)")


def _expected_ids(*ids: str) -> list[str] | None:
    """The example's durable ids where TaskData has an `id` field (verifiers >= 0.4); before
    that, ids are content hashes (checked for stability in test_item_ids_are_stable...)."""
    from verifiers.v1 import TaskData

    return list(ids) if "id" in TaskData.model_fields else None


def _config(tmp_path: Path, base_url: str, bench: str, extra: str = "") -> Path:
    return write_config(
        tmp_path,
        f"""
models:
  - name: scripted
    backend: openai
    base_url: {base_url}
    model: org/scripted-model
benchmarks:
{bench}
eval:
  max_retries: 1
{extra}
""",
    )


V1_BENCH = """
  - name: vfa
    kind: verifiers
    env_id: evalgate-arith
    eval: {num_examples: 4, rollouts: 2}
"""


def _run(tmp_path: Path, config: Path, *args: str) -> tuple[int, Path]:
    out = tmp_path / "out"
    code = main(["local", str(config), "--output", str(out), *args], environ={"CI": "true"})
    return code, out


def _results(out: Path, bench: str = "vfa") -> list[dict[str, Any]]:
    (path,) = (out / "evals").glob(f"{bench}--org--scripted-model/*/results.jsonl")
    return read_jsonl(path)


def _spec(tmp_path: Path, bench: str) -> Any:
    from evalgate.config.load import load_config

    config = write_config(
        tmp_path,
        f"models: [{{name: m, backend: openai, base_url: 'http://x/v1'}}]\nbenchmarks:\n{bench}",
    )
    return load_config(config, []).benchmarks[0]


@needs_v1
def test_v1_taskset_end_to_end(tmp_path: Path, scripted_server: Any) -> None:
    server = scripted_server(_answer)
    code, out = _run(tmp_path, _config(tmp_path, server.base_url, V1_BENCH))
    assert code == 0
    results = _results(out)
    assert len(results) == 8 == len(server.requests)
    # Item ids are the taskset's own TaskData.id values, in load() order, each rollout once.
    assert sorted(r["rollout"] for r in results) == [0, 0, 0, 0, 1, 1, 1, 1]
    if ids := _expected_ids("add-2-3", "add-7-5", "sub-9-4", "add-10-10"):
        assert sorted((r["example_id"], r["rollout"]) for r in results) == sorted(
            (i, k) for i in ids for k in (0, 1)
        )
    for r in results:
        assert r["error"] is None and r["reward"] == 1.0
        # Every reward and metric the task defines, plus the weighted total.
        assert r["metrics"] == {
            "correct": 1.0,
            "has_number": 1.0,
            "bare_answer": 1.0,
            "reward": 1.0,
        }
        assert r["usage"] == {"prompt_tokens": 7, "completion_tokens": 3}
        assert r["prompt"][0]["role"] == "system" and r["prompt"][-1]["role"] == "user"
    # The served endpoint got the configured model and evalgate's sampling, seed + rollout.
    seeds = sorted(req["seed"] for req in server.requests)
    assert seeds == [0, 0, 0, 0, 1, 1, 1, 1]
    assert all(req["model"] == "org/scripted-model" for req in server.requests)
    scorecard = (out / "scorecard.md").read_text()
    assert "| scripted | vfa | correct | 100.0% |" in scorecard
    assert "| scripted | vfa | pass@2 | 100.0% |" in scorecard  # from evalgate's score module


@needs_v1
def test_v1_failed_rollouts_are_errors_never_zero(tmp_path: Path, scripted_server: Any) -> None:
    server = scripted_server(lambda body, n: (400, "scripted failure", {}))
    code, out = _run(tmp_path, _config(tmp_path, server.base_url, V1_BENCH))
    assert code == 3  # every rollout errored: over the error budget, an infrastructure error
    results = _results(out)
    assert len(results) == 8
    assert all(r["reward"] is None and r["metrics"] == {} for r in results)
    assert all(r["error"].startswith("http_400") for r in results)


@needs_v1
def test_v1_malformed_response_is_an_error(tmp_path: Path, scripted_server: Any) -> None:
    def without_created(body: dict[str, Any], n: int) -> tuple[int, str, dict[str, str]]:
        status, text, headers = _answer(body, n)
        reply = json.loads(text)
        del reply["created"]  # schema-invalid for verifiers v1's OpenAI client
        return status, json.dumps(reply), headers

    server = scripted_server(without_created)
    code, out = _run(tmp_path, _config(tmp_path, server.base_url, V1_BENCH))
    assert code == 3
    assert all(r["error"].startswith("http_502") for r in _results(out))  # never a 0


@needs_v1
def test_v1_gate_safe_defaults(tmp_path: Path) -> None:
    from evalgate.suites.verifiers import CHAT_HARNESS_ID, VerifiersSuite

    suite = VerifiersSuite.from_spec(
        _spec(tmp_path, "  - {name: v, kind: verifiers, env_id: evalgate-arith}\n")
    )
    assert suite.api == "v1" and len(suite.items) == 8
    # verifiers' own defaults are a remote `prime` runtime and the uv-installed `bash` harness.
    assert suite.roles["agent"] == {"runtime": "subprocess", "harness": CHAT_HARNESS_ID}


@needs_v1
@pytest.mark.slow
def test_item_ids_are_stable_across_loads(tmp_path: Path) -> None:
    from evalgate.suites.verifiers import VerifiersSuite

    bench = "  - {name: v, kind: verifiers, env_id: evalgate-arith, env_args: {num_tasks: 5}}\n"
    first = VerifiersSuite.from_spec(_spec(tmp_path, bench))
    again = VerifiersSuite.from_spec(_spec(tmp_path, bench))
    assert [i.id for i in first.items] == [i.id for i in again.items]
    assert len({i.id for i in first.items}) == 5
    if ids := _expected_ids("add-2-3", "add-7-5"):
        assert [i.id for i in first.items][:2] == ids


def test_content_hash_ids_ignore_position() -> None:
    from evalgate.suites._vf_legacy import Legacy as _Legacy
    from evalgate.suites._vf_runner import _unique_ids

    row = {"prompt": [{"role": "user", "content": "2+2?"}], "answer": "4", "example_id": 0}
    moved = {**row, "example_id": 17}  # the same row at another position
    assert _Legacy._item_id(row) == _Legacy._item_id(moved)
    assert _Legacy._item_id({**row, "src_id": "q-1"}) == "q-1"
    assert _unique_ids(["a", "b", "a"]) == ["a", "b", "a#2"]


def test_api_auto_picks_by_what_the_module_provides(tmp_path: Path) -> None:
    from evalgate.suites._vf_runner import _pick_api

    legacy = _spec(tmp_path, "  - {name: v, kind: verifiers, env_id: evalgate-arith-legacy}\n")
    assert _pick_api(legacy) == "legacy"
    if _has_v1():
        v1 = _spec(tmp_path, "  - {name: v, kind: verifiers, env_id: org/evalgate-arith@0.1}\n")
        assert _pick_api(v1) == "v1"  # hub ids: owner/name@version → module name
    missing = _spec(tmp_path, "  - {name: v, kind: verifiers, env_id: no-such-env}\n")
    with pytest.raises(ConfigError, match="not installed"):
        _pick_api(missing)


@pytest.mark.skipif(_has_legacy(), reason="this verifiers still has the legacy API")
def test_legacy_env_on_a_verifiers_without_it_is_a_config_error(tmp_path: Path) -> None:
    bench = "  - {name: v, kind: verifiers, env_id: evalgate-arith-legacy}\n"
    code, _ = _run(tmp_path, _config(tmp_path, "http://127.0.0.1:9/v1", bench))
    assert code == 2  # verifiers 0.4 removed `verifiers.legacy`: said before any model starts


@pytest.mark.skipif(not _has_legacy(), reason="needs verifiers<=0.3.1 (verifiers.legacy)")
def test_legacy_environment_end_to_end(tmp_path: Path, scripted_server: Any) -> None:
    server = scripted_server(_answer)
    bench = """
  - name: vfa
    kind: verifiers
    env_id: evalgate-arith-legacy
    eval: {num_examples: 3, rollouts: 2}
"""
    code, out = _run(tmp_path, _config(tmp_path, server.base_url, bench))
    assert code == 0
    results = _results(out)
    assert (
        sorted(r["example_id"] for r in results)
        == ["add-2-3"] * 2 + ["add-7-5"] * 2 + ["sub-9-4"] * 2
    )
    assert all(r["reward"] == 1.0 and r["metrics"]["correct"] == 1.0 for r in results)
    assert all(req["max_tokens"] == 256 for req in server.requests)  # the cap reaches the server


@pytest.mark.parametrize(
    "env_id",
    [
        pytest.param("evalgate-arith", marks=needs_v1),
        pytest.param(
            "evalgate-arith-legacy",
            marks=pytest.mark.skipif(not _has_legacy(), reason="needs verifiers.legacy"),
        ),
    ],
)
def test_two_models_each_get_their_own_rollouts(
    tmp_path: Path, scripted_server: Any, env_id: str
) -> None:
    # Suites are built once and reused per model, each model in its own event loop: the
    # environment's serving context and the endpoint must follow the model.
    first, second = scripted_server(_answer), scripted_server(_answer)
    config = write_config(
        tmp_path,
        f"""
models:
  - {{name: one, backend: openai, base_url: "{first.base_url}", model: org/one}}
  - {{name: two, backend: openai, base_url: "{second.base_url}", model: org/two}}
benchmarks:
{V1_BENCH.replace("evalgate-arith", env_id)}
""",
    )
    code, _ = _run(tmp_path, config)
    assert code == 0
    assert len(first.requests) == len(second.requests) == 8
    assert {r["model"] for r in first.requests} == {"org/one"}
    assert {r["model"] for r in second.requests} == {"org/two"}


def _workers() -> set[int]:
    """This process's verifiers worker processes (their jail's or their own), by pid."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if b"evalgate.suites._vf_worker" in cmdline and int(stat[1]) == os.getpid():
            found.add(int(entry.name))
    return found


@needs_v1
def test_a_run_stops_its_suites_workers_when_it_ends(tmp_path: Path, scripted_server: Any) -> None:
    # Suite.close(): each verifiers benchmark's worker (~220 MB: verifiers, the environment, its
    # data) ends with the run that used it, not with the process (a test session, a long job).
    server = scripted_server(_answer)
    two = V1_BENCH + V1_BENCH.replace("name: vfa", "name: vfb")
    before = _workers()
    code, out = _run(tmp_path, _config(tmp_path, server.base_url, two))
    assert code == 0 and len(_results(out, "vfb")) == 8
    assert _workers() - before == set()

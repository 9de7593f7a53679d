"""A first run that teaches the gate: no false PASS, resumable Ctrl-C, usable ids and flags."""

from __future__ import annotations

import _thread
import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from tests.conftest import ROOT, answer_arith, write_config


def _config(tmp_path: Path, url: str, gate: str = "", benchmarks: str = "") -> Path:
    (tmp_path / "caps.jsonl").write_text(
        "".join(f'{{"id": "c{i}", "prompt": "{i} + 0", "answer": "{i}"}}\n' for i in range(4))
    )
    return write_config(
        tmp_path,
        f"models: [{{name: m, backend: openai, base_url: '{url}', model: org/m}}]\n"
        + (benchmarks or "benchmarks: [{name: arith, eval: {num_examples: 3}}]\n")
        + gate,
    )


def test_nothing_gated_says_so_instead_of_pass(
    tmp_path: Path, scripted_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, scripted_server(answer_arith).base_url)
    out = tmp_path / "out"
    assert main(["local", str(config), "--output", str(out)], environ={"CI": "1"}) == 0
    captured = capsys.readouterr()
    assert "evalgate: no gate configured" in captured.out
    assert "PASS" not in captured.out.splitlines()[0]
    assert "verdict no gate configured" in captured.err
    assert json.loads((out / "verdict.json").read_text())["status"] == "UNGATED"


def test_a_threshold_makes_it_a_pass(
    tmp_path: Path, scripted_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    gate = "gate: {thresholds: {arith: {accuracy: 0.1}}}\n"
    config = _config(tmp_path, scripted_server(answer_arith).base_url, gate)
    assert main(["local", str(config), "--output", str(tmp_path / "o")], environ={"CI": "1"}) == 0
    assert "## ✅ evalgate: PASS" in capsys.readouterr().out


def test_output_under_a_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--output results.txt/run`: a folder inside a file cannot be made (was exit 4)."""
    config = write_config(tmp_path, "benchmarks: [arith]\n")
    (tmp_path / "results.txt").write_text("not a directory")
    code = main(["local", str(config), "--output", str(tmp_path / "results.txt" / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.strip() == (
        f"evalgate: error: --output {tmp_path / 'results.txt' / 'run'}: "
        f"{tmp_path / 'results.txt'} is a file; give a directory (created if absent)"
    )


def test_empty_output_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--output "$OUT"` with OUT unset would write into the working directory."""
    config = write_config(tmp_path, "benchmarks: [arith]\n")
    assert main(["local", str(config), "--output", ""]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "evalgate: error: --output: empty; give a directory (created if absent)"


def test_output_that_is_a_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, "benchmarks: [arith]\n")
    (tmp_path / "results.txt").write_text("not a directory")
    code = main(["local", str(config), "--output", str(tmp_path / "results.txt")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.strip() == (
        f"evalgate: error: --output {tmp_path / 'results.txt'}: is a file; "
        "give a directory (created if absent)"
    )


def test_ctrl_c_prints_the_resume_command(
    tmp_path: Path, scripted_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupt(body: dict[str, Any], n: int) -> str:
        if n == 0:  # Ctrl-C in the CLI's thread while the first request is in flight
            _thread.interrupt_main()
        return answer_arith(body, n)

    config = _config(tmp_path, scripted_server(interrupt).base_url)
    out = tmp_path / "out"
    assert main(["local", str(config), "--output", str(out)], environ={"CI": "1"}) == 130
    err = capsys.readouterr().err
    (run_dir,) = (out / "evals").glob("*/*")
    assert f"evalgate resume {run_dir.name} --output {out}" in err
    assert main(["resume", run_dir.name, "--output", str(out)], environ={"CI": "1"}) == 0


def test_show_accepts_the_id_runs_prints_for_a_multi_benchmark_run(
    tmp_path: Path, scripted_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    benchmarks = (
        "benchmarks:\n  - {name: arith, eval: {num_examples: 3}}\n"
        "  - {name: caps, kind: jsonl, path: caps.jsonl, scorer: {type: numeric}}\n"
    )
    config = _config(tmp_path, scripted_server(answer_arith).base_url, benchmarks=benchmarks)
    out = tmp_path / "out"
    assert main(["local", str(config), "--output", str(out)], environ={"CI": "1"}) == 0
    capsys.readouterr()
    assert main(["runs", "--output", str(out)]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert len(rows) == 2 and rows[0].split()[0] == rows[1].split()[0]
    assert main(["show", rows[0].split()[0], "--output", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "benchmark  arith" in shown and "benchmark  caps" in shown
    assert main(["show", rows[0].split()[0], "--output", str(out), "--benchmark", "caps"]) == 0
    assert "benchmark  arith" not in capsys.readouterr().out


def test_runs_limit_zero_lists_every_run(
    tmp_path: Path, scripted_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, scripted_server(answer_arith).base_url)
    out = tmp_path / "out"
    for _ in range(3):
        assert main(["local", str(config), "--output", str(out)], environ={"CI": "1"}) == 0
    capsys.readouterr()
    assert main(["runs", "--output", str(out), "--limit", "0"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1 + 3
    assert main(["runs", "--output", str(out), "--limit", "1"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1 + 1
    assert main(["runs", "--output", str(out), "--limit", "-1"]) == 2


def test_doctor_suggests_the_readme_install_command() -> None:
    from evalgate.commands import _doctor_setup  # doctor's prerequisites phase
    from evalgate.serve.llama_cpp import INSTALL_COMMAND

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert INSTALL_COMMAND in readme
    assert "fix=INSTALL_COMMAND" in Path(_doctor_setup.__file__).read_text(encoding="utf-8")


def test_local_points_a_dataset_error_at_its_evals_yaml_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "d.jsonl").write_text('{"prompt": "a", "answer": "b"}\n{"prompt": "c"\n')
    config = write_config(
        tmp_path,
        "models: [{name: m, backend: openai, base_url: 'http://127.0.0.1:9/v1'}]\n"
        "benchmarks:\n  - name: d\n    kind: jsonl\n    path: d.jsonl\n",
    )
    assert main(["local", str(config), "--output", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"evalgate: error: {config}:5: benchmarks[0].path: ")
    assert "d.jsonl:2: invalid JSON" in err and len(err.splitlines()) == 1


def test_quickstart_passes_against_its_baseline_and_fails_a_regression(
    tmp_path: Path, scripted_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's three steps, on a deterministic stand-in for the model: with the
    quickstart's item counts and margin, an unchanged PR PASSes (at arith n = 20 and δ = 3 pp it
    could only ever be INCONCLUSIVE), and the README's regression FAILs."""
    quickstart = ROOT / "examples/quickstart/evals.yaml"
    rows = (ROOT / "examples/quickstart/capitals.jsonl").read_text(encoding="utf-8")
    capitals = {r["prompt"]: r["answer"] for r in map(json.loads, rows.splitlines())}

    def model(body: dict[str, Any], n: int) -> str:
        text = body["messages"][-1]["content"]
        if text.startswith("What is the capital of "):
            return capitals[text.removeprefix("What is the capital of ").rstrip("?")]
        return answer_arith(body, n) if text.startswith("What is ") else "42"

    url = scripted_server(model).base_url
    served = ["--models.smollm2.backend=openai", f"--models.smollm2.base_url={url}"]
    out = tmp_path / "outputs"

    def local(*args: str) -> int:
        argv = ["local", str(quickstart), *served, "--no-cache", *args]
        return main(argv, environ={"CI": "1"})

    assert local("--output", str(out)) == 0
    assert local("--output", str(out / "pr"), "--baseline", str(out)) == 0
    verdict = json.loads((out / "pr" / "verdict.json").read_text())
    assert verdict["status"] == "PASS"
    assert {c["kind"] for c in verdict["checks"] if c["status"] == "PASS"} >= {"baseline"}
    # The question left out (a template that reads no field at all is refused up front).
    regressed = ["--benchmarks.arith.prompt_template=Answer with a number (item {{ id }})."]
    assert local("--output", str(out / "reg"), "--baseline", str(out), *regressed) == 1
    assert "smollm2 / arith / accuracy: Δ -1.000" in (out / "reg" / "scorecard.md").read_text()

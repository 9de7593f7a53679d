"""kind: inspect — an inspect_ai task as a gate benchmark, paired per sample with a baseline.

inspect runs in its own interpreter (EVALGATE_INSPECT_PYTHON: it needs an openai newer than
verifiers allows); these tests skip without one. The scripted server answers over real HTTP."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "examples" / "inspect" / "arith_task.py"
INSPECT_PY = os.environ.get("EVALGATE_INSPECT_PYTHON", "")


def _has_inspect() -> bool:
    if not INSPECT_PY:
        return False
    probe = "import inspect_ai, openai; assert int(openai.__version__.split('.')[0]) >= 3"
    return subprocess.run([INSPECT_PY, "-c", probe], capture_output=True).returncode == 0


needs_inspect = pytest.mark.skipif(
    not _has_inspect(), reason="needs EVALGATE_INSPECT_PYTHON with inspect-ai (see README)"
)


def _config(tmp_path: Path, base_url: str, extra: str = "") -> Path:
    config = tmp_path / "evals.yaml"
    config.write_text(
        f"""
models: [{{name: m, backend: openai, base_url: "{base_url}", model: org/m}}]
benchmarks:
  - name: ia
    kind: inspect
    task: {TASK}@arith
    eval: {{rollouts: 2, max_retries: 0}}
{extra}
"""
    )
    return config


def _adder(wrong: set[str]) -> Any:
    def script(body: dict[str, Any], n: int) -> str:
        a, b = map(int, re.findall(r"\d+", body["messages"][-1]["content"])[:2])
        return "0" if f"add-{a}-{b}" in wrong else str(a + b)

    return script


def _run(tmp_path: Path, config: Path, out: str, *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["local", str(config), "--output", str(tmp_path / out), *args], environ={"CI": "1"})
    return code, json.loads((tmp_path / out / "verdict.json").read_text())


@needs_inspect
def test_samples_are_items_and_epochs_are_rollouts(tmp_path: Path, scripted_server: Any) -> None:
    server = scripted_server(_adder({"add-2-3", "add-7-5"}))
    code, verdict = _run(tmp_path, _config(tmp_path, server.base_url), "out")
    assert code == 0, verdict
    (run_dir,) = (tmp_path / "out" / "evals").glob("*/*")
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(records) == 20  # 10 samples × 2 epochs, one journal line each
    by_item = {(r["example_id"], r["rollout"]): r["reward"] for r in records}
    assert by_item[("add-2-3", 0)] == by_item[("add-2-3", 1)] == 0.0
    assert by_item[("add-4-4", 0)] == 1.0
    assert len(server.requests) == 20  # inspect called the served endpoint itself
    assert list((run_dir / "artifacts").glob("*.eval")), "inspect's own log is kept"


@needs_inspect
@pytest.mark.slow
def test_a_regression_is_paired_per_sample_against_the_baseline(
    tmp_path: Path, scripted_server: Any
) -> None:
    base = scripted_server(_adder(set()))
    _run(tmp_path, _config(tmp_path, base.base_url), "base")
    broken = {f"add-{a}-{b}" for a, b in [(2, 3), (7, 5), (4, 4), (9, 1), (6, 2), (3, 8)]}
    head = scripted_server(_adder(broken))
    code, verdict = _run(
        tmp_path, _config(tmp_path, head.base_url), "head", "--baseline", str(tmp_path / "base")
    )
    (comparison,) = verdict["comparisons"]
    assert comparison["comparable"]
    assert {f["item_id"] for f in comparison["flips"]} == broken
    assert verdict["status"] in ("FAIL", "INCONCLUSIVE") and code in (0, 1)


def test_missing_inspect_is_a_config_error_naming_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if subprocess.run([sys.executable, "-c", "import inspect_ai"]).returncode == 0:
        pytest.skip("this interpreter has inspect_ai")
    monkeypatch.setenv("EVALGATE_INSPECT_PYTHON", sys.executable)
    # validate loads the task as `local` does before serving: the same error, before any run.
    for argv in (["validate"], ["local", "--output", str(tmp_path / "o")]):
        code = main([argv[0], str(_config(tmp_path, "http://127.0.0.1:9/v1")), *argv[1:]])
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert code == 2, argv
        assert "inspect-ai==0.3.285" in err and "EVALGATE_INSPECT_PYTHON" in err


@needs_inspect
def test_a_broken_task_file_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = tmp_path / "broken.py"
    task.write_text(
        "from inspect_ai import task\n@task\ndef t():\n    raise ValueError('no data')\n"
    )
    config = tmp_path / "evals.yaml"
    config.write_text(
        "models: [{name: m, backend: openai, base_url: 'http://127.0.0.1:9/v1'}]\n"
        "benchmarks: [{name: b, kind: inspect, task: broken.py@t}]\n"
    )
    code = main(["local", str(config), "--output", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2
    assert "inspect could not load task" in err and "no data" in err


def _sample(body: dict[str, Any]) -> str:
    a, b = map(int, re.findall(r"\d+", body["messages"][-1]["content"])[:2])
    return f"add-{a}-{b}"


@needs_inspect
@pytest.mark.slow
def test_resume_runs_only_the_samples_left(tmp_path: Path, scripted_server: Any) -> None:
    server = scripted_server(_adder(set()))
    config = _config(tmp_path, server.base_url)
    out = tmp_path / "out"
    # 10 samples x 2 epochs, 10 tokens a request: the cap stops the run part way.
    code = main(
        ["local", str(config), "--output", str(out), "--no-cache", "--budget.tokens=60"],
        environ={"CI": "1"},
    )
    assert code == 3
    (run,) = out.glob("evals/*/*")
    kept = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    done = {(r["example_id"], r["rollout"]) for r in kept}
    assert 0 < len(done) < 20
    left = {s for s in (f"add-{p}" for p in _samples()) if {(s, 0), (s, 1)} - done}
    first = len(server.requests)

    code = main(
        ["resume", run.name, "--output", str(out), "--no-cache", "--budget.tokens=100000"],
        environ={},
    )
    assert code == 0
    again = [_sample(body) for body in server.requests[first:]]
    # Only samples with an epoch missing ran again, each with its epochs (inspect's unit).
    assert set(again) == left and len(again) == 2 * len(left)
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert {(r["example_id"], r["rollout"]) for r in rows} == {
        (f"add-{p}", e) for p in _samples() for e in (0, 1)
    }
    assert len(rows) == 20  # nothing run twice into the journal


def _samples() -> list[str]:
    """The example task's sample ids, without the ``add-`` prefix (see arith_task.py)."""
    text = TASK.read_text()
    return [f"{a}-{b}" for a, b in re.findall(r"\((\d+),\s*(\d+)\)", text)]


@needs_inspect
@pytest.mark.slow
def test_a_model_graded_task_is_graded_by_the_configured_judge(
    tmp_path: Path, scripted_server: Any
) -> None:
    """inspect's `grader` role resolves to evalgate's judge, on its own server and sampling;
    the grader's tokens are counted apart from the candidate's, and the grader is part of the
    measurement (another grader: not comparable)."""
    answers = {"gold": "Au", "planet": "Venus", "spider": "Eight legs", "ocean": "The Pacific"}

    def candidate(body: dict[str, Any], n: int) -> str:
        text = body["messages"][-1]["content"].lower()
        return next(v for k, v in answers.items() if k in text)

    def grader(body: dict[str, Any], n: int) -> str:
        text = body["messages"][-1]["content"]
        expert = re.search(r"\[Expert\]: (.*)", text).group(1).strip().lower()  # type: ignore[union-attr]
        said = re.search(r"\[Submission\]: (.*)", text).group(1).strip().lower()  # type: ignore[union-attr]
        right = said.split()[0] in expert.lower()
        return "Compared with the expert answer.\nGRADE: " + ("C" if right else "I")

    model, judge = scripted_server(candidate), scripted_server(grader)
    config = tmp_path / "evals.yaml"
    config.write_text(
        f"""
models: [{{name: m, backend: openai, base_url: "{model.base_url}", model: org/m}}]
benchmarks:
  - name: facts
    kind: inspect
    task: {TASK.parent / "graded_task.py"}
    eval: {{max_retries: 0}}
    grader:
      model: {{name: grader, backend: openai, base_url: "{judge.base_url}", model: org/grader}}
      sampling: {{temperature: 0.0, max_tokens: 300}}
"""
    )
    code, verdict = _run(tmp_path, config, "out")
    assert code == 0, verdict
    (run_dir,) = (tmp_path / "out" / "evals").glob("*/*")
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    rewards = {r["example_id"]: r["reward"] for r in records}
    assert rewards == {"fact-0": 1.0, "fact-1": 0.0, "fact-2": 1.0, "fact-3": 1.0}
    assert len(judge.requests) == 4 and {b["model"] for b in judge.requests} == {"org/grader"}
    assert {b["max_tokens"] for b in judge.requests} == {300}
    assert len(model.requests) == 4  # the candidate never grades itself
    assert all(r["judge"]["usage"]["prompt_tokens"] > 0 for r in records)
    assert all(r["usage"]["prompt_tokens"] == 7 for r in records)  # the candidate's own
    saved = json.loads((run_dir / "run_config.json").read_text())
    assert saved["fingerprint"]["measurement"]["grader"]["model"]["model"] == "org/grader"
    # The grader's calls went through evalgate's judge relay: counted there (the metadata's
    # judge figures are the records' sums), and cached like evalgate's own judge calls.
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["judge"]["requests"]["calls"] == 4
    assert (
        meta["judge_usage"]["prompt_tokens"]
        == sum(r["judge"]["usage"]["prompt_tokens"] for r in records)
        > 0
    )
    code, _ = _run(tmp_path, config, "again")
    assert code == 0 and len(judge.requests) == 4  # every grading replayed from the cache
    (again,) = (tmp_path / "again" / "evals").glob("*/*")
    meta = json.loads((again / "metadata.json").read_text())
    assert meta["judge"]["requests"]["cache_hits"] == 4


@needs_inspect
@pytest.mark.slow
def test_a_failing_grader_is_a_judge_error(tmp_path: Path, scripted_server: Any) -> None:
    """The grader answers 500: every sample is an error of kind judge_http_500 (the relay saw
    the failure), never a score."""
    model = scripted_server(lambda body, n: "Venus")
    judge = scripted_server(lambda body, n: (500, "grader down", {}))
    config = tmp_path / "evals.yaml"
    config.write_text(
        f"""
models: [{{name: m, backend: openai, base_url: "{model.base_url}", model: org/m}}]
benchmarks:
  - name: facts
    kind: inspect
    task: {TASK.parent / "graded_task.py"}
    eval: {{max_retries: 0}}
    grader:
      model: {{name: grader, backend: openai, base_url: "{judge.base_url}", model: org/grader}}
"""
    )
    code, _ = _run(tmp_path, config, "out")
    (run_dir,) = (tmp_path / "out" / "evals").glob("*/*")
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(records) == 4 and code == 3
    assert all((r["error"] or "").startswith("judge_http_500") for r in records), records

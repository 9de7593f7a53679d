"""Response cache and resume through the CLI: zero calls on a re-run, kill -9 then resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from evalgate.cli import main
from evalgate.run.journal import read_journal
from tests.conftest import ROOT, answer_arith, read_jsonl, write_config


def _cfg(tmp: Path, url: str) -> Path:
    return write_config(
        tmp,
        f"""
models:
  - {{name: scripted, backend: openai, base_url: "{url}", model: org/m}}
benchmarks:
  - name: arith
    eval: {{num_examples: 10, rollouts: 2, max_concurrent: 2}}
""",
    )


def test_cache_rerun_and_no_cache(tmp_path: Path, scripted_server: Any) -> None:
    server = scripted_server(answer_arith)
    cfg = _cfg(tmp_path, server.base_url)
    env = {"CI": "true", "EVALGATE_CACHE_DIR": str(tmp_path / "cache")}
    assert main(["local", str(cfg), "--output", str(tmp_path / "o1")], environ=env) == 0
    assert len(server.requests) == 20
    assert main(["local", str(cfg), "--output", str(tmp_path / "o2")], environ=env) == 0
    assert len(server.requests) == 20  # zero model calls
    (meta,) = (tmp_path / "o2").glob("evals/*/*/metadata.json")
    m = json.loads(meta.read_text())
    assert m["requests"]["cache_hits"] == 20 and m["requests"]["requests"] == 0, m["requests"]
    assert (
        main(["local", str(cfg), "--output", str(tmp_path / "o3"), "--no-cache"], environ=env) == 0
    )
    assert len(server.requests) == 40


def test_kill_then_resume_via_cli(tmp_path: Path, scripted_server: Any) -> None:
    box: dict[str, Any] = {}
    gate = threading.Event()

    def script(body: dict[str, Any], n: int) -> Any:
        if n == 7 and "proc" in box and not gate.is_set():
            gate.set()
            os.kill(box["proc"].pid, signal.SIGKILL)
        return answer_arith(body, n)

    server = scripted_server(script)
    cfg = _cfg(tmp_path, server.base_url)
    env = {
        **os.environ,
        "CI": "true",
        "PYTHONPATH": str(ROOT),
        "EVALGATE_CACHE_DIR": str(tmp_path / "c"),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalgate", "local", str(cfg), "--output", "out", "--no-cache"],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
    )
    box["proc"] = proc
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -9, err
    (run,) = (tmp_path / "out").glob("evals/*/*")
    code = main(
        ["resume", run.name, "--output", str(tmp_path / "out"), "--no-cache"],
        environ={"CI": "true"},
    )
    assert code == 0
    final = read_journal(run / "results.jsonl")
    assert len(final.records) == 20 and final.dropped == 0
    assert len(read_jsonl(run / "results.jsonl")) == 20
    meta = json.loads((run / "metadata.json").read_text())
    assert meta["resumed"]["kept"] + meta["resumed"]["ran"] == 20
    assert meta["num_examples"] == 10 and meta["avg_reward"] == 1.0
    verdict = json.loads((tmp_path / "out" / "verdict.json").read_text())
    assert verdict["status"] == "UNGATED"  # nothing gated: not a PASS

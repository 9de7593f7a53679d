"""One process per run: a second `evalgate resume` of a run that is going on is refused in one
line, and a holder killed with -9 leaves no lock behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from evalgate.cli import main
from tests.conftest import ROOT, answer_arith, run_pipeline, write_config

_HOLDER = """
import sys, time
from pathlib import Path
from evalgate.run.lock import lock_run
lock_run(Path(sys.argv[1]))
print("held", flush=True)
time.sleep(120)
"""


def _hold(run_dir: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(run_dir)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def test_a_second_resume_is_refused_and_a_killed_holder_leaves_no_lock(
    scripted_server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = scripted_server(answer_arith)
    config = write_config(
        tmp_path,
        f"models: [{{name: m, backend: openai, base_url: '{server.base_url}', model: org/m}}]\n"
        "benchmarks: [{name: a, kind: arith, size: 6, eval: {cache: false}}]\n",
    )
    out = tmp_path / "out"
    run_pipeline(config, out)
    (run_dir,) = (p.parent for p in out.glob("evals/*/*/run_config.json"))
    # Cut the journal short, as a crash would: a resume has work to do.
    results = run_dir / "results.jsonl"
    results.write_text("".join(results.read_text().splitlines(True)[:2]))
    sent = len(server.requests)
    holder = _hold(run_dir)
    try:
        code = main(["resume", run_dir.name, "--output", str(out), "--no-cache"],
                    environ={"CI": "1"})  # fmt: skip
        err = capsys.readouterr().err
        assert code == 2, err
        line = err.strip().splitlines()[-1]
        assert "Traceback" not in err, err
        assert f"pid {holder.pid}" in line and "another evalgate" in line
        assert len(server.requests) == sent  # nothing was run twice
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
    code = main(["resume", run_dir.name, "--output", str(out), "--no-cache"], environ={"CI": "1"})
    assert code == 0, capsys.readouterr().err
    assert len(server.requests) == sent + 4
    assert len(results.read_text().splitlines()) == 6


def test_a_run_going_on_is_held_by_its_process(tmp_path: Path) -> None:
    from evalgate.run.lock import lock_run, unlock_run

    lock_run(tmp_path)
    try:
        probe = subprocess.run(
            [sys.executable, "-c", "import sys; from pathlib import Path; "
             "from evalgate.run.lock import lock_run; lock_run(Path(sys.argv[1]))", str(tmp_path)],
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        assert probe.returncode != 0 and f"pid {os.getpid()}" in probe.stderr
    finally:
        unlock_run(tmp_path)

"""Two `evalgate local` runs on one output folder at the same time: the root scorecard and
verdict.json name both, and each invocation's own report is kept (reports/RUN_ID/).

Real processes: run A's model holds its replies until run B's process has exited, so A starts
before B and finishes after it, whatever the machine's load."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.conftest import answer_arith, python_child
from tests.fault_server import Answer, FaultServer

ROOT = Path(__file__).resolve().parent.parent


def _config(path: Path, label: str, url: str) -> Path:
    path.write_text(
        f"""
models:
  - {{name: {label}, backend: openai, base_url: "{url}", model: org/{label}}}
benchmarks:
  - name: arith
    eval: {{num_examples: 2, request_timeout_s: 600}}
""",
        encoding="utf-8",
    )
    return path


def _local(config: Path, out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CI": "true"}
    argv = [sys.executable, "-m", "evalgate", "local", str(config), "--output", str(out)]
    return subprocess.Popen([*argv, "--no-cache"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def _answer(key: Any) -> Answer:
    return Answer(answer_arith({"messages": [{"content": key[0]}]}, 0))


def test_two_local_runs_at_once_are_both_named(tmp_path: Path, scripted_server: Any) -> None:
    out = tmp_path / "out"
    a_asked, b_done = threading.Event(), threading.Event()

    async def held(key: Any, attempt: int, n: int) -> Answer:
        a_asked.set()
        while not b_done.is_set():  # the run goes on once B has finished
            await asyncio.sleep(0.02)
        return _answer(key)

    b_server = scripted_server(answer_arith)
    with FaultServer(held) as a_server:
        a = _local(_config(tmp_path / "a.yaml", "a", a_server.base_url), out)
        assert a_asked.wait(300), a.communicate()
        b = _local(_config(tmp_path / "b.yaml", "b", b_server.base_url), out)
        _, b_err = b.communicate(timeout=600)
        assert b.returncode == 0, b_err
        b_done.set()
        _, a_err = a.communicate(timeout=600)
        assert a.returncode == 0, a_err

    verdict = json.loads((out / "verdict.json").read_text())
    a_id, (b_entry,) = verdict["invocation"]["run_id"], verdict["concurrent_invocations"]
    assert [r["model"] for r in verdict["runs"]] == ["a"]  # the root is A's, the last to finish
    assert b_entry["runs"] == ["b/arith"] and b_entry["status"] == "UNGATED"
    scorecard = (out / "scorecard.md").read_text()
    note = f"another invocation wrote to this folder while this one ran: run `{b_entry['run_id']}`"
    assert note in "\n".join(scorecard.splitlines()[:4]), scorecard
    assert f"`reports/{b_entry['run_id']}/scorecard.md`" in scorecard
    # Each invocation's own report is kept: B's names B's run, A's names A's.
    for run_id, model in ((b_entry["run_id"], "b"), (a_id, "a")):
        own = json.loads((out / "reports" / run_id / "verdict.json").read_text())
        assert [r["model"] for r in own["runs"]] == [model]
        assert (out / "reports" / run_id / "scorecard.md").is_file()

    # A later run on the folder (none at the same time) names no other.
    c = _local(_config(tmp_path / "c.yaml", "c", b_server.base_url), out)
    _, c_err = c.communicate(timeout=600)
    assert c.returncode == 0, c_err
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["concurrent_invocations"] == []
    assert "another invocation" not in (out / "scorecard.md").read_text()


def test_a_first_report_into_a_folder_parses_no_run_id_time(tmp_path: Path) -> None:
    """Which invocations ran at the same time is read from the folder's verdict.json: with none
    there (a first report), the run id's time is not parsed, so time.strptime's module (~3 ms
    of every run) is not loaded; with one there, the invocations it names are sorted as before."""
    code = (
        "import sys, json\n"
        "from pathlib import Path\n"
        "from evalgate.report.shared_folder import concurrent_invocations\n"
        "root = Path(sys.argv[1])\n"
        "assert concurrent_invocations(root, '20261129-070000-000abc') == []\n"
        "loaded = '_strptime' in sys.modules\n"
        "(root / 'verdict.json').write_text(json.dumps({'invocation': {\n"
        "    'run_id': '20261129-065959-000def', 'finished_at': 1.9e9}}))\n"
        "named = concurrent_invocations(root, '20261129-070000-000abc')\n"
        "print(json.dumps([loaded, [e['run_id'] for e in named]]))\n"
    )
    proc = python_child(code, str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == [False, ["20261129-065959-000def"]]

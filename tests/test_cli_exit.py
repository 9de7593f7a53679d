"""The command leaves without the interpreter's teardown (evalgate.cli._leave), losing nothing:
atexit handlers run, piped output arrives whole, the exit code is the command's, and a thread
still running is waited for."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import ROOT, python_child


def test_atexit_handlers_run_and_piped_output_arrives_whole(tmp_path: Path) -> None:
    marker = tmp_path / "atexit-ran"
    code = (
        "import atexit, pathlib, sys\n"
        f"atexit.register(pathlib.Path({str(marker)!r}).write_text, 'yes')\n"
        "import evalgate.cli\n"
        "sys.argv = ['evalgate', 'schema']\n"
        "evalgate.cli.entry()\n"
    )
    proc = python_child(code, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    schema = json.loads(proc.stdout)  # tens of kB through a pipe: all of it, flushed
    assert "properties" in schema
    assert marker.read_text() == "yes"


def test_the_exit_code_is_the_commands(tmp_path: Path) -> None:
    proc = python_child(
        "import sys, evalgate.cli\nsys.argv = ['evalgate', 'validate', 'missing.yaml']\n"
        "evalgate.cli.entry()\n",
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "missing.yaml" in proc.stderr


def test_a_thread_still_running_is_waited_for(tmp_path: Path) -> None:
    done = tmp_path / "thread-done"
    code = (
        "import pathlib, sys, threading, evalgate.cli\n"
        "go = threading.Event()\n"
        "def late():\n"
        "    go.wait()\n"
        f"    pathlib.Path({str(done)!r}).write_text('done')\n"
        "threading.Thread(target=late).start()\n"
        "import atexit\n"
        "sys.argv = ['evalgate', '--version']\n"
        # The thread may write only once the command has returned: if the exit did not wait
        # for it, the file would never appear.
        "import evalgate.cli as c\n"
        "main = c.main\n"
        "c.main = lambda *a, **k: (main(*a, **k), go.set())[0]\n"
        "c.entry()\n"
    )
    proc = python_child(code, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert done.read_text() == "done"


def test_python_dash_m_and_the_console_script_take_the_same_exit() -> None:
    main = (ROOT / "evalgate" / "__main__.py").read_text(encoding="utf-8")
    assert "entry()" in main
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'evalgate = "evalgate.cli:entry"' in pyproject

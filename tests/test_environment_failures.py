"""When the machine fails evalgate (a full disk, a read-only output folder, a runner's second
signal, a key with a newline, an interpreter that isn't there), the user reads one line and
exit 2 or 3, never "a bug in evalgate"; the journal holds only whole lines; a crash log is
written only for a real bug, and only under the command's own output folder."""

from __future__ import annotations

import errno
import json
import os
import pathlib
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from evalgate.run.engine import _append
from tests.conftest import ROOT, answer_arith, write_config


def _config(tmp_path: Path, base_url: str, size: int = 20, extra: str = "") -> Path:
    return write_config(
        tmp_path,
        f"models: [{{name: m, backend: openai, base_url: '{base_url}', model: org/m{extra}}}]\n"
        f"benchmarks: [{{name: a, kind: arith, size: {size}, eval: {{cache: false}}}}]\n",
    )


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "CI": "true"}


def test_a_full_disk_mid_run_is_exit_3_with_whole_journal_lines(
    scripted_server, tmp_path: Path
) -> None:
    """RLIMIT_FSIZE stands in for a full disk without root: writes past it fail (EFBIG), after a
    short write, as a disk that fills up mid-batch does."""
    server = scripted_server(answer_arith)
    config = _config(tmp_path, server.base_url, size=2000)
    out = tmp_path / "out"
    limit = 200_000  # a few hundred records: the journal hits it mid-run

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run(
        [sys.executable, "-m", "evalgate", "local", str(config), "--no-cache",
         "--output", str(out)],
        capture_output=True, text=True, env=_env(), preexec_fn=cap, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    verdict = json.loads((out / "verdict.json").read_text())  # small: it still fits
    assert verdict["status"] == "ERROR" and "File too large" in json.dumps(verdict["reasons"])
    (journal,) = out.glob("evals/*/*/results.jsonl")
    data = journal.read_bytes()
    assert data and data.endswith(b"\n") and len(data) <= limit
    lines = data.decode().splitlines()
    assert all(json.loads(line)["error"] is None for line in lines)  # no torn line
    assert len(lines) < 2000
    assert not list(tmp_path.rglob("crash.log"))
    # The line names the file that failed and the command that finishes the run; nothing is
    # left half written (an atomic write's temporary file).
    run_id = journal.parent.name
    said = proc.stdout + proc.stderr  # the scorecard's reason and the log
    assert str(journal) in said, said
    assert f"evalgate resume {run_id} --output {out}" in said, said
    assert not list(out.rglob("*.tmp"))


def test_a_failed_append_leaves_no_torn_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = tmp_path / "results.jsonl"
    journal.write_text('{"a":1}\n')
    real_write = os.write
    calls = []

    def disk_fills(fd: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[:5]))  # a short write, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    with journal.open("a", encoding="utf-8") as fh:
        monkeypatch.setattr(os, "write", disk_fills)
        with pytest.raises(OSError, match="No space"):
            _append(fh, b'{"b":2}\n{"c":3}\n')
        monkeypatch.undo()
    assert len(calls) == 2
    assert journal.read_text() == '{"a":1}\n'


def test_a_read_only_output_folder_is_exit_3_one_line(
    scripted_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    server = scripted_server(answer_arith)
    config = _config(tmp_path, server.base_url)
    out = tmp_path / "out"
    real_mkdir = pathlib.Path.mkdir

    def read_only(self: Path, *args, **kwargs) -> None:  # what EROFS looks like (root or not)
        if str(self).startswith(str(out)):
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "mkdir", read_only)
    code = main(["local", str(config), "--output", str(out), "--no-cache"], environ={"CI": "1"})
    err = capsys.readouterr().err
    assert code == 3, err
    (line,) = [x for x in err.splitlines() if x.startswith("evalgate:")]
    assert "Read-only file system" in line and str(out) in line
    assert not list(tmp_path.rglob("crash.log"))


def test_a_bug_without_an_output_folder_leaves_no_shared_crash_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    import tempfile

    shared = Path(tempfile.gettempdir()) / "crash.log"
    before = shared.stat().st_mtime_ns if shared.exists() else None

    def broken(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr("evalgate.commands.validate.run", broken)
    config = _config(tmp_path, "http://127.0.0.1:9/v1")
    assert main(["validate", str(config)]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "EVALGATE_TRACEBACK=1" in err and "Traceback" not in err
    assert (shared.stat().st_mtime_ns if shared.exists() else None) == before


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (signal.SIGINT, signal.SIGTERM),
        (signal.SIGTERM, signal.SIGINT),
        (signal.SIGINT, signal.SIGINT),
        (signal.SIGTERM, signal.SIGTERM),
    ],
)
def test_a_second_signal_soon_after_the_first_still_exits_130(
    tmp_path: Path, first: int, second: int
) -> None:
    import socket

    silent = socket.socket()  # accepts, never answers: requests stay in flight
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    try:
        config = _config(tmp_path, f"http://127.0.0.1:{silent.getsockname()[1]}/v1", size=4)
        proc = subprocess.Popen(
            [sys.executable, "-m", "evalgate", "local", str(config), "--no-cache",
             "--output", str(tmp_path / "out")],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=_env(),
        )  # fmt: skip
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if line.startswith("[evalgate] a: 0/4"):
                break
        proc.send_signal(first)
        time.sleep(0.05)
        proc.send_signal(second)
        rest = proc.stderr.read()
        assert proc.wait(timeout=60) == 130, "".join(seen) + rest
        assert "Traceback" not in rest
    finally:
        silent.close()


def test_an_api_key_with_a_trailing_newline_is_stripped(scripted_server, tmp_path: Path) -> None:
    server = scripted_server(answer_arith)
    config = _config(tmp_path, server.base_url, size=3, extra=", api_key_env: MY_KEY")
    code = main(["local", str(config), "--output", str(tmp_path / "o"), "--no-cache"],
                environ={"CI": "1", "MY_KEY": "sk-test-123\n"})  # fmt: skip
    assert code == 0
    assert set(server.authorization) == {"Bearer sk-test-123"}


def test_an_api_key_with_a_line_break_inside_is_one_line_exit_2(
    scripted_server, tmp_path: Path, capsys
) -> None:
    server = scripted_server(answer_arith)
    config = _config(tmp_path, server.base_url, size=3, extra=", api_key_env: MY_KEY")
    code = main(["local", str(config), "--output", str(tmp_path / "o"), "--no-cache"],
                environ={"CI": "1", "MY_KEY": "sk-test\n-123"})  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    (line,) = [x for x in err.splitlines() if x.startswith("evalgate:")]
    assert "MY_KEY" in line and "line break" in line and "sk-test" not in line
    assert server.requests == []


def test_a_missing_inspect_interpreter_is_one_line_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("EVALGATE_INSPECT_PYTHON", str(tmp_path / "no-venv/bin/python"))
    config = write_config(
        tmp_path,
        "models: [{name: m, backend: openai, base_url: 'http://127.0.0.1:9/v1', model: org/m}]\n"
        "benchmarks: [{name: ia, kind: inspect, task: task.py@arith}]\n",
    )
    (tmp_path / "task.py").write_text("")
    for argv in (["validate", str(config)], ["local", str(config), "--output", str(tmp_path)]):
        code = main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2, err
        assert "EVALGATE_INSPECT_PYTHON" in err[-1] and "no-venv" in err[-1]
        assert "Traceback" not in "\n".join(err)


def test_a_failed_atomic_write_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """verdict.json and the other run files are written through a temporary file: a full disk
    mid-write leaves the old file whole and no `.tmp` beside it."""
    from evalgate.run.rundir import write_json

    target = tmp_path / "verdict.json"
    write_json(target, {"status": "PASS"})
    real = pathlib.Path.open

    class FillingDisk:
        """A file written for writing that takes 10 characters, then the disk is full."""

        def __init__(self, fh: Any, path: Path) -> None:
            self.fh, self.path, self.room = fh, path, 10

        def write(self, text: str) -> int:
            if len(text) > self.room:
                self.fh.write(text[: self.room])
                self.room = 0
                raise OSError(errno.ENOSPC, "No space left on device", str(self.path))
            self.room -= len(text)
            return int(self.fh.write(text))

        def __enter__(self) -> FillingDisk:
            return self

        def __exit__(self, *exc: object) -> None:
            self.fh.close()

        def __getattr__(self, name: str) -> Any:
            return getattr(self.fh, name)

    def disk_fills(self: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        fh = real(self, mode, *args, **kwargs)  # write_text opens through here too
        return FillingDisk(fh, self) if "w" in mode else fh

    monkeypatch.setattr(pathlib.Path, "open", disk_fills)
    with pytest.raises(OSError, match="No space"):
        write_json(target, {"status": "FAIL"})
    monkeypatch.undo()
    assert json.loads(target.read_text()) == {"status": "PASS"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["verdict.json"]

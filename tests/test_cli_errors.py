"""Crashes and cancellations never read as verdicts: exit 4 with a crash log, SIGTERM clean."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import _Terminate, main
from tests.conftest import ROOT, write_config


def test_an_unexpected_exception_is_exit_4_one_line_and_a_crash_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("a bug, with the key sk-live-0123456789 in it")

    monkeypatch.setattr("evalgate.pipeline.run", broken)
    config = write_config(tmp_path, "benchmarks: [{name: a, kind: arith, size: 3}]\n")
    out = tmp_path / "out"
    code = main(["local", str(config), "--output", str(out)],
                environ={"OPENAI_API_KEY": "sk-live-0123456789"})  # fmt: skip
    assert code == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("evalgate: internal error (KeyError")
    assert "Traceback" not in err and str(out / "crash.log") in err
    log = (out / "crash.log").read_text()
    assert "Traceback" in log and "in broken" in log
    assert "sk-live-0123456789" not in log  # secrets from the environment are blanked


def test_sigterm_while_cleaning_up_is_ignored_not_a_second_interrupt() -> None:
    handler = _Terminate()
    with pytest.raises(KeyboardInterrupt):
        handler(signal.SIGTERM, None)
    assert handler(signal.SIGTERM, None) is None  # the runner's follow-up signal


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """A model endpoint that accepts connections and never answers: the run hangs in flight."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    stop.set()
    server.close()
    for conn in held:
        conn.close()


def test_sigterm_mid_run_exits_130_without_a_traceback(
    tmp_path: Path, silent_endpoint: str
) -> None:
    config = write_config(
        tmp_path,
        f"models: [{{name: m, backend: openai, base_url: '{silent_endpoint}', model: org/m}}]\n"
        "benchmarks: [{name: a, kind: arith, size: 4}]\n",
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CI": "true"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalgate", "local", str(config), "--no-cache",
         "--output", str(tmp_path / "out")],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env,
    )  # fmt: skip
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:  # wait for the requests to be in flight, then cancel like a runner
        seen.append(line)
        if line.startswith("[evalgate] a: 0/4"):
            break
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGTERM)
    rest = proc.stderr.read()
    assert proc.wait(timeout=60) == 130, "".join(seen) + rest
    assert "Traceback" not in rest and "interrupted" in rest


@pytest.mark.parametrize(
    ("argv", "hint"),
    [([], "`evalgate --help`"), (["show"], "`evalgate show --help`")],
)
def test_usage_errors_name_the_help_to_read(
    argv: list[str], hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert hint in line and "evalgate evalgate" not in line


def test_a_reader_that_stops_reading_is_not_a_crash(tmp_path: Path) -> None:
    # `evalgate schema | head -c 1`: the schema (~100 KB) is more than a pipe holds, so the
    # writer meets the closed pipe whatever the timing.
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalgate", "schema"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None and proc.stdout.read(1) == b"{"
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert b"internal error" not in err and b"Traceback" not in err and b"Broken pipe" not in err


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["validate", "examples/quickstart/evals.yaml"], 0),  # "items × rollouts" on stdout
        (["validate", "no-such-evals.yaml"], 2),  # an error line on stderr
    ],
)
def test_a_terminal_that_cannot_encode_the_output_is_not_a_crash(
    argv: list[str], code: int
) -> None:
    """An ASCII-only terminal or log (PYTHONIOENCODING=ascii, LANG=C on old systems) gets the
    same lines with the symbols it cannot show replaced, and the command's own exit code."""
    done = subprocess.run(
        [sys.executable, "-m", "evalgate", *argv],
        capture_output=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "ascii"},
        timeout=300,
    )
    assert done.returncode == code, done.stderr
    assert b"internal error" not in done.stderr and b"Traceback" not in done.stderr
    assert done.stdout.isascii() and done.stderr.isascii()
    if code == 0:
        assert b"items ? " in done.stdout  # the line is kept, its "×" replaced

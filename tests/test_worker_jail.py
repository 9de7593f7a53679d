"""The jail repository code's workers run in (``evalgate/sandbox/worker.py``), as real processes.

A hostile worker tries the runner's checkout token (``.git/config``), a file in the runner's
home, writes to the exam tree and to evalgate's install, its capabilities, and a ``setsid``
daemon meant to outlive its step. Jailed (bubblewrap), all of it fails or ends with the step;
without bubblewrap, the fallback still kills its process group and gives it a home of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import evalgate
from evalgate.sandbox import worker
from evalgate.sandbox.worker import jail

MARK = "evalgate-test-jail-daemon"

PROBE = """
import json, os, subprocess, sys
paths = json.loads(sys.argv[1])

def _read(path):
    try:
        open(path, "rb").read()
        return "read"
    except OSError:
        return "denied"

def _write(path):
    try:
        open(path, "a").write("x")
        return "wrote"
    except OSError:
        return "denied"

seen = {"git": _read(paths["git"]), "home": _read(paths["home"]), "data": _read(paths["data"]),
        "exam": _write(paths["exam"]), "install": _write(paths["install"]),
        "uid": os.getuid(), "home_env": os.environ.get("HOME"), "secret": os.environ.get("SECRET"),
        "caps": open("/proc/self/status").read().split("CapEff:")[1].split()[0]}
# One daemon in a session of its own, one left in the worker's group.
for extra in ({"start_new_session": True}, {}):
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", paths["mark"]],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, **extra)
with open(os.path.join(paths["out"], "seen.json"), "w") as fh:
    json.dump(seen, fh)
"""


def _left(mark: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if mark.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _gone(mark: str) -> bool:
    deadline = time.monotonic() + 30  # the kernel reaps asynchronously: waited for, not raced
    while _left(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _left(mark)


@pytest.fixture
def layout() -> Iterator[dict[str, str]]:
    # Outside pytest's private (0700) folders: reachable by nobody, as a runner's workspace is.
    tmp_path = Path(tempfile.mkdtemp(prefix="evalgate-jail-test-"))
    tmp_path.chmod(0o755)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text("[http]\n\textraheader = basic ghs_x\n")
    (repo / "task.py").write_text("# the exam's task\n")
    (repo / "data.jsonl").write_text("{}\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / "id_rsa").write_text("PRIVATE KEY")
    out = tmp_path / "out"
    out.mkdir()
    mark = f"{MARK}-{os.getpid()}-{tmp_path.name}"
    install = Path(evalgate.__file__).parent / f"jail-was-here-{tmp_path.name}.py"
    yield {
        "repo": str(repo),
        "git": str(repo / ".git" / "config"),
        "home": str(home / "id_rsa"),
        "home_dir": str(home),
        "data": str(repo / "data.jsonl"),
        "exam": str(repo / "task.py"),
        "install": str(install),
        "out": str(out),
        "mark": mark,
    }
    install.unlink(missing_ok=True)
    shutil.rmtree(tmp_path, ignore_errors=True)
    for pid in _left(mark):  # the test's own leftovers, if containment failed
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _run(paths: dict[str, str], python: str) -> tuple[dict[str, object], worker.Jail]:
    env = {"PATH": "/usr/bin:/bin", "HOME": paths["home_dir"], "SECRET": "routed"}
    jailed = jail(
        [python, "-c", PROBE, json.dumps(paths)],
        env=env,
        python=python,
        writes=[paths["out"]],
        cwd=paths["repo"],
    )
    proc = subprocess.Popen(jailed.argv, env=jailed.env, cwd=jailed.cwd, **jailed.options)
    try:
        assert proc.wait(timeout=120) == 0
    finally:
        jailed.end(proc.pid)
    return json.loads(Path(paths["out"], "seen.json").read_text()), jailed


@pytest.mark.skipif(worker.fallback_reason() is not None, reason="needs bubblewrap")
def test_a_jailed_worker_sees_only_its_binds_and_leaves_nothing(layout: dict[str, str]) -> None:
    seen, jailed = _run(layout, sys.executable)
    assert jailed.confined
    assert seen["data"] == "read"  # its own folder, read-only
    assert seen["git"] == "denied" and seen["home"] == "denied"
    assert seen["exam"] == "denied" and Path(layout["exam"]).read_text() == "# the exam's task\n"
    assert seen["install"] == "denied" and not Path(layout["install"]).exists()
    assert int(str(seen["caps"]), 16) == 0
    assert seen["secret"] == "routed" and seen["home_env"] == worker.HOME
    assert _gone(layout["mark"])  # the setsid daemon too: the pid namespace ended
    # Its environment never travels on a command line (any user of the machine reads those).
    assert not any("routed" in arg for arg in jailed.argv)


def test_without_bubblewrap_the_workers_group_is_killed_and_its_home_is_its_own(
    layout: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(worker, "fallback_reason", lambda: "no user namespaces (test)")
    monkeypatch.setattr(worker, "_warned", set())
    # A python nobody can reach, as root: the fallback then runs it as nobody.
    python = "/usr/bin/python3" if Path("/usr/bin/python3").is_file() else sys.executable
    seen, jailed = _run(layout, python)
    assert not jailed.confined
    err = capsys.readouterr().err
    assert err.count("runs without its sandbox here: no user namespaces (test)") == 1, err
    assert seen["home_env"] == jailed.home and not Path(str(jailed.home)).exists()
    assert seen["secret"] == "routed"
    # The process left in its group is gone (the setsid one is the fallback's stated gap).
    deadline = time.monotonic() + 30
    while len(_left(layout["mark"])) > 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(_left(layout["mark"])) <= 1
    if os.geteuid() == 0 and python == "/usr/bin/python3":  # a root gate: the worker is nobody
        assert seen["uid"] == 65534 and int(str(seen["caps"]), 16) == 0
        assert seen["exam"] == "denied" and seen["install"] == "denied"


@pytest.mark.skipif(worker.fallback_reason() is not None, reason="needs bubblewrap")
def test_the_docker_socket_is_reachable_only_where_the_benchmark_declares_docker_host(
    layout: dict[str, str],
) -> None:
    import socket

    path = os.path.join(layout["out"], "docker.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(4)
    probe = (
        "import socket, sys\ns = socket.socket(socket.AF_UNIX)\n"
        f"try:\n s.connect({path!r}); print('connected')\nexcept OSError: print('refused')"
    )

    def attempt(env: dict[str, str]) -> str:
        jailed = jail([sys.executable, "-c", probe], env=env, python=sys.executable)
        done = subprocess.run(jailed.argv, env=jailed.env, cwd=jailed.cwd, capture_output=True,
                              text=True, timeout=120, **jailed.options)  # fmt: skip
        return done.stdout.strip()

    try:
        assert attempt({"PATH": "/usr/bin:/bin"}) == "refused"
        assert attempt({"PATH": "/usr/bin:/bin", "DOCKER_HOST": f"unix://{path}"}) == "connected"
    finally:
        server.close()


@pytest.mark.skipif(worker.fallback_reason() is not None, reason="needs bubblewrap")
def test_a_task_run_from_the_runners_home_gets_its_file_not_the_home(
    layout: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = Path(layout["repo"])  # the task file sits in the runner's home (evalgate run from ~)
    monkeypatch.setenv("HOME", str(home))
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY")
    probe = (
        "import json, os\nout = {}\nfor name in ('task.py', 'data.jsonl', '.ssh/id_rsa'):\n"
        " try:\n  open(name).read(); out[name] = 'read'\n except OSError:\n  out[name] = 'denied'\n"
        "print(json.dumps(out))"
    )
    jailed = jail(
        [sys.executable, "-c", probe],
        env={"PATH": "/usr/bin:/bin"},
        python=sys.executable,
        reads=[home / "task.py"],
        cwd=home,
    )
    done = subprocess.run(jailed.argv, env=jailed.env, cwd=jailed.cwd, capture_output=True,
                          text=True, timeout=120, **jailed.options)  # fmt: skip
    assert json.loads(done.stdout) == {
        "task.py": "read",
        "data.jsonl": "denied",
        ".ssh/id_rsa": "denied",
    }, done.stderr

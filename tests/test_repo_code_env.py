"""Code that comes from the repository runs with a cleared environment and cannot read the gate's.

An inspect task file and a verifiers environment are the repository's code (often the PR's) run
on this machine: they get PATH, HOME, locale, CA and proxy settings, the endpoint of the model
under test, and the variables their benchmark declares (``pass_env``) — never the runner's
tokens or other keys — and they cannot read the gate's ``/proc/PID/environ`` (the gate is not
dumpable; a root gate drops its children's capabilities, which would bypass that).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from evalgate._repo_code import repo_env
from evalgate.config.load import load_config
from evalgate.suites import build_suites

SECRETS = ("GITHUB_TOKEN", "INPUT_GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN", "OPENAI_API_KEY")
DAEMON = "evalgate-test-daemon-left-by-a-task"

# Module-level code: it runs when inspect loads the task (listing its samples). It tries what a
# hostile pull request's task file would, and reports what it got as its one sample's input (the
# only way out it has: results cross as data).
SPY = """
import json, os, subprocess, sys

def _read(path):
    try:
        with open(path, "rb") as fh:
            return "read: " + fh.read(300).decode("utf-8", "replace")
    except OSError as exc:
        return f"denied: {exc.errno}"

def _write(path):
    try:
        with open(path, "a") as fh:
            fh.write("# rewritten by the task\\n")
        return "wrote"
    except OSError as exc:
        return f"denied: {exc.errno}"

seen = {name: os.environ.get(name) for name in %(secrets)r}
seen["declared"] = os.environ.get("SPY_DECLARED")
seen["proc:gate"] = _read("/proc/%(gate)d/environ")
seen["proc:parent"] = _read(f"/proc/{os.getppid()}/environ")
seen["git_config"] = _read(%(git_config)r)
seen["home_file"] = _read(%(home_file)r)
seen["exam_file"] = _write(%(exam_file)r)
seen["install"] = _write(%(install)r)
seen["caps"] = open("/proc/self/status").read().split("CapEff:")[1].split()[0]
# A daemon in a session of its own, meant to outlive the step (and read the next worker's keys).
subprocess.Popen(["setsid", sys.executable, "-c", "import time; time.sleep(600)", %(daemon)r],
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                 start_new_session=True)
REPORT = json.dumps(seen)
"""

TASK = """
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import match


@task
def spy():
    return Task(dataset=[Sample(input=REPORT, target="2")], scorer=match())
"""


def _inspect_python() -> str | None:
    python = os.environ.get("EVALGATE_INSPECT_PYTHON")
    if not python:
        return None
    return python if subprocess.run([python, "-c", "import inspect_ai"]).returncode == 0 else None


def _daemons() -> list[int]:
    """This machine's processes that carry the daemon's marker on their command line."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if DAEMON.encode() in cmdline:
                found.append(int(entry.name))
    return found


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SECRETS:
        monkeypatch.setenv(name, f"secret-{name}")
    monkeypatch.setenv("SPY_DECLARED", "declared-value")


@pytest.fixture
def no_daemon() -> Any:
    yield
    for pid in _daemons():  # the test's own leftovers, if containment failed
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(_inspect_python() is None, reason="needs EVALGATE_INSPECT_PYTHON (inspect-ai)")
def test_an_inspect_task_file_runs_jailed_with_only_its_declared_secrets(
    tmp_path: Path, secrets: None, no_daemon: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import evalgate

    # A checkout whose .git/config holds the job's token (persisted credentials), the task file
    # at its root, a second task file of the exam beside it, a file in the runner's home.
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text("[http]\n\textraheader = AUTHORIZATION: basic ghs_x\n")
    exam_file = repo / "base_task.py"
    exam_file.write_text("# the base's task\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / "id_rsa").write_text("PRIVATE KEY")
    monkeypatch.setenv("HOME", str(home))
    install = Path(evalgate.__file__).parent / "jailed-task-was-here.py"
    task = repo / "spy.py"
    task.write_text(
        SPY
        % {
            "secrets": SECRETS,
            "gate": os.getpid(),
            "git_config": str(repo / ".git" / "config"),
            "home_file": str(home / "id_rsa"),
            "exam_file": str(exam_file),
            "install": str(install),
            "daemon": DAEMON,
        }
        + TASK
    )
    config = tmp_path / "evals.yaml"
    config.write_text(
        "models: [{name: m, backend: openai, base_url: 'http://127.0.0.1:9/v1'}]\n"
        f"benchmarks:\n  - {{name: b, kind: inspect, task: '{task}@spy', "
        "pass_env: [SPY_DECLARED]}\n"
    )
    try:
        suite = build_suites(load_config(config, []).benchmarks[0])[0]
    finally:
        wrote_install = install.exists()
        install.unlink(missing_ok=True)
    seen = json.loads(suite.items[0].prompt)  # type: ignore[attr-defined]
    leaked = {k: v for k, v in seen.items() if k in SECRETS and v is not None}
    assert not leaked, leaked
    assert seen["declared"] == "declared-value"  # what the benchmark declares does arrive
    for key in ("proc:gate", "git_config", "home_file"):
        assert seen[key].startswith("denied: "), (key, seen[key])
    assert "secret-" not in seen["proc:parent"]  # its parent holds what it holds, if anything
    assert seen["exam_file"].startswith("denied: "), seen["exam_file"]
    assert exam_file.read_text() == "# the base's task\n"
    # evalgate's install is never written: inside the jail the write is refused, or (an install
    # under /tmp, where the jail has its own tmpfs) lands in the jail's private /tmp only.
    assert not wrote_install, seen["install"]
    if not str(install).startswith("/tmp/"):
        assert seen["install"].startswith("denied: "), seen["install"]
    assert int(seen["caps"], 16) == 0, seen["caps"]  # no capability at all, root gate or not
    # Nothing it started outlives its step: the daemon is gone by the time the list returns
    # (waited for, not raced: the kernel reaps a pid namespace asynchronously).
    deadline = time.monotonic() + 30
    while _daemons() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _daemons() == []


def test_the_environment_is_cleared_to_what_is_needed_and_declared() -> None:
    gate = {
        "PATH": "/usr/bin",
        "HOME": "/home/r",
        "LANG": "C.UTF-8",
        "GITHUB_TOKEN": "t",
        "INPUT_GITHUB_TOKEN": "t",
        "ACTIONS_RUNTIME_TOKEN": "t",
        "ACTIONS_ID_TOKEN_REQUEST_URL": "u",
        "OPENAI_API_KEY": "k",
        "AWS_SECRET_ACCESS_KEY": "k",
        "JUDGE_KEY": "j",
        "PYTHONPATH": "/pr/checkout",
        "LD_PRELOAD": "/pr/evil.so",
    }
    env = repo_env(["JUDGE_KEY", "NOT_SET"], {"EVALGATE_API_KEY": "endpoint"}, environ=gate)
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "/home/r",
        "LANG": "C.UTF-8",
        "JUDGE_KEY": "j",
        "EVALGATE_API_KEY": "endpoint",
    }


# Run by a non-root gate: its child (same uid, no capabilities to lose) tries the gate's environ.
_NON_ROOT_GATE = """
import os, subprocess, sys
from evalgate._repo_code import spawn_options
protect = sys.argv[1] == "protect"
options = spawn_options() if protect else {}
probe = (
    "import os\\ntry:\\n open(f'/proc/{os.getppid()}/environ', 'rb').read(); print('read')\\n"
    "except OSError: print('denied')"
)
done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, **options)
print(done.stdout.strip())
"""


def _as_nobody() -> list[str] | None:
    python = "/usr/bin/python3"
    if os.geteuid() != 0 or not Path(python).is_file() or not Path("/usr/bin/setpriv").is_file():
        return None
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c"]


@pytest.mark.skipif(_as_nobody() is None, reason="needs root, setpriv and /usr/bin/python3")
def test_a_non_root_gate_is_not_readable_by_its_same_uid_children() -> None:
    root = str(Path(__file__).resolve().parent.parent)
    argv = _as_nobody()
    assert argv is not None
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": root}

    def run(mode: str) -> str:
        done = subprocess.run(
            [*argv, _NON_ROOT_GATE, mode], capture_output=True, text=True, env=env, cwd="/"
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert run("plain") == "read"  # what the kernel allows a same-uid child by default
    assert run("protect") == "denied"


@pytest.mark.parametrize("name", ["GITHUB_TOKEN", "INPUT_GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN"])
def test_the_runners_variables_cannot_be_declared(tmp_path: Path, name: str) -> None:
    from evalgate.errors import ConfigError

    config = tmp_path / "evals.yaml"
    config.write_text(
        "models: [{name: m, backend: openai, base_url: 'http://127.0.0.1:9/v1'}]\n"
        f"benchmarks:\n  - {{name: b, kind: inspect, task: t.py@t, pass_env: [{name}]}}\n"
    )
    with pytest.raises(ConfigError, match=f"{name}.*never reach a benchmark's code") as err:
        load_config(config, [])
    assert "\n" not in str(err.value).strip()


@pytest.mark.skipif(os.geteuid() != 0, reason="a root gate's children")
def test_a_root_gates_child_keeps_only_roots_file_access() -> None:
    import sys

    from evalgate._repo_code import spawn_options

    probe = "print(open('/proc/self/status').read().split('CapEff:')[1].split()[0])"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, **spawn_options()
    )
    # CHOWN, DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER; no SYS_PTRACE (19), SYS_ADMIN (21), SETUID...
    assert int(done.stdout.strip(), 16) == 0b1111, done

"""Code that comes from the repository runs with a cleared environment and cannot read the gate's.

An inspect task file and a verifiers environment are the repository's code (often the PR's) run
on this machine: they get PATH, HOME, locale, CA and proxy settings, the endpoint of the model
under test, and the variables their benchmark declares (``pass_env``) — never the runner's
tokens or other keys — and they cannot read the gate's ``/proc/PID/environ`` (the gate is not
dumpable; a root gate drops its children's capabilities, which would bypass that).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from evalgate.config.load import load_config
from evalgate.suites import build_suites
from evalgate.suites.repo_code import repo_env

SECRETS = ("GITHUB_TOKEN", "INPUT_GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN", "OPENAI_API_KEY")

# Module-level code: it runs when inspect loads the task (listing its samples) and again when it
# runs. It records what it could see into the file the benchmark declared.
SPY = """
import json, os
seen = {name: os.environ.get(name) for name in %(secrets)r}
for pid in (os.getppid(), %(gate)d):
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            seen[f"proc:{pid}"] = fh.read().decode("utf-8", "replace")
    except OSError as exc:
        seen[f"proc:{pid}"] = f"denied: {exc.errno}"
seen["declared"] = os.environ.get("SPY_DECLARED")
with open(os.environ["SPY_OUT"], "w") as fh:
    json.dump(seen, fh)
"""


def _inspect_python() -> str | None:
    python = os.environ.get("EVALGATE_INSPECT_PYTHON")
    if not python:
        return None
    return python if subprocess.run([python, "-c", "import inspect_ai"]).returncode == 0 else None


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in SECRETS:
        monkeypatch.setenv(name, f"secret-{name}")
    out = tmp_path / "seen.json"
    monkeypatch.setenv("SPY_OUT", str(out))
    monkeypatch.setenv("SPY_DECLARED", "declared-value")
    return out


def _check(seen: dict[str, str | None]) -> None:
    leaked = {k: v for k, v in seen.items() if k in SECRETS and v is not None}
    assert not leaked, leaked
    for key, value in seen.items():
        if key.startswith("proc:"):
            assert str(value).startswith("denied: "), (key, value)
    assert seen["declared"] == "declared-value"  # what the benchmark declares does arrive


@pytest.mark.skipif(_inspect_python() is None, reason="needs EVALGATE_INSPECT_PYTHON (inspect-ai)")
def test_an_inspect_task_file_gets_no_secret_and_cannot_read_the_gate(
    tmp_path: Path, secrets: Path
) -> None:
    task = tmp_path / "spy.py"
    task.write_text(
        SPY % {"secrets": SECRETS, "gate": os.getpid()} + "\nfrom inspect_ai import Task, task\n"
        "from inspect_ai.dataset import Sample\n"
        "from inspect_ai.scorer import match\n\n\n"
        "@task\n"
        "def spy():\n"
        "    return Task(dataset=[Sample(input='1+1?', target='2')], scorer=match())\n"
    )
    config = tmp_path / "evals.yaml"
    config.write_text(
        "models: [{name: m, backend: openai, base_url: 'http://127.0.0.1:9/v1'}]\n"
        f"benchmarks:\n  - {{name: b, kind: inspect, task: '{task}@spy', "
        "pass_env: [SPY_OUT, SPY_DECLARED]}\n"
    )
    build_suites(load_config(config, []).benchmarks[0])
    _check(json.loads(secrets.read_text()))


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
from evalgate.suites.repo_code import spawn_options
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

    from evalgate.suites.repo_code import spawn_options

    probe = "print(open('/proc/self/status').read().split('CapEff:')[1].split()[0])"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, **spawn_options()
    )
    # CHOWN, DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER; no SYS_PTRACE (19), SYS_ADMIN (21), SETUID...
    assert int(done.stdout.strip(), 16) == 0b1111, done

"""No pull-request code in the gate's process: a verifiers environment runs in its worker.

The gate process holds the GitHub token and decides the verdict. ``python -m evalgate`` puts the
working directory (the PR's checkout) first on ``sys.path``, so an ``env_id`` that names a module
there used to be imported into that process. Now environments load in a worker started with
``-P`` (no working directory on the import path), from installed packages or an explicit
``env_path``, with the runner's tokens withheld.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

import evalgate
from evalgate.cli import main
from evalgate.suites.verifiers import worker_env
from tests.conftest import write_config

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("verifiers") is None, reason="needs verifiers"
)

DAEMON = "evalgate-test-daemon-left-by-an-environment"

# Module-level code of a hostile environment: what it could reach, reported the one way it has
# (its import error, which the gate quotes), kept short (the quote is capped).
PLANTED = """
import json, os, subprocess, sys

def _read(path):
    try:
        open(path, "rb").read()
        return "read"
    except OSError:
        return "denied"

def _write(path):
    try:
        open(path, "a").write("# rewritten by the environment\\n")
        return "wrote"
    except OSError:
        return "denied"

seen = {"pid": os.getpid(), "gate": _read(f"/proc/%(gate)d/environ"),
        "leaked": sorted(k for k in ("GITHUB_TOKEN", "INPUT_GITHUB_TOKEN",
                                     "ACTIONS_RUNTIME_TOKEN", "OPENAI_API_KEY") if k in os.environ),
        "declared": os.environ.get("EVIL_DECLARED"),
        "git": _read(%(git)r), "home": _read(%(home)r),
        "exam": _write(%(exam)r), "install": _write(%(install)r),
        "caps": open("/proc/self/status").read().split("CapEff:")[1].split()[0]}
subprocess.Popen(["setsid", sys.executable, "-c", "import time; time.sleep(600)", %(daemon)r],
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                 start_new_session=True)
raise RuntimeError("SEEN" + json.dumps(seen, separators=(",", ":")) + "END")
"""


def _daemons() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if DAEMON.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PR checkout with a planted module, run the way `python -m evalgate` runs there: its
    .git/config holds the job's token, the exam has a file beside it, the runner's home a key."""
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[http]\n\textraheader = basic ghs_x\n")
    (tmp_path / "exam.jsonl").write_text("{}\n")
    home = tmp_path.parent / f"{tmp_path.name}-home"
    home.mkdir()
    (home / "id_rsa").write_text("PRIVATE KEY")
    monkeypatch.setenv("HOME", str(home))
    planted = PLANTED % {
        "gate": os.getpid(),
        "git": str(tmp_path / ".git" / "config"),
        "home": str(home / "id_rsa"),
        "exam": str(tmp_path / "exam.jsonl"),
        "install": str(Path(evalgate.__file__).parent / "jailed-env-was-here.py"),
        "daemon": DAEMON,
    }
    (tmp_path / "evil_env.py").write_text(planted)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # what `python -m` does with the working directory
    monkeypatch.setenv("EVIL_DECLARED", "declared-value")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_the_runner_token")
    monkeypatch.setenv("INPUT_GITHUB_TOKEN", "ghs_the_runner_token")
    monkeypatch.setenv("ACTIONS_RUNTIME_TOKEN", "the_runtime_token")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-declared")
    monkeypatch.delitem(sys.modules, "evil_env", raising=False)
    return tmp_path


def _run(checkout: Path, extra: str = "") -> int:
    config = write_config(
        checkout,
        "models: [{name: m, backend: openai, base_url: 'http://127.0.0.1:9/v1'}]\n"
        f"benchmarks:\n  - {{name: v, kind: verifiers, env_id: evil-env{extra}}}\n",
    )
    return main(["local", str(config), "--output", str(checkout / "out")], environ=dict(os.environ))


def test_a_module_in_the_working_directory_is_not_imported(checkout: Path) -> None:
    assert _run(checkout) == 2  # "not installed": the checkout is not an import path
    assert "evil_env" not in sys.modules


def test_an_explicit_env_path_loads_in_a_jailed_worker(
    checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install = Path(evalgate.__file__).parent / "jailed-env-was-here.py"
    try:
        # Its import fails on purpose (it reports through the error): exit 3, its words quoted.
        assert _run(checkout, ", env_path: ., pass_env: [EVIL_DECLARED]") == 3
        wrote_install = install.exists()
    finally:
        install.unlink(missing_ok=True)
        for pid in _daemons():  # the test's own leftovers, if containment failed
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert "evil_env" not in sys.modules  # never in the gate's process
    err = capsys.readouterr().err
    seen = json.loads(err.split("SEEN", 1)[1].split("END", 1)[0])
    assert seen["pid"] != os.getpid()
    assert seen["leaked"] == [] and seen["declared"] == "declared-value"
    assert seen["gate"] == "denied"  # the gate's /proc/PID/environ
    assert seen["git"] == "denied" and seen["home"] == "denied"
    assert seen["exam"] == "denied" and (checkout / "exam.jsonl").read_text() == "{}\n"
    assert seen["install"] == "denied" and not wrote_install
    assert int(seen["caps"], 16) == 0
    deadline = time.monotonic() + 30  # the kernel reaps a pid namespace asynchronously
    while _daemons() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _daemons() == []


def test_the_worker_environment_withholds_tokens() -> None:
    gate = {"GITHUB_TOKEN": "t", "ACTIONS_RUNTIME_TOKEN": "t", "INPUT_GITHUB_TOKEN": "t",
            "MY_TOKEN": "t", "PATH": "/bin", "OPENAI_API_KEY": "k", "JUDGE_KEY": "j"}  # fmt: skip
    root = str(Path(evalgate.__file__).resolve().parent.parent)  # evalgate itself, not the cwd
    runner = {"PYTHONPATH": root, "PYTHONDONTWRITEBYTECODE": "1"}
    assert worker_env(gate) == {"PATH": "/bin", **runner}
    declared = worker_env(gate, ["JUDGE_KEY", "GITHUB_TOKEN"])  # never the runner's
    assert declared == {"PATH": "/bin", "JUDGE_KEY": "j", **runner}

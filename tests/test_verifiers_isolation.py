"""No pull-request code in the gate's process: a verifiers environment runs in its worker.

The gate process holds the GitHub token and decides the verdict. ``python -m evalgate`` puts the
working directory (the PR's checkout) first on ``sys.path``, so an ``env_id`` that names a module
there used to be imported into that process. Now environments load in a worker started with
``-P`` (no working directory on the import path), from installed packages or an explicit
``env_path``, with the runner's tokens withheld.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

import evalgate
from evalgate.cli import main
from evalgate.suites.verifiers import worker_env
from tests.conftest import write_config

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("verifiers") is None, reason="needs verifiers"
)

PLANTED = """
import json, os
try:
    open(f"/proc/{os.getppid()}/environ", "rb").read()
    gate = "read"
except OSError:
    gate = "denied"
with open(os.environ["EVIL_MARKER"], "w") as fh:
    json.dump({"pid": os.getpid(), "token": os.environ.get("GITHUB_TOKEN"),
               "input": os.environ.get("INPUT_GITHUB_TOKEN"),
               "runtime": os.environ.get("ACTIONS_RUNTIME_TOKEN"),
               "openai": os.environ.get("OPENAI_API_KEY"), "gate": gate}, fh)
"""


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PR checkout with a planted module, run the way `python -m evalgate` runs there."""
    (tmp_path / "evil_env.py").write_text(PLANTED)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # what `python -m` does with the working directory
    monkeypatch.setenv("EVIL_MARKER", str(tmp_path / "marker.json"))
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
    assert not (checkout / "marker.json").exists()


def test_an_explicit_env_path_loads_in_the_worker_without_the_token(checkout: Path) -> None:
    # it exports no environment: a config error; EVIL_MARKER is declared, so it arrives
    assert _run(checkout, ", env_path: ., pass_env: [EVIL_MARKER]") == 2
    assert "evil_env" not in sys.modules  # never in the gate's process
    seen = json.loads((checkout / "marker.json").read_text())
    assert seen["pid"] != os.getpid()
    assert seen["token"] is None and seen["input"] is None and seen["runtime"] is None
    assert seen["openai"] is None  # a key it did not declare
    assert seen["gate"] == "denied"


def test_the_worker_environment_withholds_tokens() -> None:
    gate = {"GITHUB_TOKEN": "t", "ACTIONS_RUNTIME_TOKEN": "t", "INPUT_GITHUB_TOKEN": "t",
            "MY_TOKEN": "t", "PATH": "/bin", "OPENAI_API_KEY": "k", "JUDGE_KEY": "j"}  # fmt: skip
    root = str(Path(evalgate.__file__).resolve().parent.parent)  # evalgate itself, not the cwd
    runner = {"PYTHONPATH": root, "PYTHONDONTWRITEBYTECODE": "1"}
    assert worker_env(gate) == {"PATH": "/bin", **runner}
    declared = worker_env(gate, ["JUDGE_KEY", "GITHUB_TOKEN"])  # never the runner's
    assert declared == {"PATH": "/bin", "JUDGE_KEY": "j", **runner}

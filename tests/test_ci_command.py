"""CI runs the README's test command, then the slow set it leaves out: every test runs in CI."""

from __future__ import annotations

import re
import shlex

from tests.conftest import ROOT


def _readme_pytest() -> list[str]:
    """The pytest part of the README's test command (the install-and-test line)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    (line,) = [ln for ln in text.splitlines() if "pip install -e '.[dev]'" in ln and "pytest" in ln]
    return shlex.split(line.split("&&")[-1])


def _ci_pytest_runs() -> list[list[str]]:
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    return [shlex.split(ln) for ln in text.splitlines() if re.match(r"python -m pytest\b", ln)]


def test_ci_runs_the_readmes_test_command_then_the_slow_set() -> None:
    quick = _readme_pytest()
    assert quick[:3] == ["python", "-m", "pytest"]
    runs = _ci_pytest_runs()
    assert quick in runs, "the README's test command is not what .ci/run runs"
    # Whatever the quick set leaves out, CI runs next: its marker expression, negated. The
    # quick set runs on every CPU (pytest-xdist), the slow set one test at a time.
    assert quick[3:] == ["-m", "not slow", "-n", "auto"]
    assert ["python", "-m", "pytest", "-m", "slow"] in runs

"""HumanEval's scoring: the problem's own tests decide, run by a test runner inside the sandbox
(``_humaneval_runner.py``, not a model judge), and its verdict read here.

The runner's source is sent to the sandbox as text (``python3 -I -S -c TEST_RUNNER tests``, a
JSON job on stdin); it starts the worker that runs the completion from the same source. It
writes ``EVALGATE-PASS NONCE`` once the tests returned, or ``EVALGATE-FAIL NONCE reason``, on a
descriptor the worker never had: a pass needs that line with this run's nonce *and* exit 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evalgate.sandbox import ExecResult

__all__ = ["TEST_RUNNER", "runner_argv", "verdict"]

# Runs inside the sandbox under the sandbox's own python3 (stdlib only; it never imports evalgate).
TEST_RUNNER = Path(__file__).with_name("_humaneval_runner.py").read_text(encoding="utf-8")
_PASS, _FAIL = "EVALGATE-PASS", "EVALGATE-FAIL"


def runner_argv() -> list[str]:
    """The command that runs the test runner in the sandbox (its job on stdin)."""
    return ["python3", "-I", "-S", "-c", TEST_RUNNER, "tests"]


def verdict(result: ExecResult, nonce: str, timeout_s: float) -> tuple[float, str]:
    """(reward, reason) of one test run: a pass needs the nonce line and exit status 0."""
    if result.timed_out:
        return 0.0, f"timed out after {timeout_s:g} s"
    lines = result.stdout.splitlines()
    signed = f"{_PASS} {nonce}" in lines
    if signed and result.exit_code == 0:
        return 1.0, "passed"
    if signed:
        return 0.0, f"failed: exit {result.exit_code} after the tests passed"
    failed = [line.split(" ", 2) for line in lines if line.startswith(_FAIL + " ")]
    if failed:
        return 0.0, f"failed: {(failed[-1] + [''])[2][:200]}"
    last = (result.stderr.strip().splitlines() or [f"exit {result.exit_code}"])[-1]
    return 0.0, f"failed: the test runner gave no verdict ({last[:200]})"

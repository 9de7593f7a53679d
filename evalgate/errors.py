"""The one user-fixable error type and the process exit codes.

Every error a user can act on is an :class:`EvalgateError`; the CLI has one handler that prints
its one-line message and exits with its code. Foreign exceptions (aiohttp, yaml, subprocess) are
translated into these at the boundary where they happen, so no traceback reaches a user.
"""

from __future__ import annotations

import enum

__all__ = [
    "ConfigError",
    "EvalgateError",
    "ExitCode",
    "InfraError",
    "UsageError",
]


class ExitCode(enum.IntEnum):
    """Distinct exit codes: CI scripts branch on them."""

    PASS = 0
    GATE_FAILED = 1  # an outcome, not a crash
    CONFIG = 2  # bad evals.yaml, bad override, bad command line
    INFRA = 3  # model server won't start, endpoint unreachable, too many errored rollouts


class EvalgateError(Exception):
    """An error the user can fix. ``str(err)`` is the whole message: one line, naming the fix."""

    exit_code: ExitCode = ExitCode.CONFIG

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message} ({hint})")


class ConfigError(EvalgateError):
    """evals.yaml, a benchmark file or an override is invalid; message starts ``file:line:``."""

    exit_code = ExitCode.CONFIG


class UsageError(EvalgateError):
    """The command line is wrong (missing file, unknown run, bad flag value)."""

    exit_code = ExitCode.CONFIG


class InfraError(EvalgateError):
    """The infrastructure failed: a model server, an endpoint, a sandbox. Never scored as a 0."""

    exit_code = ExitCode.INFRA

"""The one user-fixable error type and the process exit codes.

Every error a user can act on is an :class:`EvalgateError`; the CLI has one handler that prints
its one-line message and exits with its code. Foreign exceptions (aiohttp, yaml, subprocess) are
translated into these at the boundary where they happen, so no traceback reaches a user. Anything
else is a bug: the CLI and the Action print one line, write the traceback to a crash log and exit
:attr:`ExitCode.INTERNAL` (4), which no verdict uses, so a crash never reads as "gate failed".
"""

from __future__ import annotations

import datetime
import enum
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from evalgate._text import visible

__all__ = [
    "ConfigError",
    "EvalgateError",
    "ExitCode",
    "InfraError",
    "UsageError",
    "cause_report",
    "crash_report",
    "redact_secrets",
    "secret_redactor",
    "secret_values",
]

_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|CREDENTIAL")


class ExitCode(enum.IntEnum):
    """Distinct exit codes: CI scripts branch on them."""

    PASS = 0
    GATE_FAILED = 1  # an outcome, not a crash
    CONFIG = 2  # bad evals.yaml, bad override, bad command line
    INFRA = 3  # model server won't start, endpoint unreachable, too many errored rollouts
    INTERNAL = 4  # a bug in evalgate: an unexpected exception (traceback in a crash log)


class EvalgateError(Exception):
    """An error the user can fix. ``str(err)`` is the whole message: one line, naming the fix."""

    exit_code: ExitCode = ExitCode.CONFIG

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        # A value quoted from the user's files with a zero-width or bidi character in it would
        # print as a value that looks right: each is shown as its escape (evalgate._text).
        message, hint = visible(message), None if hint is None else visible(hint)
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


def crash_report(exc: BaseException, directory: Path | None, *, secrets: Iterable[str] = ()) -> str:
    """Write ``exc``'s traceback to ``directory/crash.log`` (the outputs, so it is uploaded with
    them) and return the one line to print. ``secrets`` are blanked out of the log: a traceback
    can quote a request header or an environment value."""
    redact = _redactor(secrets)
    text = redact("".join(traceback.format_exception(exc)))
    stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    entry = f"--- evalgate {stamp} ---\n{text}\n"
    # Only under the command's own output folder: a shared temp file would mix users' and
    # runs' tracebacks (and be readable by every local user). Without one, it is printed.
    where = None
    if directory is not None:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            log = directory / "crash.log"
            with open(log, "a", encoding="utf-8") as fh:
                fh.write(entry)
            where = str(log)
        except OSError:
            pass
    # The line goes to stderr and, in the Action, into the PR comment: redacted as well.
    head = redact(" ".join(f"{type(exc).__name__}: {exc}".split()))[:300]
    if where is None:
        if os.environ.get("EVALGATE_TRACEBACK"):
            sys.stderr.write(entry)
            kept = "is above"
        else:
            kept = "was not kept (no output folder): rerun with EVALGATE_TRACEBACK=1 to see it"
        return (
            f"internal error ({head}); this is a bug in evalgate, not a verdict. The traceback "
            f"{kept}; please report it"
        )
    return (
        f"internal error ({head}); this is a bug in evalgate, not a verdict. The traceback is "
        f"in {where}: please report it"
    )


def cause_report(exc: BaseException, *, secrets: Iterable[str] = ()) -> str | None:
    """The traceback of what caused a user-facing error (an OSError, a failed request, git),
    secrets blanked; None when it has no cause. The CLI prints it under its one line only when
    ``EVALGATE_TRACEBACK`` is set: the line is the message, this is for a bug report."""
    if exc.__cause__ is None:
        return None
    return _redactor(secrets)("".join(traceback.format_exception(exc)))


def _redactor(secrets: Iterable[str]) -> Callable[[str], str]:
    hidden = sorted({s for s in secrets if s and len(s) >= 6}, key=len, reverse=True)

    def redact(text: str) -> str:
        for value in hidden:
            text = text.replace(value, "***")
        return text

    return redact


def redact_secrets(text: str, environ: Mapping[str, str]) -> str:
    """``text`` with the values of ``environ``'s secret-named variables blanked (for text that
    a provider or a sandbox wrote and a public comment will show)."""
    return secret_redactor(environ)(text)


def secret_redactor(environ: Mapping[str, str]) -> Callable[[str], str]:
    """:func:`redact_secrets` with ``environ``'s secrets read once (for many texts)."""
    return _redactor(secret_values(environ))


def secret_values(environ: Mapping[str, str]) -> list[str]:
    """Values of environment variables whose names say they hold a secret."""
    return [v for k, v in environ.items() if _SECRET_NAME.search(k.upper()) and len(v or "") >= 6]

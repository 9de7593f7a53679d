"""Command line: parse arguments, dispatch to the command's module (``evalgate.commands``), map
outcomes to exit codes. Nothing else: each command's body lives in the module that owns it.

Exit codes: 0 pass, 1 gate failed, 2 config/usage error, 3 infrastructure error, 4 internal error
(a bug: one line here, the traceback in ``crash.log`` under the output root), 130 interrupted
(Ctrl-C or SIGTERM: one line, no traceback).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import errno
import gc
import importlib
import io
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, NamedTuple, NoReturn, TypeAlias, cast

if TYPE_CHECKING:
    import asyncio

from evalgate import __version__, _collector
from evalgate.errors import (
    EvalgateError,
    ExitCode,
    UsageError,
    cause_report,
    crash_report,
    secret_values,
)

__all__ = ["entry", "main"]

DEFAULT_CONFIG = "evals.yaml"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse exits 2 itself; route through our one handler
        words = self.prog.split()  # "evalgate", or "evalgate local" for a subcommand
        command = " ".join(["evalgate", *words[1:]])
        raise UsageError(f"{message} (see `{command} --help`)")


def _split_overrides(extra: list[str]) -> list[str]:
    """``--a.b=c`` and ``--a.b c`` become ``a.b=c``; anything else is a usage error."""
    out, i = [], 0
    while i < len(extra):
        arg = extra[i]
        if not arg.startswith("--") or "." not in arg.split("=", 1)[0]:
            raise UsageError(
                f"unrecognized argument {arg!r} (overrides look like --section.field=value)"
            )
        if "=" not in arg:
            if i + 1 >= len(extra) or extra[i + 1].startswith("--"):
                raise UsageError(f"override {arg} needs a value: {arg}=VALUE")
            arg = f"{arg}={extra[i + 1]}"
            i += 1
        out.append(arg[2:])
        i += 1
    return out


def _parser(only: str | None = None) -> _Parser:
    """The command line's parser; with ``only``, a known command's name, only that command's
    (its arguments, help and errors are the same): building all of them was ~5 ms of every
    command."""
    parser = _Parser(prog="evalgate", description="Gate pull requests on LLM evaluation results.")
    parser.add_argument("--version", action="version", version=f"evalgate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, add in _SUBCOMMANDS.items():
        if only is None or name == only:
            add(sub, name)
    return parser


# The subcommand parsers (argparse names the type privately; typeshed spells it out).
_Commands: TypeAlias = "argparse._SubParsersAction[_Parser]"


# local and resume: the commands that call the model.


def _local(sub: _Commands, name: str) -> None:
    local = sub.add_parser(
        name,
        help="run evals.yaml on this machine (a dry run of the Action: no keys, no PR)",
        epilog="Overrides: --sampling.temperature=0.5 --eval.num_examples=20 "
        "--benchmarks.NAME.eval.rollouts=4",
    )
    local.add_argument("config", nargs="?", default=DEFAULT_CONFIG, help="path to evals.yaml")
    local.add_argument("--output", default="outputs", help="output root (default: ./outputs)")
    local.add_argument(
        "--baseline",
        metavar="DIR",
        help="compare with the runs in DIR (an earlier --output root, or one run directory)",
    )
    _cache_arguments(local)


def _resume(sub: _Commands, name: str) -> None:
    resume = sub.add_parser(
        name,
        help="finish an interrupted `local` run: run only the rollouts its journal lacks",
        epilog="Budget caps replace the run's own: --budget.tokens=200000 --budget.usd=5",
    )
    resume.add_argument("run", help="a run id (under --output) or a run directory")
    resume.add_argument("--output", default="outputs", help="output root (default: ./outputs)")
    resume.add_argument(
        "--retry-errors",
        action="store_true",
        help="also run again the rollouts that ended in an error (after an outage); where the "
        "model had answered and only scoring failed (a judge's outage), only the scoring",
    )
    _cache_arguments(resume)


# compare, validate and judge-check: deciding without a model.


def _compare(sub: _Commands, name: str) -> None:
    compare = sub.add_parser(
        name,
        help="gate HEAD's saved runs against BASE's, paired per item (runs no model); the "
        "policy is BASE's unless --config is given",
    )
    compare.add_argument("base", help="baseline: an output root or a run directory")
    compare.add_argument("head", help="PR: an output root or a run directory")
    compare.add_argument(
        "--config",
        help="take the gate policy from this evals.yaml (default: the policy recorded in BASE)",
    )
    compare.add_argument("--output", help="where to write scorecard.md and verdict.json")


def _validate(sub: _Commands, name: str) -> None:
    validate = sub.add_parser(
        name,
        help="every check `local` makes before its first request (schema, data files, "
        "templates, threshold metrics, sizes), the resolved plan and a cost estimate",
    )
    validate.add_argument("config", nargs="?", default=DEFAULT_CONFIG)


def _judge_check(sub: _Commands, name: str) -> None:
    judge = sub.add_parser(
        name,
        help="measure each judged benchmark's judge on its labelled set: accuracy and "
        "Cohen's κ against the labels, self-agreement over k samples, unreadable verdicts",
    )
    judge.add_argument("config", nargs="?", default=DEFAULT_CONFIG)
    judge.add_argument("--benchmark", help="only this benchmark's judge")
    judge.add_argument("--labels", metavar="FILE", help="this labelled set (JSONL) instead")
    judge.add_argument(
        "--samples", type=int, metavar="K", help="judgements per example (default: judge_samples)"
    )
    judge.add_argument("--output", metavar="DIR", help="also write DIR/judge-check.json")
    _cache_arguments(judge)


# doctor and the Modal lifecycle: the stack around a run.


def _doctor(sub: _Commands, name: str) -> None:
    doctor = sub.add_parser(
        name,
        help="check the stack in phases: prerequisites, credentials, deploy, smoke request, "
        "tiny eval, GPU",
    )
    doctor.add_argument("config", nargs="?", default=DEFAULT_CONFIG)
    doctor.add_argument("--no-deploy", action="store_true", help="stop before starting servers")
    doctor.add_argument("--items", type=int, default=2, help="items in the tiny eval (default 2)")
    doctor.add_argument("--json", action="store_true", help="print the report as JSON")
    doctor.add_argument("--output", default="outputs", help="where logs go (default: ./outputs)")


_LIFECYCLE_HELP = {
    "deploy": "deploy the persistent modal-vllm models of evals.yaml",
    "status": "show the Modal apps of evals.yaml's modal-vllm models",
    "stop": "stop the Modal apps of evals.yaml's modal-vllm models",
}


def _lifecycle(sub: _Commands, name: str) -> None:
    cmd = sub.add_parser(name, help=_LIFECYCLE_HELP[name])
    cmd.add_argument("config", nargs="?", default=DEFAULT_CONFIG)
    cmd.add_argument("--model", action="append", default=[], help="only this model (repeat)")
    if name == "deploy":
        cmd.add_argument("--wait", action="store_true", help="wait until healthy")
    if name == "status":
        cmd.add_argument("--probe", action="store_true", help="wake the app (costs GPU time)")
    if name in ("status", "stop"):
        cmd.add_argument("--json", action="store_true", help="print JSON")
    if name == "stop":
        cmd.add_argument(
            "--all", action="store_true", help="every evalgate-tagged app in the environment"
        )


# push, runs, show: what a run left behind.


def _push(sub: _Commands, name: str) -> None:
    push = sub.add_parser(
        name,
        help="upload a run to a Hugging Face dataset repository (one folder per run; HF_TOKEN)",
    )
    push.add_argument("run", help="a run id (under --output) or a run directory")
    push.add_argument("--repo", required=True, metavar="ORG/NAME", help="dataset repository")
    push.add_argument("--output", default="outputs", help="output root (default: ./outputs)")
    push.add_argument(
        "--public", action="store_true", help="create the repository public (default: private)"
    )


def _runs(sub: _Commands, name: str) -> None:
    runs = sub.add_parser(name, help="list recent runs under an output root, complete or not")
    runs.add_argument("--output", default="outputs", help="output root (default: ./outputs)")
    runs.add_argument("--benchmark", help="only this benchmark")
    runs.add_argument(
        "--limit", type=int, default=20, help="at most this many (default 20; 0: all)"
    )


def _show(sub: _Commands, name: str) -> None:
    show = sub.add_parser(
        name, help="details of a run (a run directory, or a run id as `evalgate runs` prints)"
    )
    show.add_argument(
        "run", help="run directory, or run id (prefix) under --output: every benchmark it ran"
    )
    show.add_argument("--output", default="outputs", help="output root (default: ./outputs)")
    show.add_argument("--benchmark", help="only this benchmark's run of the invocation")


_BARE_HELP = {
    "action": "the GitHub Action's entrypoint (reads INPUT_* and GITHUB_* variables)",
    "schema": "print the JSON Schema of evals.yaml (for editors)",
    "benchmarks": "list the built-in benchmarks and their defaults",
}


def _bare(sub: _Commands, name: str) -> None:
    sub.add_parser(name, help=_BARE_HELP[name])


# Each subcommand's parser, in the order --help lists them.
_SUBCOMMANDS: dict[str, Callable[[_Commands, str], None]] = {
    "local": _local,
    "resume": _resume,
    "compare": _compare,
    "validate": _validate,
    "judge-check": _judge_check,
    "doctor": _doctor,
    "deploy": _lifecycle,
    "status": _lifecycle,
    "stop": _lifecycle,
    "push": _push,
    "runs": _runs,
    "show": _show,
    "action": _bare,
    "schema": _bare,
    "benchmarks": _bare,
}


def _cache_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="send every request: neither read nor write the response cache",
    )
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="response cache directory (default: $EVALGATE_CACHE_DIR, else "
        "$XDG_CACHE_HOME/evalgate, else ~/.cache/evalgate)",
    )


class _Terminate:
    """SIGTERM (CI cancellation) takes the same path as Ctrl-C, so servers are stopped — once.

    A runner that cancels a job signals again while evalgate is still stopping its servers; a
    second KeyboardInterrupt raised inside that cleanup would escape it with a traceback and leave
    servers behind, so later signals are ignored. Tasks cancelled by the interrupt may log their
    own unwinding through asyncio's logger: that is noise at this point, not a diagnosis.
    """

    def __init__(self) -> None:
        self.fired = False
        self.pending = False  # an interrupt handed to the event loop, not raised yet

    def __call__(self, signum: int, frame: object) -> None:
        if self.fired:
            return
        self.fired = True
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        loop = _running_loop()
        if loop is None:
            raise KeyboardInterrupt
        # With an event loop running, raised between two of its callbacks instead: raised here
        # it can land in the loop's own bookkeeping (a callback taken off the ready queue and
        # not yet run), and a task whose step is lost never ends, so asyncio.run's
        # cancellation of the tasks waits for it forever (seen: a run hung after Ctrl-C).
        # asyncio's own SIGINT handler avoids raising here for the same reason.
        self.pending = True
        loop.call_soon_threadsafe(self._interrupt)

    def _interrupt(self) -> None:
        self.pending = False
        raise KeyboardInterrupt

    def check(self) -> None:
        """Raise an interrupt the loop was handed but ended before running (a loop that
        stopped just then): the command returned, yet it was interrupted."""
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, if any (asyncio is not imported for it)."""
    aio = sys.modules.get("asyncio")
    if aio is None:  # never imported: no loop can be running
        return None
    try:
        loop: asyncio.AbstractEventLoop = aio.get_running_loop()
    except RuntimeError:
        return None
    return loop


class _Command(NamedTuple):
    """Where a command's body lives: ``evalgate.commands.<module>.<handler>(args, overrides,
    environ, out) -> exit code``, imported when the command runs (``evalgate schema`` loads no
    model client). ``overrides``: takes ``--section.field=value`` after its arguments.
    ``long_running``: SIGTERM takes Ctrl-C's path, so the servers it started are stopped.
    ``requests``: it sends model requests (a run), and releases the garbage collector itself once
    started (:mod:`evalgate._collector`).

    A named tuple, not a frozen dataclass: as immutable, and made without the five methods a
    frozen dataclass compiles from source at import (~0.4 ms of every command's start)."""

    module: str
    handler: str = "run"
    overrides: bool = False
    long_running: bool = False
    requests: bool = False


COMMANDS = {
    "local": _Command("local", overrides=True, long_running=True, requests=True),
    "resume": _Command("resume", overrides=True, long_running=True, requests=True),
    "compare": _Command("compare"),
    "validate": _Command("validate", overrides=True),
    "judge-check": _Command("judge_check"),
    "doctor": _Command("doctor", overrides=True, long_running=True),
    "deploy": _Command("lifecycle", long_running=True),
    "status": _Command("lifecycle"),
    "stop": _Command("lifecycle"),
    "push": _Command("push"),
    "runs": _Command("runs", handler="run_list"),
    "show": _Command("runs", handler="run_show"),
    "action": _Command("action", long_running=True),
    "schema": _Command("schema"),
    "benchmarks": _Command("benchmarks"),
}
# Commands that accept dotted config overrides (--section.field=value) after their arguments.
TAKES_OVERRIDES = tuple(name for name, command in COMMANDS.items() if command.overrides)


def _dispatch(
    args: argparse.Namespace, overrides: list[str], environ: dict[str, str], out: IO[str]
) -> int:
    command = COMMANDS[args.command]
    if not command.requests:  # only a run releases the collector itself, once started
        _collector.release(freeze=False)  # (evalgate._collector)
    module = importlib.import_module(f"evalgate.commands.{command.module}")
    handler: Callable[[argparse.Namespace, list[str], dict[str, str], IO[str]], int]
    handler = getattr(module, command.handler)
    try:
        return handler(args, overrides, environ, out)
    finally:
        _collector.release(freeze=False)


class _PipeSafe(io.TextIOBase):
    """Standard output for a reader that may stop reading (`evalgate validate | head -1`): once
    the pipe is closed, output is dropped and the command still ends with its own exit code (a
    verdict is never turned into a crash by where its scorecard was printed)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream, self._broken = stream, False

    def _closed_pipe(self) -> None:
        self._broken = True
        with contextlib.suppress(OSError, ValueError):  # later flushes (at exit) go nowhere
            os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())

    def isatty(self) -> bool:  # a terminal gets the scorecard rendered (report.terminal)
        return not self._broken and self._stream.isatty()

    def write(self, text: str) -> int:
        if not self._broken:
            try:
                self._stream.write(text)
            except BrokenPipeError:
                self._closed_pipe()
        return len(text)

    def flush(self) -> None:
        if not self._broken:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._closed_pipe()


def _replace_unencodable() -> None:
    """An ASCII-only terminal or log (PYTHONIOENCODING=ascii, an old LANG=C) gets every line
    with the symbols it cannot show as "?" (✅, ×, Δ), never a crash that hides the verdict."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            with contextlib.suppress(ValueError, OSError):  # closed, or not reconfigurable
                stream.reconfigure(errors="replace")


def main(
    argv: list[str] | None = None, environ: dict[str, str] | None = None, out: IO[str] | None = None
) -> int:
    environ = dict(os.environ if environ is None else environ)
    _replace_unencodable()
    # A TextIOBase, not a typing.IO: the commands only write and flush.
    out = out or cast("IO[str]", _PipeSafe(sys.stdout))
    args: argparse.Namespace | None = None
    try:
        given = sys.argv[1:] if argv is None else argv
        # The named command's parser only (a typo, --help or --version: all of them).
        args, extra = _parser(
            given[0] if given[:1] and given[0] in _SUBCOMMANDS else None
        ).parse_known_args(given)
        takes_overrides = COMMANDS[args.command].overrides
        overrides = _split_overrides(extra) if takes_overrides else []
        if extra and not takes_overrides:
            raise UsageError(f"unrecognized arguments: {' '.join(extra)}")
        long_running = COMMANDS[args.command].long_running
        handler = _Terminate()
        previous = (
            {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
            if long_running
            else {}
        )
        try:
            code = _dispatch(args, overrides, environ, out)
            handler.check()
            return code
        finally:
            for sig, before in previous.items():
                # Once interrupted, this process is on its way out with 130: a runner's
                # follow-up signal must not kill it by signal (-15, -2) on the last stretch.
                signal.signal(sig, signal.SIG_IGN if handler.fired else before)
    except EvalgateError as exc:
        for line in str(exc).splitlines() or [""]:  # one line per mistake (validate finds all)
            print(f"evalgate: error: {line}", file=sys.stderr)
        cause = cause_report(exc, secrets=secret_values(environ))
        if cause is not None and environ.get("EVALGATE_TRACEBACK"):
            sys.stderr.write(cause)  # what failed underneath (an OSError, a request), for a report
        return int(exc.exit_code)
    except OSError as exc:
        if exc.errno not in _ENVIRONMENT_ERRNOS:
            return _crashed(exc, args, environ)
        # The machine, not evalgate: a full disk, a read-only or unwritable output folder.
        where = f" {exc.filename}" if exc.filename else ""
        print(
            f"evalgate: error: cannot write{where}: {exc.strerror or exc} (free space, or give "
            "a writable --output); results written so far are kept",
            file=sys.stderr,
        )
        return int(ExitCode.INFRA)
    except KeyboardInterrupt:
        print("evalgate: interrupted; results written so far are kept", file=sys.stderr)
        return 130
    except SystemExit as exc:  # --help / --version
        return int(exc.code or 0) if isinstance(exc.code, int) else int(ExitCode.CONFIG)
    except Exception as exc:  # a bug: never let it read as a verdict (exit 1) or a traceback
        return _crashed(exc, args, environ)


# errno values that say the environment failed a write, not evalgate: exit 3, no crash log.
_ENVIRONMENT_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG, errno.EIO}
)


def _crashed(exc: BaseException, args: argparse.Namespace | None, environ: dict[str, str]) -> int:
    """A bug: one line, the traceback in crash.log under this command's output folder only."""
    output = getattr(args, "output", None)
    folder = Path(output) if isinstance(output, str) and output else None
    line = crash_report(exc, folder, secrets=secret_values(environ))
    print(f"evalgate: {line}", file=sys.stderr)
    return int(ExitCode.INTERNAL)


# The cyclic garbage collector scans its youngest generation every 700 container allocations by
# default. Start-up allocates some 100,000 (pydantic's schemas, jinja2, aiohttp) and frees almost
# none of them: a 1-item run made ~130 collections that found little, ~8% of its CPU time. Every
# 10,000 allocations, a run's own cyclic garbage (asyncio's futures, tracebacks) is still freed.
# Until a run has started, the collector is held off altogether (evalgate._collector).
GC_THRESHOLD = (10_000, 10, 10)


def entry() -> NoReturn:
    """The ``evalgate`` console script and ``python -m evalgate``: :func:`main`, then leave."""
    gc.set_threshold(*GC_THRESHOLD)
    _collector.hold()
    _leave(main())


def _leave(code: int) -> NoReturn:
    """Exit with ``code`` without the interpreter's teardown.

    Freeing the ~500 modules a run imports (pydantic, aiohttp, jinja2) one by one costs about a
    tenth of a second per command and frees nothing the kernel would not. What teardown does that
    matters still happens: atexit handlers (temporary folders, logging, coverage) run and the
    standard streams are flushed. With another thread still running, the normal exit, which
    waits for it, is taken instead.
    """
    if threading.active_count() > 1:
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream: nothing to lose
            stream.flush()
    os._exit(code)

"""Command line: parse arguments, call the pipeline, map outcomes to exit codes. Nothing else.

Exit codes: 0 pass, 1 gate failed, 2 config/usage error, 3 infrastructure error, 4 internal error
(a bug: one line here, the traceback in ``crash.log`` under the output root), 130 interrupted
(Ctrl-C or SIGTERM: one line, no traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

from evalgate import __version__
from evalgate.errors import (
    ConfigError,
    EvalgateError,
    ExitCode,
    UsageError,
    crash_report,
    secret_values,
)

if TYPE_CHECKING:
    from evalgate.config.load import Config
    from evalgate.suites import Suite

__all__ = ["main"]

DEFAULT_CONFIG = "evals.yaml"
# Commands that accept dotted config overrides (--section.field=value) after their arguments.
TAKES_OVERRIDES = ("local", "resume", "validate", "doctor")


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


def _parser() -> _Parser:
    parser = _Parser(prog="evalgate", description="Gate pull requests on LLM evaluation results.")
    parser.add_argument("--version", action="version", version=f"evalgate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    _run_commands(sub)
    _gate_commands(sub)
    _ops_commands(sub)
    _results_commands(sub)
    sub.add_parser(
        "action", help="the GitHub Action's entrypoint (reads INPUT_* and GITHUB_* variables)"
    )
    sub.add_parser("schema", help="print the JSON Schema of evals.yaml (for editors)")
    sub.add_parser("benchmarks", help="list the built-in benchmarks and their defaults")
    return parser


def _run_commands(sub: Any) -> None:
    """local and resume: the commands that call the model."""
    local = sub.add_parser(
        "local",
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

    resume = sub.add_parser(
        "resume",
        help="finish an interrupted `local` run: run only the rollouts its journal lacks",
        epilog="Budget caps replace the run's own: --budget.tokens=200000 --budget.usd=5",
    )
    resume.add_argument("run", help="a run id (under --output) or a run directory")
    resume.add_argument("--output", default="outputs", help="output root (default: ./outputs)")
    resume.add_argument(
        "--retry-errors",
        action="store_true",
        help="also run again the rollouts that ended in an error (after an outage)",
    )
    _cache_arguments(resume)


def _gate_commands(sub: Any) -> None:
    """compare and validate: deciding without a model."""
    compare = sub.add_parser(
        "compare",
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

    validate = sub.add_parser(
        "validate",
        help="every check `local` makes before its first request (schema, data files, "
        "templates, threshold metrics, sizes), the resolved plan and a cost estimate",
    )
    validate.add_argument("config", nargs="?", default=DEFAULT_CONFIG)

    judge = sub.add_parser(
        "judge-check",
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


def _ops_commands(sub: Any) -> None:
    """doctor and the Modal lifecycle: the stack around a run."""
    doctor = sub.add_parser(
        "doctor",
        help="check the stack in phases: prerequisites, credentials, deploy, smoke request, "
        "tiny eval, GPU",
    )
    doctor.add_argument("config", nargs="?", default=DEFAULT_CONFIG)
    doctor.add_argument("--no-deploy", action="store_true", help="stop before starting servers")
    doctor.add_argument("--items", type=int, default=2, help="items in the tiny eval (default 2)")
    doctor.add_argument("--json", action="store_true", help="print the report as JSON")
    doctor.add_argument("--output", default="outputs", help="where logs go (default: ./outputs)")

    for name, text in (
        ("deploy", "deploy the persistent modal-vllm models of evals.yaml"),
        ("status", "show the Modal apps of evals.yaml's modal-vllm models"),
        ("stop", "stop the Modal apps of evals.yaml's modal-vllm models"),
    ):
        cmd = sub.add_parser(name, help=text)
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


def _results_commands(sub: Any) -> None:
    """push, runs, show: what a run left behind."""
    push = sub.add_parser(
        "push",
        help="upload a run to a Hugging Face dataset repository (one folder per run; HF_TOKEN)",
    )
    push.add_argument("run", help="a run id (under --output) or a run directory")
    push.add_argument("--repo", required=True, metavar="ORG/NAME", help="dataset repository")
    push.add_argument("--output", default="outputs", help="output root (default: ./outputs)")
    push.add_argument(
        "--public", action="store_true", help="create the repository public (default: private)"
    )

    runs = sub.add_parser("runs", help="list recent runs under an output root, complete or not")
    runs.add_argument("--output", default="outputs", help="output root (default: ./outputs)")
    runs.add_argument("--benchmark", help="only this benchmark")
    runs.add_argument(
        "--limit", type=int, default=20, help="at most this many (default 20; 0: all)"
    )
    show = sub.add_parser(
        "show", help="details of a run (a run directory, or a run id as `evalgate runs` prints)"
    )
    show.add_argument(
        "run", help="run directory, or run id (prefix) under --output: every benchmark it ran"
    )
    show.add_argument("--output", default="outputs", help="output root (default: ./outputs)")
    show.add_argument("--benchmark", help="only this benchmark's run of the invocation")


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


def _cache_dir(args: argparse.Namespace, environ: dict[str, str]) -> Path | None:
    from evalgate.run.cache import default_cache_dir

    if args.no_cache:
        return None
    return Path(args.cache_dir) if args.cache_dir else default_cache_dir(environ)


def _resume_budget(overrides: list[str]) -> dict[str, object]:
    """``--budget.FIELD=VALUE`` for resume; the run's own config holds for everything else."""
    from pydantic import ValidationError

    from evalgate.config.overrides import parse_overrides
    from evalgate.config.spec import BudgetSettings
    from evalgate.errors import ConfigError

    cli = parse_overrides(overrides)
    other = [k for k in cli.paths if k[0] != "budget" or len(k) != 2]
    if other:
        raise UsageError(
            f"resume takes only --budget.FIELD=VALUE overrides, not --{'.'.join(other[0])} "
            "(the run's recorded config holds; start a new run to change it)"
        )
    data = cli.top.get("budget", {})
    try:
        BudgetSettings.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"command line: --budget.{where}: {err['msg']}") from None
    return data


def _output_dir(value: str) -> Path:
    """``--output``: a directory, created when absent; an existing file is a usage error."""
    if not value.strip():  # `--output "$OUT"` with OUT unset: not the working directory
        raise UsageError("--output: empty; give a directory (created if absent)")
    output = Path(value)
    if output.exists() and not output.is_dir():
        raise UsageError(f"--output {value}: is a file; give a directory (created if absent)")
    # `results.txt/run`: the nearest existing ancestor must be a folder, or mkdir fails mid-run.
    parent = next((p for p in output.absolute().parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise UsageError(
            f"--output {value}: {parent} is a file; give a directory (created if absent)"
        )
    return output


def _resume_hint(output: Path, run_id: str) -> None:
    from evalgate.run.rundir import run_dirs_under

    if run_dirs_under(output, run=run_id):
        flag = "" if output == Path("outputs") else f" --output {output}"
        print(f"evalgate: to finish this run: evalgate resume {run_id}{flag}", file=sys.stderr)


def _cmd_resume(
    args: argparse.Namespace, overrides: list[str], environ: dict[str, str], out: IO[str]
) -> int:
    from evalgate import pipeline
    from evalgate.run.progress import make_progress

    output = _output_dir(args.output)
    try:
        verdict = pipeline.resume(
            args.run,
            output_root=output,
            environ=environ,
            progress=make_progress(environ),
            log=lambda line: print(line, file=sys.stderr, flush=True),
            cache_dir=_cache_dir(args, environ),
            retry_errors=args.retry_errors,
            budget=_resume_budget(overrides),
        )
    except KeyboardInterrupt:  # interrupted again: the same command goes on from there
        flag = "" if output == Path("outputs") else f" --output {output}"
        print(f"evalgate: to finish this run: evalgate resume {args.run}{flag}", file=sys.stderr)
        raise
    _print_scorecard(output, out)
    _print_verdict(verdict, output)
    return int(verdict.exit_code)


def _cmd_local(
    args: argparse.Namespace, overrides: list[str], environ: dict[str, str], out: IO[str]
) -> int:
    from evalgate import pipeline
    from evalgate.config.load import load_config
    from evalgate.run.progress import make_progress
    from evalgate.run.rundir import new_run_id
    from evalgate.suites.datasets import DataError

    config = load_config(Path(args.config), overrides)
    output = _output_dir(args.output)
    baselines = pipeline.load_baselines(Path(args.baseline)) if args.baseline else None
    if baselines is not None:  # refused now, not after the whole eval
        pipeline.check_baselines(config, baselines)
    run_id = new_run_id()
    try:
        verdict = pipeline.run(
            config,
            output_root=output,
            environ=environ,
            progress=make_progress(environ),
            log=lambda line: print(line, file=sys.stderr, flush=True),
            baselines=baselines,
            cache_dir=_cache_dir(args, environ),
            run_id=run_id,
        )
    except KeyboardInterrupt:
        _resume_hint(output, run_id)
        raise
    except DataError as exc:  # read before any model starts: point at the evals.yaml line
        if exc.benchmark is None:
            raise
        raise ConfigError(f"{config.locate(exc.benchmark, exc.field)}: {exc}") from None
    _print_scorecard(output, out)
    _print_verdict(verdict, output)
    return int(verdict.exit_code)


def _cmd_compare(args: argparse.Namespace, out: IO[str]) -> int:
    from evalgate import pipeline
    from evalgate.config.load import load_config
    from evalgate.run.rundir import load_runs, recorded_gate

    base = pipeline.load_baselines(Path(args.base))
    heads = list(load_runs(Path(args.head)).values())
    # Without --config, the policy the baseline was gated with: a PR can't loosen its own gate.
    gate = load_config(Path(args.config)).gate if args.config else recorded_gate(base[min(base)])
    output = _output_dir(args.output) if args.output else Path(args.head) / "compare"
    verdict = pipeline.gate_runs(heads, base, gate, output_root=output, saved=True)
    _print_scorecard(output, out)
    _print_verdict(verdict, output)
    return int(verdict.exit_code)


def _print_scorecard(output: Path, out: IO[str]) -> None:
    from evalgate.report.terminal import print_scorecard  # rendered only on a terminal
    from evalgate.run.rundir import SCORECARD

    print_scorecard((output / SCORECARD).read_text(encoding="utf-8"), out)


def _print_verdict(verdict: Any, output: Path) -> None:
    from evalgate.run.rundir import VERDICT

    shown = "no gate configured" if verdict.status == "UNGATED" else verdict.status
    print(f"[evalgate] verdict {shown}: {output / VERDICT}", file=sys.stderr)


def _cmd_lifecycle(args: argparse.Namespace, environ: dict[str, str], out: IO[str]) -> int:
    from evalgate.config.load import load_config
    from evalgate.serve import lifecycle

    need_config = not (args.command == "stop" and args.all and not Path(args.config).exists())
    config = load_config(Path(args.config)) if need_config else None
    if args.command == "deploy":
        assert config is not None  # only `stop --all` runs without one
        results = lifecycle.deploy(config, environ=environ, models=args.model, wait=args.wait)
    elif args.command == "status":
        assert config is not None
        results = lifecycle.status(config, environ=environ, models=args.model, probe=args.probe)
    else:
        results = lifecycle.stop(config, environ=environ, models=args.model, all_apps=args.all)
    if getattr(args, "json", False):
        print(json.dumps([r.as_dict() for r in results], indent=2), file=out)
    else:
        for r in results:
            print(r.line(), file=out)
        if not results:
            print("no modal-vllm apps", file=out)
    return 0


def _cmd_validate(args: argparse.Namespace, overrides: list[str], out: IO[str]) -> int:
    from evalgate.config.checks import check_data, check_environment
    from evalgate.config.load import load_config

    config = load_config(Path(args.config), overrides)
    built: dict[str, list[Suite]] = {}  # suites, reused by the estimate
    notes = check_data(config, built)  # datasets and templates, as `local` reads them
    models = ", ".join(f"{m.name} ({m.backend})" for m in config.models)
    print(f"{args.config}: OK", file=out)
    print(f"  models: {models}", file=out)
    for b in config.benchmarks:
        n = b.eval.num_examples if b.eval.num_examples is not None else "all"
        print(
            f"  benchmark {b.name} ({b.kind}): {n} items × {b.eval.rollouts} rollouts, "
            f"temperature {b.sampling.temperature}, max_tokens {b.sampling.max_tokens}",
            file=out,
        )
    _print_estimate(config, out, built)
    for note in notes:
        print(f"  data {note}", file=out)
    for note in check_environment(config, os.environ):
        print(f"  warning: {note}", file=out)
    return 0


def _print_estimate(config: Config, out: IO[str], built: dict[str, list[Suite]]) -> None:
    """What the run will ask for, against the budget, before anything is spent."""
    from evalgate.run.budget import BudgetMeter, estimate

    meter = BudgetMeter(config.budget)
    for model in config.models:
        meter.use_model(model)  # a usd cap on a model without a price fails here, not mid-run
    lines, totals = estimate(config, built)
    for line in lines:
        print(line, file=out)
    caps = config.budget.caps()
    if not caps:
        print("  budget: no caps (set budget.tokens / usd / gpu_seconds / wall_s)", file=out)
    for name, cap in caps.items():
        total = totals.get(name)
        if total is None:
            note = "not estimated" if name in totals else "measured while running"
        else:
            shown = f"${total:,.4f}" if name == "usd" else f"{total:,.0f}"
            fits = "fits" if total <= cap else "may exceed it: the run stops at the cap"
            note = f"estimate ≤ {shown} {fits}"
        print(f"  budget {name} {cap:,g}: {note}", file=out)


def _cmd_judge_check(
    args: argparse.Namespace, overrides: list[str], environ: dict[str, str], out: IO[str]
) -> int:
    from evalgate.commands.judge_check import judge_check
    from evalgate.config.load import load_config
    from evalgate.serve import open_server

    if args.samples is not None and not 1 <= args.samples <= 32:
        raise UsageError("--samples: give a number from 1 to 32")
    return judge_check(
        load_config(Path(args.config), overrides),
        environ=environ,
        out=out,
        server_factory=open_server,
        benchmark=args.benchmark,
        labels=args.labels,
        samples=args.samples,
        cache_dir=_cache_dir(args, environ),
        output=_output_dir(args.output) if args.output else None,
    )


def _cmd_schema(out: IO[str]) -> int:
    from evalgate.config.schema import json_schema

    print(json.dumps(json_schema(), indent=2), file=out)
    return 0


def _cmd_benchmarks(out: IO[str]) -> int:
    from evalgate.config import benchmarks
    from evalgate.config._yamlio import load_yaml

    for name, path in sorted(benchmarks.available().items()):
        data = load_yaml(path).data or {}
        ev, sm = data.get("eval", {}), data.get("sampling", {})
        print(f"{name:<14} {data.get('kind', '?'):<6} {data.get('description', '')}", file=out)
        print(f"{'':<14} defaults: eval={ev} sampling={sm}", file=out)
    return 0


class _Terminate:
    """SIGTERM (CI cancellation) takes the same path as Ctrl-C, so servers are stopped — once.

    A runner that cancels a job signals again while evalgate is still stopping its servers; a
    second KeyboardInterrupt raised inside that cleanup would escape it with a traceback and leave
    servers behind, so later signals are ignored. Tasks cancelled by the interrupt may log their
    own unwinding through asyncio's logger: that is noise at this point, not a diagnosis.
    """

    def __init__(self) -> None:
        self.fired = False

    def __call__(self, signum: int, frame: object) -> None:
        if self.fired:
            return
        self.fired = True
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        raise KeyboardInterrupt


def _dispatch(
    args: argparse.Namespace, overrides: list[str], environ: dict[str, str], out: IO[str]
) -> int:
    if args.command == "local":
        return _cmd_local(args, overrides, environ, out)
    if args.command == "resume":
        return _cmd_resume(args, overrides, environ, out)
    if args.command == "validate":
        return _cmd_validate(args, overrides, out)
    if args.command == "compare":
        return _cmd_compare(args, out)
    if args.command == "judge-check":
        return _cmd_judge_check(args, overrides, environ, out)
    if args.command == "schema":
        return _cmd_schema(out)
    if args.command == "action":
        from evalgate.action import run_action

        return run_action(environ, out=out)
    if args.command == "doctor":
        from evalgate.commands.doctor import run_doctor

        report = run_doctor(
            Path(args.config),
            environ=environ,
            overrides=overrides,
            deploy=not args.no_deploy,
            eval_items=args.items,
            log_dir=Path(args.output) / "logs" / "doctor",
            log=lambda line: print(line, file=sys.stderr, flush=True),
        )
        print(json.dumps(report.as_dict(), indent=2) if args.json else report.render(), file=out)
        return int(report.exit_code)
    if args.command in ("deploy", "status", "stop"):
        return _cmd_lifecycle(args, environ, out)
    if args.command == "push":
        from evalgate.publish.hf_hub import push_run

        if args.repo.count("/") != 1 or not all(args.repo.split("/")):
            raise UsageError(f"--repo {args.repo!r}: give the dataset repository as ORG/NAME")
        url = push_run(
            args.run,
            repo=args.repo,
            output_root=Path(args.output),
            environ=environ,
            private=not args.public,
            log=lambda line: print(line, file=sys.stderr, flush=True),
        )
        print(url, file=out)
        return 0
    if args.command in ("runs", "show"):
        from evalgate.commands import runs

        if args.command == "runs":
            found = runs.list_runs(Path(args.output), benchmark=args.benchmark, limit=args.limit)
            runs.print_runs(found, out)
        else:
            found_runs = runs.find_runs(Path(args.output), args.run, benchmark=args.benchmark)
            for index, info in enumerate(found_runs):
                if index:
                    print(file=out)
                runs.show_run(info, out)
        return 0
    return _cmd_benchmarks(out)


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


def main(
    argv: list[str] | None = None, environ: dict[str, str] | None = None, out: IO[str] | None = None
) -> int:
    environ = dict(os.environ if environ is None else environ)
    # A TextIOBase, not a typing.IO: the commands only write and flush.
    out = out or cast("IO[str]", _PipeSafe(sys.stdout))
    args: argparse.Namespace | None = None
    try:
        args, extra = _parser().parse_known_args(argv)
        takes_overrides = args.command in TAKES_OVERRIDES
        overrides = _split_overrides(extra) if takes_overrides else []
        if extra and not takes_overrides:
            raise UsageError(f"unrecognized arguments: {' '.join(extra)}")
        long_running = args.command in ("local", "resume", "action", "doctor", "deploy")
        handler = _Terminate()
        previous = (
            {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
            if long_running
            else {}
        )
        try:
            return _dispatch(args, overrides, environ, out)
        finally:
            for sig, before in previous.items():
                # Once interrupted, this process is on its way out with 130: a runner's
                # follow-up signal must not kill it by signal (-15, -2) on the last stretch.
                signal.signal(sig, signal.SIG_IGN if handler.fired else before)
    except EvalgateError as exc:
        for line in str(exc).splitlines() or [""]:  # one line per mistake (validate finds all)
            print(f"evalgate: error: {line}", file=sys.stderr)
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

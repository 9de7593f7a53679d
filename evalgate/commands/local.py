"""``evalgate local``: run evals.yaml on this machine, gate against ``--baseline`` if given."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import IO

from evalgate import _collector
from evalgate.commands._options import cache_dir, log_line, output_dir, print_outcome
from evalgate.errors import ConfigError

__all__ = ["run"]


def run(
    args: argparse.Namespace, overrides: list[str], environ: dict[str, str], out: IO[str]
) -> int:
    from evalgate import pipeline
    from evalgate.config.load import load_config
    from evalgate.run.layout import new_run_id
    from evalgate.run.progress import make_progress
    from evalgate.suites.datasets import DataError

    config = load_config(Path(args.config), overrides)
    output = output_dir(args.output)
    baselines = pipeline.load_baselines(Path(args.baseline)) if args.baseline else None
    if baselines is not None:  # refused now, not after the whole eval
        pipeline.check_baselines(config, baselines)
    run_id = new_run_id()
    try:
        how = pipeline.Invocation(
            output, environ, make_progress(environ), log_line, cache_dir=cache_dir(args, environ)
        )
        _collector.release(freeze=True)  # started: what start-up made is permanent
        verdict = pipeline.run(config, how, baselines=baselines, run_id=run_id)
    except KeyboardInterrupt:
        _resume_hint(output, run_id)
        raise
    except DataError as exc:  # read before any model starts: point at the evals.yaml line
        if exc.benchmark is None:
            raise
        raise ConfigError(f"{config.locate(exc.benchmark, exc.field)}: {exc}") from None
    return print_outcome(verdict, output, out)


def _resume_hint(output: Path, run_id: str) -> None:
    """Interrupted after its run directories exist: the command that finishes the run."""
    from evalgate.run.rundir import run_dirs_under

    if run_dirs_under(output, run=run_id):
        flag = "" if output == Path("outputs") else f" --output {output}"
        print(f"evalgate: to finish this run: evalgate resume {run_id}{flag}", file=sys.stderr)

"""``evalgate resume``: finish an interrupted ``local`` run from its journal."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import IO

from evalgate import _collector
from evalgate.commands._options import cache_dir, log_line, output_dir, print_outcome
from evalgate.errors import ConfigError, UsageError

__all__ = ["run"]


def run(
    args: argparse.Namespace, overrides: list[str], environ: dict[str, str], out: IO[str]
) -> int:
    from evalgate import pipeline
    from evalgate.run.progress import make_progress

    output = output_dir(args.output)
    try:
        how = pipeline.Invocation(
            output, environ, make_progress(environ), log_line, cache_dir=cache_dir(args, environ)
        )
        _collector.release(freeze=True)  # started: what start-up made is permanent
        verdict = pipeline.resume(
            args.run, how, retry_errors=args.retry_errors, budget=_budget(overrides)
        )
    except KeyboardInterrupt:  # interrupted again: the same command goes on from there
        flag = "" if output == Path("outputs") else f" --output {output}"
        print(f"evalgate: to finish this run: evalgate resume {args.run}{flag}", file=sys.stderr)
        raise
    return print_outcome(verdict, output, out)


def _budget(overrides: list[str]) -> dict[str, object]:
    """``--budget.FIELD=VALUE`` for resume; the run's own config holds for everything else."""
    from pydantic import ValidationError

    from evalgate.config.overrides import parse_overrides
    from evalgate.config.spec import BudgetSettings

    cli = parse_overrides(overrides)
    other = [k for k in cli.paths if k[0] != "budget" or len(k) != 2]
    if other:
        raise UsageError(
            f"resume takes only --budget.FIELD=VALUE overrides, not --{'.'.join(other[0])} "
            "(the run's recorded config holds; start a new run to change it)"
        )
    data = cli.top.get("budget")
    if not isinstance(data, dict):  # `--budget.FIELD=V` (checked above) always makes a mapping
        data = {}
    try:
        BudgetSettings.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"command line: --budget.{where}: {err['msg']}") from None
    return data

"""Option values several commands take the same way (``--output``, ``--cache-dir``), and the
last lines a gating command prints (its scorecard, then where its verdict is)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING

from evalgate._text import visible
from evalgate.errors import UsageError

if TYPE_CHECKING:
    from evalgate.gate import Verdict

__all__ = ["cache_dir", "log_line", "output_dir", "print_outcome"]


def output_dir(value: str) -> Path:
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


def cache_dir(args: argparse.Namespace, environ: dict[str, str]) -> Path | None:
    """``--no-cache`` / ``--cache-dir``: the response cache's folder, None for no cache."""
    from evalgate.run.cache import default_cache_dir

    if args.no_cache:
        return None
    return Path(args.cache_dir) if args.cache_dir else default_cache_dir(environ)


def log_line(line: str) -> None:
    """Progress and warnings go to stderr, at once: stdout is the command's result. A value
    quoted in it with an invisible character shows it (``\\u200b``: evalgate._text)."""
    print(visible(line), file=sys.stderr, flush=True)


def print_outcome(verdict: Verdict, output: Path, out: IO[str]) -> int:
    """The scorecard on ``out`` (rendered on a terminal), the verdict's file on stderr; the exit
    code the verdict means."""
    from evalgate.report.terminal import print_scorecard
    from evalgate.run.layout import SCORECARD, VERDICT

    print_scorecard((output / SCORECARD).read_text(encoding="utf-8"), out)
    shown = "no gate configured" if verdict.status == "UNGATED" else verdict.status
    print(f"[evalgate] verdict {shown}: {output / VERDICT}", file=sys.stderr)
    return int(verdict.exit_code)

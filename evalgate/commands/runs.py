"""Listing and showing saved runs (`evalgate runs`, `evalgate show RUN`)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from evalgate.errors import UsageError
from evalgate.run.layout import RESULTS
from evalgate.run.rundir import is_run_dir, read_run_config, run_dirs_under
from evalgate.run.runfiles import RunMetadata, stored_metadata

__all__ = [
    "RunInfo",
    "find_run",
    "find_runs",
    "list_runs",
    "print_runs",
    "run_list",
    "run_show",
    "show_run",
]


@dataclass(frozen=True)
class RunInfo:
    path: Path
    run_id: str
    benchmark: str
    model: str
    model_id: str
    complete: bool
    rollouts: int  # journal lines written
    metadata: RunMetadata | None  # None: not finished, or its metadata.json cannot be read
    problem: str | None = None  # why its run_config.json cannot be read: listed, not left out


def _info(run_dir: Path) -> RunInfo:
    try:
        cfg = read_run_config(run_dir)
    except UsageError as exc:
        # Listed with the reason: a run that vanished from `runs` would look never made.
        return RunInfo(run_dir, run_dir.name, "?", "?", "", False, 0, None, problem=str(exc))
    meta = stored_metadata(run_dir)
    results = run_dir / RESULTS
    lines = 0
    if results.is_file():
        with results.open("rb") as fh:
            lines = sum(1 for line in fh if line.strip())
    return RunInfo(
        path=run_dir,
        run_id=run_dir.name,
        benchmark=cfg.benchmark.name,
        model=cfg.model.name,
        model_id=cfg.model_id,
        complete=meta is not None and meta.complete,
        rollouts=lines,
        metadata=meta,
    )


def list_runs(root: Path, *, benchmark: str | None = None, limit: int = 20) -> list[RunInfo]:
    """Runs under an output root, newest first (run ids start with a UTC timestamp); a limit of
    0 lists them all. A run whose config cannot be read is listed with the reason."""
    if limit < 0:
        raise UsageError(f"--limit {limit}: give a count, or 0 for all runs")
    dirs = sorted(run_dirs_under(root), key=lambda p: p.name, reverse=True)
    out = []
    for run_dir in dirs:
        info = _info(run_dir)
        # An unreadable run has no benchmark to filter on but its folder's name.
        shown = run_dir.parent.name.split("--")[0] if info.problem else info.benchmark
        if benchmark is None or shown == benchmark:
            out.append(info)
            if limit and len(out) >= limit:
                break
    return out


def find_runs(root: Path, ref: str, *, benchmark: str | None = None) -> list[RunInfo]:
    """The runs ``ref`` names: a run directory, or a run id (prefix) under ``root``. One
    invocation's benchmarks share a run id (what `evalgate runs` prints): all of them come back,
    in benchmark order, unless ``benchmark`` picks one."""
    path = Path(ref)
    if is_run_dir(path):
        matches = [path]
    else:
        folder = f"{benchmark}--*" if benchmark else "*"
        matches = run_dirs_under(root, folder=folder, run=f"{ref}*")
    if not matches:
        raise UsageError(f"no run {ref!r} under {root} (see `evalgate runs --output {root}`)")
    ids = sorted({m.name for m in matches})
    if len(ids) > 1:
        shown = ", ".join(ids[:5]) + (", …" if len(ids) > 5 else "")
        raise UsageError(f"{ref!r} matches {len(ids)} runs ({shown}); give more of the run id")
    infos = [_info(m) for m in matches]
    bad = next((i for i in infos if i.problem), None)
    if bad is not None:
        raise UsageError(bad.problem or "")
    return sorted(infos, key=lambda i: i.benchmark)


def find_run(root: Path, ref: str, *, benchmark: str | None = None) -> RunInfo:
    """One run: as :func:`find_runs`, but several benchmarks' runs are an error."""
    found = find_runs(root, ref, benchmark=benchmark)
    if len(found) > 1:
        names = ", ".join(i.benchmark for i in found)
        raise UsageError(f"run {ref!r} has {len(found)} benchmarks ({names}); add --benchmark")
    return found[0]


def print_runs(runs: list[RunInfo], out: IO[str]) -> None:
    if not runs:
        print("no runs found", file=out)
        return
    head = f"{'run id':<24} {'benchmark':<16} {'model':<14} {'rollouts':>8} {'score':>7}"
    print(f"{head} {'errors':>6}  status", file=out)
    for r in runs:
        if r.problem:
            print(f"{r.run_id:<24} unreadable: {r.problem}", file=out)
            continue
        score = r.metadata.avg_reward if r.metadata is not None else None
        shown = f"{100 * score:.1f}%" if score is not None else "–"
        status = "complete" if r.complete else "incomplete (evalgate resume)"
        errors = r.metadata.errors if r.metadata is not None else None
        print(
            f"{r.run_id:<24} {r.benchmark:<16} {r.model:<14} {r.rollouts:>8} {shown:>7} "
            f"{'–' if errors is None else errors!s:>6}  {status}",
            file=out,
        )


def show_run(info: RunInfo, out: IO[str]) -> None:
    # Shown as written: the selected keys' JSON, whatever version wrote them.
    meta = info.metadata.as_written() if info.metadata is not None else {}
    print(f"run        {info.path}", file=out)
    print(f"benchmark  {info.benchmark}", file=out)
    print(f"model      {info.model} ({info.model_id})", file=out)
    print(f"status     {'complete' if info.complete else 'incomplete'}", file=out)
    print(f"rollouts   {info.rollouts} written", file=out)
    for key in (
        "num_examples",
        "rollouts_per_example",
        "avg_reward",
        "avg_metrics",
        "pass_at_k",
        "errors",
        "error_kinds",
        "usage",
        "time_ms",
        "sampling_args",
        "sequential",
    ):
        if meta.get(key) not in (None, {}, []):
            print(f"{key:<10} {json.dumps(meta[key], sort_keys=True)}", file=out)


def run_list(
    args: argparse.Namespace, overrides: list[str], environ: dict[str, str], out: IO[str]
) -> int:
    """``evalgate runs``: recent runs under ``--output``, newest first."""
    print_runs(list_runs(Path(args.output), benchmark=args.benchmark, limit=args.limit), out)
    return 0


def run_show(
    args: argparse.Namespace, overrides: list[str], environ: dict[str, str], out: IO[str]
) -> int:
    """``evalgate show RUN``: every benchmark run of an invocation (or one run directory)."""
    for index, info in enumerate(find_runs(Path(args.output), args.run, benchmark=args.benchmark)):
        if index:
            print(file=out)
        show_run(info, out)
    return 0

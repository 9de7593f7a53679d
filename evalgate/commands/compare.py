"""``evalgate compare``: gate saved runs against saved baselines, without a model."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import IO

from evalgate.commands._options import output_dir, print_outcome

__all__ = ["run"]


def run(
    args: argparse.Namespace, overrides: list[str], environ: dict[str, str], out: IO[str]
) -> int:
    # evalgate.gating, not the pipeline: a compare imports no run machinery (HTTP client,
    # sandboxes, suites), which would only add to its peak (bench/compare_scale.py).
    from evalgate import gating
    from evalgate.config.load import load_config
    from evalgate.run.rundir import load_runs, recorded_gate

    base = gating.load_baselines(Path(args.base))
    heads = list(load_runs(Path(args.head)).values())
    # Without --config, the policy the baseline was gated with: a PR can't loosen its own gate.
    gate = load_config(Path(args.config)).gate if args.config else recorded_gate(base[min(base)])
    output = output_dir(args.output) if args.output else Path(args.head) / "compare"
    verdict = gating.gate_runs(heads, base, gate, output_root=output, saved=True)
    return print_outcome(verdict, output, out)

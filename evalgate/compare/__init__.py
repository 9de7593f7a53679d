"""Stage 5, compare: a PR run against its baseline, paired per item.

``paired`` joins items and runs the tests of :mod:`evalgate.stats`. Finding the runs to compare
is the run directory's job (:mod:`evalgate.run.rundir`).
"""

from __future__ import annotations

from evalgate.compare.paired import (
    Flip,
    LoadedRun,
    MetricComparison,
    RunComparison,
    compare_runs,
    compare_with_baselines,
    load_run,
    summary_of,
    threshold_test,
)

__all__ = [
    "Flip",
    "LoadedRun",
    "MetricComparison",
    "RunComparison",
    "compare_runs",
    "compare_with_baselines",
    "load_run",
    "summary_of",
    "threshold_test",
]

"""Stage 7, compare: a PR run against its baseline, paired per item.

``paired`` joins items and runs the tests of :mod:`evalgate.stats`. Finding the runs to compare
is the run directory's job (:mod:`evalgate.run.rundir`); deciding is the gate's.
"""

from __future__ import annotations

from evalgate.compare.paired import LoadedRun, compare_with_baselines, load_run

__all__ = ["LoadedRun", "compare_with_baselines", "load_run"]

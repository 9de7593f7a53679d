"""The run's config in PR mode: the PR's candidate laid over the base's exam
(:func:`evalgate.config.split.merge_benchmark`, field by field as ``split.FIELDS`` says)."""

from __future__ import annotations

from pathlib import Path

from evalgate.config.load import Config
from evalgate.config.spec import Benchmark, JudgeScorer
from evalgate.config.split import merge_benchmark

__all__ = ["merge"]


def merge(base: Config, pr: Config) -> Config:
    """The PR's config with the base's exam: each benchmark the base defines keeps the base's
    definition with the PR's candidate fields laid over it; the models (the candidate) are the
    PR's; gate, baseline and publishing the base's (budgets: see ``apply_ceiling``). A benchmark
    only the PR has is its proposal: the base sets no threshold or baseline for it, and it runs
    after the base's."""
    ours = {b.name: _anchor_labels(b, base.path.parent) for b in base.benchmarks}
    theirs = {b.name: b for b in pr.benchmarks}
    # The base's benchmarks first, in the base's order; then the PR's own (its proposals), so
    # that nothing the PR adds runs before the exam (a budget spent, a shared file written).
    benchmarks = tuple(
        merge_benchmark(ours[name], theirs[name]) for name in ours if name in theirs
    ) + tuple(b for b in pr.benchmarks if b.name not in ours)
    update = {"benchmarks": benchmarks, "publish": base.publish}
    return pr.model_copy(update=update)


def _anchor_labels(bench: Benchmark, root: Path) -> Benchmark:
    """A judge's labelled set is named relative to its evals.yaml: the base's, in the base's
    tree (the merged config keeps the PR's path), so the PR cannot edit the agreement shown."""
    scorer = getattr(bench, "scorer", None)
    if not isinstance(scorer, JudgeScorer) or scorer.labels is None:
        return bench
    if Path(scorer.labels).is_absolute():
        return bench
    anchored = scorer.model_copy(update={"labels": str(root / scorer.labels)})
    return bench.model_copy(update={"scorer": anchored})

"""PR run vs baseline run, paired per item: the comparison the gate decides on.

Items are joined on (id, content hash), so a changed item is never paired with its old self.
Per-item scores are means over k rollouts (Miller 2024: the item is the unit), clustered by group
id when the data has groups. The tests themselves live in :mod:`evalgate.stats`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Required, TypedDict, Unpack

from evalgate import stats
from evalgate.run.baseline import results_digest
from evalgate.run.rundir import LoadedRun, load_run
from evalgate.run.summary import RunSummary, summarize

if TYPE_CHECKING:  # numpy loads when a test runs: a run without a gate needs none (start-up time)
    import numpy as np

    from evalgate.config.spec import GateSettings

__all__ = [
    "LEGACY_ORDER",
    "CompareOptions",
    "Flip",
    "LoadedRun",
    "MetricComparison",
    "RunComparison",
    "compare_metric",
    "compare_runs",
    "compare_with_baselines",
    "group_plan_of",
    "load_run",
    "missing_from_head",
    "order_of",
    "sequential_design",
    "summary_of",
    "threshold_test",
]

# Derived metrics are functions of the reward already compared; gating on them too would only
# add multiplicity (Holm) without new information.
_DERIVED_PREFIXES = ("pass@", "pass^")


# A metric's test, before Holm's correction across metrics (gate.py).
Outcome = Literal["PASS", "FAIL", "INCONCLUSIVE"]


@dataclass(frozen=True)
class MetricComparison:
    metric: str
    result: stats.PairedResult | None
    status: Outcome  # before Holm across metrics; see gate.py
    mde: float | None
    reason: str = ""
    scale: stats.Scale | None = None  # the metric's scale (None: a proportion, as before)
    # Why this comparison cannot PASS whatever its bounds say (a pairwise judge's position
    # bias, compare/position.py); the scorecard says it first.
    blocked: str = ""
    # PR rollouts that errored and were scored the scale's worst value for the PASS decision
    # (evalgate.run.imputed); the FAIL side and the counts shown read the scores the PR has.
    imputed: int = 0
    imputed_as: float | None = None  # the worst value those rollouts were scored


@dataclass(frozen=True)
class Flip:
    """An item whose outcome changed between base and PR."""

    item_id: str
    direction: str  # "regressed" (pass→fail) or "improved" (fail→pass)
    base_score: float
    head_score: float
    prompt: str
    base_completion: str
    head_completion: str


@dataclass(frozen=True)
class RunComparison:
    model: str
    benchmark: str
    base_path: str
    head_path: str
    comparable: bool
    reason: str
    changes: tuple[str, ...]  # what the PR changed in the subject (model, prompt, sampling)
    n_paired: int
    n_base_only: int
    n_head_only: int
    n_changed: int  # same id, different content
    metrics: tuple[MetricComparison, ...]
    flips: tuple[Flip, ...]
    base_origin: dict[str, Any] = field(default_factory=dict)
    # Baseline items the PR never ran because its sequential looks stopped early (not in
    # n_base_only: the PR did not drop them).
    n_not_run: int = 0
    # Items another model (a LiteLLM fallback) answered on one side and not the same way on the
    # other: not paired, since the pair would compare two models (README, "LiteLLM").
    n_fallback: int = 0


def _measurement_diff(base: LoadedRun, head: LoadedRun) -> str | None:
    measured = base.config.fingerprint.measurement, head.config.fingerprint.measurement
    if measured[0] is None or measured[1] is None:
        return "a run has no fingerprint (written by an older evalgate)"
    b, h = measured[0].as_written(), measured[1].as_written()
    for key in sorted(set(b) | set(h)):
        if b.get(key) != h.get(key):
            return f"{key} differs (base {b.get(key)!r}, PR {h.get(key)!r})"
    return None


def _pairwise_diff(base: LoadedRun, head: LoadedRun) -> str | None:
    """A pairwise judge scores the PR's completions against one baseline's: compared with any
    other baseline (or judged against none, where every item is a tie by construction) the
    scores mean nothing, and a tie would pass quietly."""
    if not _is_pairwise(head):
        return None
    judged = head.config.baseline.results_sha256 if head.config.baseline is not None else None
    if judged is None:
        return (
            "pairwise judge: the PR run was judged against no baseline (every item a tie by "
            "construction); run it with this baseline (--baseline)"
        )
    if judged != results_digest(Path(base.path)):
        return (
            "pairwise judge: the PR run was judged against another baseline run; run it "
            "with this one (--baseline)"
        )
    return None


def _is_pairwise(run: LoadedRun) -> bool:
    measurement = run.config.fingerprint.measurement
    return measurement is not None and measurement.pairwise


def _subject_changes(base: LoadedRun, head: LoadedRun) -> tuple[str, ...]:
    subjects = base.config.fingerprint.subject, head.config.fingerprint.subject
    b, h = (s.as_written() if s is not None else {} for s in subjects)
    return tuple(key for key in sorted(set(b) | set(h)) if b.get(key) != h.get(key))


def summary_of(run: LoadedRun) -> RunSummary:
    """Re-summarise a saved run (for `evalgate compare`, which runs nothing)."""
    return summarize(
        run.records,
        benchmark=run.benchmark,
        model=run.model,
        model_id=run.config.model_id,
        run_dir=str(run.path),
        n_items=run.records.n_items,
        rollouts=run.rollouts,
        time_s=run.metadata.time_ms / 1000,
    )


def compare_with_baselines(
    heads: list[LoadedRun],
    baselines: dict[tuple[str, str], LoadedRun],
    gate: GateSettings,
    *,
    seed: int = 0,
) -> list[RunComparison]:
    """Compare every head run that has a baseline for the same (model label, benchmark).

    An agent variant's run ("tasks.skills") pairs with its benchmark's baseline ("tasks") and is
    named by its run, as the scorecard's rows and the sequential decisions are: two variants
    are two comparisons, never two rows of one name."""
    out = []
    for head in heads:
        base = baselines.get((head.model, head.benchmark))
        if base is not None:
            comp = compare_runs(
                base,
                head,
                margin=gate.margin,
                alpha=gate.alpha,
                metrics=gate.metrics,
                seed=seed,
                scales=getattr(gate, "scales", None),
            )
            run = head.config.run_name
            out.append(comp if run == comp.benchmark else dataclasses.replace(comp, benchmark=run))
    return out


def missing_from_head(
    heads: list[LoadedRun], baselines: dict[tuple[str, str], LoadedRun], gate: Any
) -> list[RunComparison]:
    """What the base gates that the PR's saved runs lack (a folder deleted, a benchmark not
    run), each as a comparison that cannot be made, so it never passes quietly: a baseline's
    (model, benchmark), and a benchmark under ``gate.thresholds``, with no head run.

    For `evalgate compare`, where the head is whatever folders are there; a live run knows what
    it ran (a benchmark that failed to run is an ERROR of its own).
    """
    ran = {(h.model, h.benchmark) for h in heads}
    out = []
    for (model, benchmark), base in sorted(baselines.items()):
        if (model, benchmark) not in ran:
            why = "the baseline has this model and benchmark; the PR run does not"
            out.append(_not_run(model, benchmark, why, base))
            ran.add((model, benchmark))
    models = sorted({m for m, _ in ran} | {m for m, _ in baselines})
    for benchmark in sorted(gate.thresholds):
        for model in models:
            if (model, benchmark) not in ran:
                out.append(_not_run(model, benchmark, "gate.thresholds gates this benchmark"))
    return out


def _not_run(model: str, benchmark: str, why: str, base: LoadedRun | None = None) -> RunComparison:
    return RunComparison(
        model=model,
        benchmark=benchmark,
        base_path=str(base.path) if base is not None else "",
        head_path="",
        comparable=False,
        reason=f"not in the PR run ({why})",
        changes=(),
        n_paired=0,
        n_base_only=base.records.n_items if base is not None else 0,
        n_head_only=0,
        n_changed=0,
        metrics=(),
        flips=(),
        base_origin=base.origin if base is not None else {},
    )


def threshold_test(
    scores: np.ndarray | list[float],
    threshold: float,
    *,
    clusters: list[str] | None,
    alpha: float,
) -> tuple[Outcome, float, float]:
    """Is the score significantly below ``threshold``? Returns (status, p_below, lower bound).

    PASS when the one-sided (1 − α) lower bound clears the threshold; FAIL-candidate when the
    one-sided test of "score ≥ threshold" rejects (p_below ≤ α; Holm across checks decides);
    otherwise INCONCLUSIVE. Binary scores without clusters use exact binomial tests (Clopper–
    Pearson bound); others a t test with the (clustered) SE and n − 1 (C − 1) df.
    """
    vals = [float(v) for v in scores]
    n = len(vals)
    if n == 0:
        return "INCONCLUSIVE", 1.0, float("nan")
    binary = all(v in (0.0, 1.0) for v in vals)
    if clusters is not None and binary and min(vals) == max(vals):
        # Every item scored the same: a clustered SE is zero and says nothing. Fall back to the
        # exact test on the items (the data carry no information about the clustering).
        clusters = None
    if clusters is None and binary:
        # Plain floats (evalgate.stats._binomial): a thresholded run on 0/1 scores loads no numpy
        # and no scipy, a quarter of a second of its start-up.
        k = int(sum(vals))
        p_below = stats.binom_cdf(k, n, threshold)  # P(X <= k | p = threshold)
        lo = stats.clopper_pearson_lower(k, n, alpha)
    else:
        # scipy.special only (stdtr = t CDF): the full scipy.stats import costs most of a second.
        from scipy import special

        est = stats.mean_ci(vals, clusters=clusters, alpha=2 * alpha)  # one-sided bounds
        if not math.isfinite(est.se) or est.se == 0:
            if n < 2:  # one graded item: no evidence either way
                return "INCONCLUSIVE", 1.0, est.mean
            below = est.mean < threshold
            return ("FAIL" if below else "PASS"), (0.0 if below else 1.0), est.mean
        df = (est.n_clusters or n) - 1
        p_below = float(special.stdtr(df, (est.mean - threshold) / est.se))
        lo = est.lo
    if lo >= threshold:
        return "PASS", p_below, lo
    return ("FAIL" if p_below <= alpha else "INCONCLUSIVE"), p_below, lo


def sequential_design(run: LoadedRun) -> tuple[int, int] | None:
    """(look, looks) when ``run`` stopped (or finished) under sequential looks, else None."""
    seq = run.metadata.sequential
    if seq is None or seq.look is None or seq.looks is None:
        return None
    return seq.look, seq.looks


def order_of(run: LoadedRun) -> tuple[stats.OrderKey, int | None]:
    """(key, horizon) of the order ``run``'s paired items are read in (:func:`stats.item_order`).

    The key is the one the gate drew for the run and recorded (``metadata.json``'s
    ``order_key``: a fixed run's drawn once its outputs were all recorded, a sequential run's
    when it started, the order its looks ran in). A run written before keys existed recorded
    none: it is read in the legacy public order of the seed it ran with (``sequential.seed``,
    else 0), as it always was, and :data:`LEGACY_ORDER` says so on its rows. The horizon: a run
    decided by sequential looks recorded how many items were planned, so the graded tests are
    the looks' own process (the last look's verdict, reproduced); any other run has none (the
    horizon is then the number of paired items).
    """
    seq, recorded = run.metadata.sequential, run.metadata.order_key
    if recorded is not None:  # checked when the run was loaded (runfiles.RunMetadata)
        key = stats.OrderKey.parse(recorded)
    else:
        seeds = (
            seq.seed if seq else None,
            run.config.sequential.seed if run.config.sequential else None,
        )
        key = stats.OrderKey.legacy(next((s for s in seeds if s is not None), 0))
    horizon = seq.items_total if seq is not None and sequential_design(run) is not None else None
    return key, horizon


# Said on every row of a run read in the legacy public order (order_of).
LEGACY_ORDER = (
    "read in the public order: the run recorded no order key (an older evalgate), so a PR "
    'could have known the order (docs/gate.md, "The order of the items")'
)


def group_plan_of(run: LoadedRun) -> tuple[int | None, int | None]:
    """(planned groups, planned largest group) of a run decided by sequential looks on grouped
    items: the constants of its betting process over groups (:func:`stats.sequential_compare`),
    so compare reads the looks' own process. (None, None) otherwise: the groups found."""
    seq = run.metadata.sequential
    if seq is None or seq.groups_total is None or seq.group_size is None:
        return None, None
    return seq.groups_total, seq.group_size


def compare_metric(
    name: str,
    base: np.ndarray,
    head: np.ndarray,
    *,
    clusters: list[Any] | np.ndarray | None,
    margin: float,
    alpha: float,
    seed: int = 0,
    design: tuple[int, int] | None = None,
    n_resamples: int = 10_000,
    with_mde: bool = True,
    scale: str | list[float] | None = None,
    horizon: int | None = None,
    groups_total: int | None = None,
    group_size: int | None = None,
) -> MetricComparison:
    """One metric's paired test, its bounds, its MDE and its status (before Holm).

    ``design`` = (look, looks) for a run decided by sequential looks: the bounds are then the
    repeated confidence bounds at the look's nominal level and the p-values repeated p-values
    (:func:`evalgate.stats.sequential_compare`), valid whatever look the run stopped at.
    ``with_mde=False`` skips the MDE (simulations that only count verdicts). ``scale``: the
    metric's declared scale (``gate.scales``), else inferred from both runs' values; the range
    it assumes is stated in ``reason`` when the data had to supply it. ``horizon``: the items
    are in the run's order (:func:`stats.item_order`), the first of ``horizon`` planned ones;
    graded PASS bounds are one betting process over them (:func:`stats.sequential_compare`).
    With ``clusters`` the items are then whole groups in the run's order, and ``groups_total`` /
    ``group_size`` (default: the groups found) the plan of the betting process over groups.
    """
    import numpy as np

    found = stats.metric_scale(np.concatenate([base, head]), scale)
    plan = stats.Design(
        alpha=alpha,
        margin=margin,
        bounds=(found.low, found.high),
        horizon=horizon,
        looks=1 if design is None else design[1],
        groups_total=groups_total,
        group_size=group_size,
        n_resamples=n_resamples,
        seed=seed,
    )
    if design is None:
        result = stats.paired_compare(base, head, plan, clusters=clusters)
    else:
        result = stats.sequential_compare(base, head, plan, look=design[0], clusters=clusters)
    level = result.level or result.alpha
    if design is not None and design[0] == design[1]:
        # A run that reached its last look: the design's MDE, the power of the FAIL test over
        # every look (stats.design_level, the one-look level with that power), not the last
        # look's test alone (which ignores what the earlier looks add: 1.075 × the fixed
        # design's MDE in the normal limit against 1.04 for 4 looks).
        level = stats.design_level(design[1], alpha)
    # The effect the gate's own FAIL test detects with 80 % power at the level it ran at, under
    # the stated assumption (the PR only lowers scores, uniformly or proportionally).
    mde = stats.mde_for_test(base, head, clusters=clusters, alpha=level) if with_mde else None
    reason = "; ".join(x for x in (result.note, found.assumption) if x)
    return MetricComparison(name, result, stats.verdict(result), mde, reason, found)


class CompareOptions(TypedDict, total=False):
    """The keyword arguments of :func:`compare_runs` (margin and alpha required)."""

    margin: Required[float]
    alpha: Required[float]
    metrics: list[str] | None
    seed: int
    scales: Mapping[str, str | list[float]] | None


def compare_runs(
    base: LoadedRun, head: LoadedRun, **options: Unpack[CompareOptions]
) -> RunComparison:
    """Pair ``head`` with ``base`` item by item and test every gated metric (``scales``: the
    declared scale of each metric, ``gate.scales``): :func:`evalgate.compare.runs.compare_runs`
    (numpy loads with it: a run without a gate needs none)."""
    from evalgate.compare import runs

    return runs.compare_runs(base, head, **options)

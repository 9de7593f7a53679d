"""Calibrate the evalgate gate by simulation: false PASS at Δ = −δ, A/A false FAIL, power at the
reported MDE, and the model calls that sequential looks save.

Usage: ``nice -n 10 python bench/gate_calibration.py [--runs 1000] [--seed 0] [--quick]``

Every simulated PR goes through the path ``evalgate compare`` takes for one metric:
:func:`evalgate.compare.paired.compare_metric` (the paired test, its inverted bounds, the MDE
and the status), with ``design=(look, looks)`` at each sequential look as a sequential run's
``compare`` does; with one metric Holm leaves the status unchanged. Sign-flip tests use 2,000
resamples here (the gate's default is 10,000): a little Monte-Carlo noise in each p, no bias.

Items have latent pass rates p_i = expit(θ_i), θ_i ~ N(1.6, 2.8²) (mean ≈ 0.70; groups: θ_g ~
N(1.6, 2.4²) plus N(0, 1.4²) per item). Kinds of data:

  breaks   greedy decoding: the PR's rollouts are the base's, except that each passing rollout
           fails with probability f (the "PR only breaks items" corner; A/A = identical runs)
  noise    temperature sampling: each arm draws its own k rollouts; the PR scales every item's
           pass rate by (1 − f) (a proportional drop)
  groups   noise, with items in G equal groups and a per-run, per-group shock N(0, 1) on the
           logit in each arm (one retrieved passage or few-shot draw shared by the group)
  whole    groups, but the PR breaks whole groups: each group scores 0 in the PR with
           probability π (else it is drawn like the base), and nothing else changes
  gbreaks  groups, greedy: the PR replays the base's rollouts and breaks some passes (a few
           items per group)
  graded   graded rewards in [0, 1] (one rollout): each arm draws Beta(8p, 8(1 − p)) (mean p);
           the PR scales every item's p by (1 − f) (a proportional drop)
  gzero    graded, the PR replays the base's reward and zeroes it with probability f (graded
           rewards' "PR only breaks items": a few large negative differences, the rest 0)
  gshift   graded, the PR lowers every item's mean by the same amount s (a uniform shift; s
           solves E[min(p, s)] = Δ, so items below s drop to 0)
  mixed    k rollouts, the PR replays the base's rollouts, breaks each pass with probability f
           and fixes each fail with probability 0.05 ("breaks and fixes": f solves
           −f·E[p] + 0.05·(1 − E[p]) = Δ; at Δ = 0 the A/A runs differ but Δ is 0)

Adversarial kinds (issue 35), where the PR knows the library and the base run:

  order    k rollouts, the PR replays the base's rollouts and fails every rollout of the items
           LAST in the order it can compute (the public one every run used, sha256("0:" + id)),
           as many as put the population Δ at −δ: the breaks the betting bound sees last
  gorder   graded, the same: the PR zeroes the rewards of the last items of that order
  seedshop graded, sequential: the PR simulates the looks for sampling.seed 0–19 (the old
           order's key) and submits the seed that PASSes, if any
  drift    k rollouts, sequential: the PR's server replays the base's rollouts for the first
           half of the requests it sees and breaks passes at twice the rate after (Δ = −δ over
           the run): behaviour that depends on the request count, which no key hides from a
           sequential run's server (a residual, docs/threat-model.md; expected far above α)

The gate reads each run in the order of a key it draws itself (stats.OrderKey.draw, as a run
does), so the figure printed is what the adversary gets now; ``--before`` also prints, from the
same draws, what it got when the order was public (order, gorder) or the candidate's seed
(seedshop: PASS when any of the 20 seeds' orders PASSes; the same figure is what re-running a
job 20 times on the same outputs would shop now, one fresh key each).

f is solved so that the population Δ is exactly the target. Per cell (≥ 1,000 runs each):
A/A false-FAIL (Δ = 0), false PASS at Δ = −δ, the median reported MDE over the A/A runs and the
power (FAIL rate) at Δ = −MDE; sequential cells (4 Wang–Tsiatis looks, the gate's design)
report the MDE of the design (what a run that reaches the last look reports: the FAIL test's
power over every look, ``stats.design_level``), the power at it (FAIL at any look) and the
share of paired items used at Δ = −2·MDE, and print the matching fixed-sample cell's MDE
beside it. ok marks: rates within 2 Monte-Carlo SE of their bound (α for errors, 0.80 for
power), items used ≤ 65 %. For
the 0/1 "noise" cells the A/A false-FAIL rate, for the 0/1 k = 1 "noise" and "breaks" cells the
false-PASS rate, and for the sequential 0/1 "breaks" cell the items used, are also computed
exactly (no Monte-Carlo error).
The script prints figures only and asserts nothing.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import expit

try:
    from evalgate import stats
    from evalgate.compare.paired import compare_metric
except ImportError:  # run as `python bench/gate_calibration.py` from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from evalgate import stats
    from evalgate.compare.paired import compare_metric

__all__ = ["CELLS", "Cell", "main", "simulate"]

SIM_RESAMPLES = 2_000
LOOKS = 4
SHOCK = 1.0  # SD (logit scale) of the per-run, per-group shock


@dataclass(frozen=True)
class Cell:
    kind: str  # breaks | noise | groups | whole | gbreaks | graded | gzero | gshift | mixed
    # | order | gorder | seedshop | drift (adversarial, issue 35)
    n: int
    k: int = 1
    groups: int | None = None
    sequential: bool = False

    @property
    def label(self) -> str:
        g = f" G={self.groups}" if self.groups else ""
        return f"{self.kind} n={self.n} k={self.k}{g}{' seq' if self.sequential else ''}"


CELLS = (
    *(Cell("breaks", n) for n in (50, 100, 200, 500)),
    *(Cell("breaks", n, k=4) for n in (50, 200)),
    Cell("noise", 200),
    Cell("noise", 200, k=4),
    *(Cell("groups", 200, groups=g) for g in (5, 10, 40)),
    Cell("groups", 200, k=4, groups=40),
    *(Cell("whole", 500 // g * g, k=4, groups=g) for g in (5, 20, 40, 100)),
    Cell("whole", 500, k=1, groups=20),
    Cell("gbreaks", 200, k=1, groups=40),
    *(Cell("graded", n) for n in (50, 200, 500)),
    *(Cell("gzero", n) for n in (50, 200, 500)),
    *(Cell("gshift", n) for n in (50, 200, 500)),
    *(Cell("mixed", n, k=4) for n in (200, 500)),
    Cell("whole", 500, k=4, groups=20, sequential=True),
    Cell("breaks", 200, sequential=True),
    Cell("noise", 200, sequential=True),
    Cell("noise", 200, k=4, sequential=True),
    Cell("groups", 200, groups=40, sequential=True),
    Cell("graded", 200, sequential=True),
    Cell("gzero", 200, sequential=True),
    Cell("gshift", 200, sequential=True),
    Cell("mixed", 200, k=4, sequential=True),
    # Fixed grouped data, every pattern (`--errors-only --fixed --only "G=5,G=20,G=40,G=100,
    # G=200"`): the PR breaks whole groups, breaks some items per group (greedy), or lowers every
    # item's pass rate (proportionally), the sizes of the sequential block below.
    *(
        Cell(kind, 500 // g * g, k=k, groups=g)
        for kind in ("whole", "gbreaks", "groups")
        for g in (5, 20, 40, 100, 200)
        for k in (1, 4)
        if (kind, k, g)
        not in (
            ("whole", 4, 5),
            ("whole", 4, 20),
            ("whole", 4, 40),
            ("whole", 4, 100),
            ("whole", 1, 20),
        )  # cells above
    ),
    # Adversarial (issue 35): breaks placed last in the order the PR can compute, and seed
    # shopping (`--only "order,seedshop" [--before]`).
    *(Cell("order", n, k=4) for n in (200, 500)),
    *(Cell("gorder", n) for n in (200, 500)),
    *(Cell("seedshop", n, sequential=True) for n in (200, 500)),
    *(Cell("drift", n, k=4, sequential=True) for n in (200, 500)),
    # Sequential grouped data, every pattern (`--errors-only --only "G=5 seq,G=20 seq,G=40 seq,
    # G=100 seq,G=200 seq"`): the PR breaks whole groups, breaks some items per group (greedy),
    # or lowers every item's pass rate (proportionally).
    *(
        Cell(kind, 500 // g * g, k=k, groups=g, sequential=True)
        for kind in ("whole", "gbreaks", "groups")
        for g in (5, 20, 40, 100, 200)
        for k in (1, 4)
        if (kind, k, g) != ("whole", 4, 20)  # a cell above
    ),
)


@functools.cache
def _mean_pass(kind: str) -> float:
    """Population mean of the (shocked) base pass rate, for solving f from the target Δ."""
    rng = np.random.default_rng(20240101)
    if kind in ("groups", "whole", "gbreaks"):
        theta = 1.6 + math.sqrt(2.4**2 + 1.4**2 + SHOCK**2) * rng.standard_normal(1_000_000)
    else:
        theta = 1.6 + 2.8 * rng.standard_normal(1_000_000)
    return float(expit(theta).mean())


@functools.cache
def _uniform_shift(drop: float) -> float:
    """s with E[p − max(p − s, 0)] = E[min(p, s)] = drop, for the "gshift" items (bisection)."""
    if drop <= 0.0:
        return 0.0
    rng = np.random.default_rng(20240101)
    p = expit(1.6 + 2.8 * rng.standard_normal(1_000_000))
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if float(np.mean(np.minimum(p, mid))) < drop else (lo, mid)
    return (lo + hi) / 2.0


FIX_RATE = 0.05  # the "mixed" PR fixes this share of the base's failing rollouts


@functools.cache
def _discordance() -> float:
    """ψ = P(an item's two independent 0/1 draws differ) = 2·E[p(1 − p)] for the "noise" items."""
    rng = np.random.default_rng(20240101)
    p = expit(1.6 + 2.8 * rng.standard_normal(1_000_000))
    return float(np.mean(2.0 * p * (1.0 - p)))


def exact_false_fail(cell: Cell, alpha: float) -> float | None:
    """The A/A false-FAIL rate computed exactly, where it can be: 0/1 "noise" items without
    groups, whose (b, c) counts are trinomial (:func:`evalgate.stats.fail_crossing_probability`,
    an upper bound: it ignores stops for PASS). None for the other cells."""
    if cell.kind != "noise" or cell.k != 1 or cell.groups:
        return None
    looks = LOOKS if cell.sequential else 1
    return stats.fail_crossing_probability(cell.n, looks, alpha, _discordance())


def exact_false_pass(cell: Cell, margin: float, alpha: float) -> float | None:
    """The false-PASS rate at Δ = −δ computed exactly, where it can be: 0/1 items without
    groups, k = 1, whose (b, c) counts are trinomial: "noise" items (each arm drawn on its own;
    p_b = E[p(1 − p(1 − f))], p_c = E[(1 − p)·p(1 − f)]) and "breaks" items (p_c = 0, ψ = δ)
    (:func:`evalgate.stats.pass_crossing_probability`, an upper bound: it ignores stops for
    FAIL). None for the other cells."""
    if cell.kind not in ("noise", "breaks") or cell.k != 1 or cell.groups:
        return None
    looks = LOOKS if cell.sequential else 1
    if cell.kind == "breaks":
        psi = margin
    else:
        rng = np.random.default_rng(20240101)
        p = expit(1.6 + 2.8 * rng.standard_normal(1_000_000))
        kept = 1.0 - margin / _mean_pass(cell.kind)
        psi = float(np.mean(p * (1.0 - p * kept)) + np.mean((1.0 - p) * p * kept))
    return stats.pass_crossing_probability(cell.n, looks, alpha, margin, min(max(psi, margin), 1.0))


def exact_items_used(cell: Cell, drop: float, margin: float, alpha: float) -> float | None:
    """The expected share of items a sequential "breaks" k=1 cell uses at Δ = −drop, computed
    exactly: each item is broken (b) with probability drop and c = 0, so b after each look is
    binomial; the decision at each (look, b) is the gate's own (``design=(look, LOOKS)``).
    None for the other cells."""
    if cell.kind != "breaks" or cell.k != 1 or cell.groups or not cell.sequential:
        return None
    from scipy.stats import binom

    alive, seen, used = np.ones(1), 0, 0.0
    for look, size in enumerate(stats.look_sizes(cell.n, LOOKS), start=1):
        step = binom.pmf(np.arange(size - seen + 1), size - seen, drop)
        alive, seen = np.convolve(alive, step), size
        for b in np.nonzero(alive > 1e-12)[0]:
            base, head = np.ones(size), np.r_[np.zeros(b), np.ones(size - b)]
            mc = compare_metric("accuracy", base, head, clusters=None, margin=margin,
                                alpha=alpha, design=(look, LOOKS), with_mde=False)  # fmt: skip
            if mc.status != "INCONCLUSIVE":
                used += alive[b] * size / cell.n
                alive[b] = 0.0
    return used + float(alive.sum())


ADVERSARIAL = ("order", "gorder", "seedshop")
SHOPPED_SEEDS = 20


def _ids(n: int) -> list[str]:
    return [f"q{j:04d}" for j in range(n)]


@functools.cache
def _public_order(n: int, seed: int = 0) -> np.ndarray:
    """Item indices in the order anyone can compute: sha256(f"{seed}:{id}") (the legacy key)."""
    return np.array([int(i[1:]) for i in stats.item_order(_ids(n), seed)])


def _gate_order(n: int) -> np.ndarray:
    """Item indices in the order of a key the gate draws, as a run does (stats.OrderKey)."""
    return np.array([int(i[1:]) for i in stats.item_order(_ids(n), stats.OrderKey.draw())])


def draw(
    cell: Cell, rng: np.random.Generator, runs: int, drop: float
) -> tuple[np.ndarray, np.ndarray]:
    """(base, head) item scores, runs x n, with population Δ = −drop (by item index: the order
    a run reads them in is :func:`_decide`'s)."""
    n, k = cell.n, cell.k
    f = drop / _mean_pass(cell.kind)
    if cell.kind in ("order", "gorder"):  # the last items of the public order broken
        p = expit(1.6 + 2.8 * rng.standard_normal((runs, n)))
        if cell.kind == "order":
            base = (rng.random((runs, n, k)) < p[..., None]).mean(axis=2)
        else:
            pb = np.clip(p, 1e-9, 1 - 1e-9)
            base = rng.beta(8.0 * pb, 8.0 * (1.0 - pb))
        head = base.copy()
        broken = round(f * n)  # E[Δ] = −(broken / n)·E[p] = −drop
        if broken:
            head[:, _public_order(n)[n - broken :]] = 0.0
        return base, head
    if cell.groups:
        size = n // cell.groups
        theta = np.repeat(1.6 + 2.4 * rng.standard_normal((runs, cell.groups)), size, axis=1)
        theta = theta + 1.4 * rng.standard_normal((runs, n))
        shocks = [
            np.repeat(SHOCK * rng.standard_normal((runs, cell.groups)), size, axis=1)
            for _ in range(2)
        ]
        p_base, p_head = expit(theta + shocks[0]), expit(theta + shocks[1]) * (1.0 - f)
    else:
        p_base = expit(1.6 + 2.8 * rng.standard_normal((runs, n)))
        p_head = p_base * (1.0 - f)
    if cell.kind == "whole":  # the PR scores 0 on whole groups, π = f, else no change
        broken = np.repeat(rng.random((runs, cell.groups)) < f, n // cell.groups, axis=1)
        p_head = np.where(broken, 0.0, expit(theta + shocks[1]))
    if cell.kind == "gshift":  # every item's mean lowered by s (floored at 0)
        p_head = np.maximum(p_base - _uniform_shift(drop), 0.0)
    if cell.kind in ("graded", "gzero", "gshift", "seedshop"):  # Beta(8p, 8(1 − p)): mean p
        pb, ph = np.clip(p_base, 1e-9, 1 - 1e-9), np.clip(p_head, 1e-9, 1 - 1e-9)
        reward = rng.beta(8.0 * pb, 8.0 * (1.0 - pb))
        if cell.kind == "gzero":  # the PR replays the base's reward and zeroes some of them
            return reward, np.where(rng.random((runs, n)) >= f, reward, 0.0)
        return reward, rng.beta(8.0 * ph, 8.0 * (1.0 - ph))
    if cell.kind == "drift":  # in the order the run asks (index order): the second half worse
        rollouts = rng.random((runs, n, k)) < p_base[..., None]
        late = (np.arange(n) >= n // 2)[None, :, None]
        kept = rng.random((runs, n, k)) >= np.where(late, 2.0 * f, 0.0)
        return rollouts.mean(axis=2), (rollouts & kept).mean(axis=2)
    if cell.kind in ("breaks", "gbreaks"):  # the PR replays the base's rollouts, breaks passes
        rollouts = rng.random((runs, n, k)) < p_base[..., None]
        kept = rng.random((runs, n, k)) >= f
        return rollouts.mean(axis=2), (rollouts & kept).mean(axis=2)
    if cell.kind == "mixed":  # replays the base's rollouts, breaks some passes, fixes some fails
        mean = _mean_pass(cell.kind)
        breaks = (drop + FIX_RATE * (1.0 - mean)) / mean
        rollouts = rng.random((runs, n, k)) < p_base[..., None]
        u = rng.random((runs, n, k))
        return rollouts.mean(axis=2), np.where(rollouts, u >= breaks, u < FIX_RATE).mean(axis=2)
    return rng.binomial(k, p_base) / k, rng.binomial(k, p_head) / k


def _decide(
    cell: Cell,
    base: np.ndarray,
    head: np.ndarray,
    seed: int,
    *,
    margin: float,
    alpha: float,
    with_mde: bool,
    before: bool = False,
    order: np.ndarray | None = None,
) -> tuple[str, float, float, bool]:
    """(status, reported MDE, share of items used, regression detected) for one simulated PR.

    Adversarial kinds are read in the order of a key the gate draws (``before``: in the order
    the gate used before keys, which the PR could compute or choose; ``order``: this one).

    "Detected" is the FAIL test rejecting (upper bound < 0): what the MDE promises. When the
    MDE is below the margin the status at Δ = −MDE may rightly be PASS (Δ within the margin).
    """
    if cell.kind in ADVERSARIAL:  # read in the order of a key: the gate's, or that of before
        if before and cell.kind == "seedshop":  # the PR keeps the first seed whose looks PASS
            tried = [
                _decide(
                    cell,
                    base,
                    head,
                    seed,
                    margin=margin,
                    alpha=alpha,
                    with_mde=with_mde,
                    order=_public_order(cell.n, shop),
                )
                for shop in range(SHOPPED_SEEDS)
            ]
            return next((t for t in tried if t[0] == "PASS"), tried[0])
        if order is None:
            order = _public_order(cell.n) if before else _gate_order(cell.n)
        base, head = base[order], head[order]
    clusters = np.arange(cell.n) // (cell.n // cell.groups) if cell.groups else None
    common: dict[str, Any] = {
        "margin": margin,
        "alpha": alpha,
        "seed": seed,
        "n_resamples": SIM_RESAMPLES,
        "with_mde": with_mde,
    }
    # The items are in the run's order and `horizon` is the number planned, as compare_runs
    # passes them: graded PASS bounds are one betting process over the run (read at each look),
    # and with groups the PASS side over groups one process over the planned groups.
    common["horizon"] = cell.n
    if cell.groups:
        common["groups_total"], common["group_size"] = cell.groups, cell.n // cell.groups
    if not cell.sequential:
        mc = compare_metric("accuracy", base, head, clusters=clusters, **common)
        return mc.status, float(mc.mde or math.nan), 1.0, mc.result.hi < 0.0
    # The design's MDE: what a run that reaches the last look reports (the FAIL test's power
    # over every look, as one test on all n items at stats.design_level).
    mde = math.nan
    if with_mde:
        full = compare_metric("accuracy", base, head, clusters=clusters,
                              design=(LOOKS, LOOKS), **common)  # fmt: skip
        mde = float(full.mde or math.nan)
    common["with_mde"] = False
    # Items run in a seeded order (simulated items are exchangeable: a prefix is that order),
    # whole groups contiguous; the looks end at group ends (stats.look_sizes), as a run's do.
    plan = [cell.n // cell.groups] * cell.groups if cell.groups else None
    sizes = stats.look_sizes(cell.n, LOOKS, plan)
    for look, size in enumerate(sizes, start=1):
        if look < LOOKS and look > 1 and size == sizes[look - 2]:
            continue  # a group larger than a slice: this look sees nothing new
        mc = compare_metric(
            "accuracy",
            base[:size],
            head[:size],
            clusters=None if clusters is None else clusters[:size],
            design=(look, LOOKS),
            **common,
        )
        if mc.status != "INCONCLUSIVE" or look == LOOKS:
            return mc.status, mde, size / cell.n, mc.result.hi < 0.0
    raise AssertionError("unreachable")


def simulate(
    cell: Cell,
    *,
    runs: int,
    drop: float,
    seed: int,
    margin: float,
    alpha: float,
    with_mde: bool = True,
    before: bool = False,
) -> dict[str, np.ndarray]:
    """Statuses, reported MDEs (A/A runs only) and items used for ``runs`` PRs at Δ = −drop
    (``before``: adversarial kinds read in the order of before, :func:`_decide`)."""
    rng = np.random.default_rng(seed)
    base, head = draw(cell, rng, runs, drop)
    mde = with_mde and drop == 0.0
    out = [
        _decide(
            cell,
            base[r],
            head[r],
            seed + r,
            margin=margin,
            alpha=alpha,
            with_mde=mde,
            before=before,
        )
        for r in range(runs)
    ]
    status, mde, used, detected = zip(*out, strict=True)
    return {
        "status": np.array(status),
        "mde": np.array(mde),
        "used": np.array(used),
        "detected": np.array(detected),
    }


def _rate(values: np.ndarray) -> tuple[float, float]:
    rate = float(np.mean(values))
    return rate, math.sqrt(max(rate * (1.0 - rate), 1e-12) / values.size)


def _mark(ok: bool) -> str:
    utf = (sys.stdout.encoding or "").lower().replace("-", "").startswith("utf")
    return ("✓" if ok else "✗") if utf else ("ok" if ok else "NO")


def run_cell(cell: Cell, index: int, args: argparse.Namespace, mdes: dict[Cell, float]) -> str:
    """One printed row; fills ``mdes`` (fixed-sample MDEs) for the sequential cells that follow."""
    common = {"runs": args.runs, "margin": args.margin, "alpha": args.alpha}
    seed = args.seed + 10_000 * index
    aa = simulate(cell, drop=0.0, seed=seed, with_mde=not args.errors_only, **common)
    at_margin = simulate(cell, drop=args.margin, seed=seed + 1, **common)
    mde = float(np.nanmedian(aa["mde"])) if not args.errors_only else math.nan
    if not cell.sequential:
        mdes[cell] = mde
    false_fail = float(np.mean(aa["status"] == "FAIL"))
    false_pass = float(np.mean(at_margin["status"] == "PASS"))
    bound = args.alpha + 2.0 * math.sqrt(args.alpha * (1.0 - args.alpha) / args.runs)
    marks = [_mark(false_fail <= bound), _mark(false_pass <= bound)]
    row = (
        f"{cell.label:<27}{false_fail:>7.3f}{false_pass:>8.3f}{_mark(false_pass <= bound):>3}"
        f"{100 * mde:>8.2f}"
    )
    if args.before and cell.kind in ADVERSARIAL:  # the same draws, the order of before
        then = simulate(cell, drop=args.margin, seed=seed + 1, before=True, **common)
        row += f"  (order of before: PASS at Δ = −δ {float(np.mean(then['status'] == 'PASS')):.3f})"
    if args.errors_only:  # the error rates alone, each with its Monte-Carlo SE
        se_pass, se_fail = _rate(at_margin["status"] == "PASS")[1], _rate(aa["status"] == "FAIL")[1]
        return (
            f"{row}   PASS ± {se_pass:.3f}, A/A FAIL ± {se_fail:.3f}"
            f"   A/A FAIL {_mark(false_fail <= bound)}"
        )
    if not math.isfinite(mde) or mde >= 1.0:
        row += f"{'–':>8}{'':>3}"
    else:
        power_out = simulate(cell, drop=mde, seed=seed + 2, **common)
        power, se = _rate(power_out["detected"])
        marks.append(_mark(power >= 0.80 - 2.0 * se))
        row += f"{power:>8.3f}{marks[-1]:>3}"
    if cell.sequential and math.isfinite(mde) and 2.0 * mde < 1.0:
        fast = simulate(cell, drop=2.0 * mde, seed=seed + 3, **common)
        used = float(np.mean(fast["used"]))
        saved = 1.0 - float(np.mean(np.r_[aa["used"], at_margin["used"], fast["used"]]))
        row += f"{100 * used:>9.1f}%{_mark(used <= 0.65):>3}{100 * saved:>8.1f}%"
        exact_used = exact_items_used(cell, 2.0 * mde, args.margin, args.alpha)
        if exact_used is not None:  # no Monte-Carlo error
            row += f" (exact {100 * exact_used:.1f}% {_mark(exact_used <= 0.65)})"
        fixed = mdes.get(Cell(cell.kind, cell.n, cell.k, cell.groups))
        if fixed is not None:  # what the looks cost in MDE against one look at the end
            row += f" fixed-sample MDE {100 * fixed:.2f} pp"
    row = f"{row}   A/A FAIL {_mark(false_fail <= bound)}"
    exact = exact_false_fail(cell, args.alpha)
    if exact is not None:  # no Monte-Carlo error: ok when ≤ α itself
        row += f" (exact {exact:.4f} {_mark(exact <= args.alpha)})"
    exact_pass = exact_false_pass(cell, args.margin, args.alpha)
    if exact_pass is not None:
        row += f"   false PASS exact {exact_pass:.4f} {_mark(exact_pass <= args.alpha)}"
    return row


# --------------------------------------------------------------- errored PR rollouts (issue 35)
# The PR's errored rollouts drop out of the FAIL side and score 0 on the PASS side
# (evalgate.run.imputed), as compare_runs reads a run: each cell here is drawn at the rollout
# level (k rollouts an item, the "breaks" or "noise" kinds above), some PR rollouts error, and
# both readings are decided: "dropped" (errored rollouts left out on both sides, the gate before
# issue 35) and "imputed" (the gate now).
ERROR_CELLS = (
    ("selective", Cell("breaks", 200)),
    ("selective", Cell("breaks", 500)),
    ("selective", Cell("breaks", 200, k=4)),
    ("random 1%", Cell("breaks", 200)),
    ("random 2%", Cell("breaks", 200)),
    ("random 1%", Cell("breaks", 200, k=4)),
    ("random 2%", Cell("breaks", 200, k=4)),
    ("random 2%", Cell("noise", 200)),
)
ERROR_BUDGET = 0.05  # eval.max_error_rate's default: a run with more errors is an ERROR


def _rollouts(cell: Cell, rng: np.random.Generator, drop: float) -> tuple[np.ndarray, ...]:
    """(base, head) 0/1 rollouts, n x k, at population Δ = −drop ("breaks": the PR replays the
    base's rollouts and breaks passes; "noise": each arm draws its own)."""
    p = expit(1.6 + 2.8 * rng.standard_normal(cell.n))[:, None]
    f = drop / _mean_pass(cell.kind)
    base = rng.random((cell.n, cell.k)) < p
    if cell.kind == "breaks":
        return base, base & (rng.random((cell.n, cell.k)) >= f)
    return base, rng.random((cell.n, cell.k)) < p * (1.0 - f)


def _errors(pattern: str, base: np.ndarray, head: np.ndarray, rng: np.random.Generator) -> Any:
    """Which PR rollouts error: "selective" (the adversary: every rollout the PR broke errors,
    as many as the error budget allows, the PR's server returning 500 on exactly those), or
    "random e%" (an honest endpoint: each rollout errors with probability e)."""
    if pattern == "selective":
        broken = np.argwhere(base & ~head)
        budget = int(ERROR_BUDGET * head.size)
        chosen = broken[rng.permutation(len(broken))[:budget]]
        errored = np.zeros(head.shape, dtype=bool)
        errored[chosen[:, 0], chosen[:, 1]] = True
        return errored
    rate = float(pattern.split()[1].rstrip("%")) / 100.0
    return rng.random(head.shape) < rate


def decide_with_errors(
    base: np.ndarray, head: np.ndarray, errored: np.ndarray, *, margin: float, alpha: float
) -> tuple[str, str, float, float]:
    """(status dropped, status imputed, Δ̂ − L dropped, Δ̂ − L imputed) of one PR, read as
    compare_runs reads it (the observed test, its PASS side replaced by the worst-case one)."""
    from evalgate.run.imputed import worst_case_result

    k = head.shape[1]
    b = base.mean(axis=1)
    answered = (~errored).sum(axis=1)
    kept = answered > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        h = np.where(kept, (head & ~errored).sum(axis=1) / answered, np.nan)
    common: dict[str, Any] = {"clusters": None, "margin": margin, "alpha": alpha,
                              "n_resamples": SIM_RESAMPLES, "with_mde": False}  # fmt: skip
    observed = compare_metric("accuracy", b[kept], h[kept], horizon=int(kept.sum()), **common)
    worst_head = (head & ~errored).sum(axis=1) / k  # an errored rollout scores 0
    passing = compare_metric("accuracy", b, worst_head, horizon=b.size, scale=[0.0, 1.0], **common)
    assert observed.result is not None and passing.result is not None
    both = worst_case_result(observed.result, passing.result)
    return (
        observed.status,
        stats.verdict(both),
        observed.result.delta - observed.result.lo,
        observed.result.delta - both.lo,
    )


def run_error_cells(args: argparse.Namespace) -> None:
    print(
        f"\nErrored PR rollouts: {args.runs} runs a cell; 'dropped' leaves them out of both sides"
        " (before issue 35), 'imputed' scores them 0 on the PASS side (now)."
    )
    print(
        f"{'pattern':<11}{'cell':<22}{'Δ':>6}{'P(PASS) dropped':>17}{'imputed':>9}"
        f"{'Δ̂ − L dropped':>16}{'imputed':>9}{'errors':>8}"
    )
    for index, (pattern, cell) in enumerate(ERROR_CELLS):
        label = f"{pattern} {cell.label}"
        if args.only and not any(part in label for part in args.only.split(",")):
            continue
        t0 = time.perf_counter()
        drop = args.margin if pattern == "selective" else 0.0
        rng = np.random.default_rng(args.seed + 7_919 * index)
        rows = []
        for _ in range(args.runs):
            base, head = _rollouts(cell, rng, drop)
            errored = _errors(pattern, base, head, rng)
            decided = decide_with_errors(base, head, errored, margin=args.margin, alpha=args.alpha)
            rows.append((*decided, errored.mean()))
        dropped, imputed, w_dropped, w_imputed, rate = zip(*rows, strict=True)
        p_dropped = float(np.mean(np.array(dropped) == "PASS"))
        p_imputed = float(np.mean(np.array(imputed) == "PASS"))
        bound = args.alpha + 2.0 * math.sqrt(args.alpha * (1.0 - args.alpha) / args.runs)
        mark = f" {_mark(p_imputed <= bound)}" if drop > 0 else "  "
        print(
            f"{pattern:<11}{cell.label:<22}{0.0 - 100 * drop:>5.1f} "
            f"{p_dropped:>16.3f}{p_imputed:>9.3f}"
            f"{mark}{100 * float(np.mean(w_dropped)):>14.2f}{100 * float(np.mean(w_imputed)):>9.2f}"
            f"{100 * float(np.mean(rate)):>7.2f}%  ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    print(
        "P(PASS) at Δ = −δ (selective: the PR errors on the rollouts it broke, up to the 5 % error"
        " budget) is a false PASS, ok when ≤ α + 2 MC SE; at Δ = 0 (random) it is the power to"
        " PASS an honest PR. Δ̂ − L: the mean width of the PASS bound below the estimate, in pp."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="simulated PRs per cell")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--margin", type=float, default=0.03, help="non-inferiority margin δ")
    parser.add_argument("--alpha", type=float, default=0.05, help="one-sided level")
    parser.add_argument(
        "--only",
        default="",
        help="run only the cells whose label contains one of these (comma-separated)",
    )
    parser.add_argument(
        "--looks",
        type=int,
        default=4,
        help="looks of the sequential cells (the gate's default is 4; more looks would spend "
        "more on the PASS side if each look re-bet at its own level)",
    )
    parser.add_argument(
        "--fixed", action="store_true", help="only the fixed-sample cells (no sequential looks)"
    )
    parser.add_argument(
        "--errors-only",
        action="store_true",
        help="only A/A false FAIL and false PASS at Δ = −δ (no MDE, power or items used): the "
        "validity of many cells in modest time",
    )
    parser.add_argument(
        "--before",
        action="store_true",
        help="adversarial cells: also the false PASS they got when the order was public or the "
        "candidate's seed (the same draws)",
    )
    parser.add_argument(
        "--errored",
        action="store_true",
        help="only the errored-rollout cells: selective errors (false PASS) and honest random "
        "errors (the cost of scoring them 0 on the PASS side)",
    )
    args = parser.parse_args(argv)
    if args.errored:
        run_error_cells(args)
        return 0
    global LOOKS  # the sequential cells' design, set once per invocation
    LOOKS = args.looks
    started = time.perf_counter()
    bound = args.alpha + 2.0 * math.sqrt(args.alpha * (1.0 - args.alpha) / args.runs)
    print(
        f"evalgate gate calibration: {args.runs} runs a cell, one-sided α {args.alpha}, "
        f"margin δ {args.margin}, {SIM_RESAMPLES} sign-flip resamples, seed {args.seed}, "
        f"{LOOKS} looks in sequential cells; "
        f"error rates ok when ≤ α + 2 MC SE = {bound:.3f}; power ok when ≥ 0.80 − 2 MC SE\n"
    )
    print(
        f"{'cell':<27}{'A/A':>7}{'PASS at':>8}{'':>3}{'MDE':>8}{'power':>8}{'':>3}"
        f"{'items at':>10}{'':>3}{'calls':>9}"
    )
    print(
        f"{'':<27}{'FAIL':>7}{'Δ = −δ':>8}{'':>3}{'(pp)':>8}{'at MDE':>8}{'':>3}"
        f"{'2×MDE':>10}{'':>3}{'saved':>9}"
    )
    mdes: dict[Cell, float] = {}
    for index, cell in enumerate(CELLS):
        if args.only and not any(part in cell.label for part in args.only.split(",")):
            continue
        if args.fixed and cell.sequential:
            continue
        t0 = time.perf_counter()
        print(
            f"{run_cell(cell, index, args, mdes)}  ({time.perf_counter() - t0:.0f} s)", flush=True
        )
    print(
        "\nMDE: median over the A/A runs of the MDE the scorecard reports (stats.mde_for_test,"
        " assuming the PR only lowers scores, uniformly or proportionally); power = rate of"
        " upper bound < 0 (the FAIL test rejecting) at Δ = −MDE. 'calls saved': share of"
        " paired items never run, over the A/A, −δ and −2×MDE runs of the sequential cell."
        " 'exact': the A/A false-FAIL rate of 0/1 noise cells computed exactly over the"
        " trinomial (b, c) counts (stats.fail_crossing_probability; ok when ≤ α), the false-PASS"
        " rate of 0/1 k = 1 noise and breaks cells likewise (stats.pass_crossing_probability),"
        " and the items a sequential 0/1 breaks cell uses, over the binomial count of broken"
        " items."
    )
    print(f"total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

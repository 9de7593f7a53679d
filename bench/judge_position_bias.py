"""A pairwise judge's position bias against the gate (issue #35): false PASS at Δ = −δ, false FAIL
at Δ = 0, and what the rule costs an honest judge, by simulation.

Usage: ``nice -n 10 python bench/judge_position_bias.py [--runs 1000] [--zero-runs 1000] [--seed 0]
[--n 200 500] [--betas 0 0.2 0.5 0.8 1] [--families decisive ties]``

Each simulated PR run is n items, one judgement per order (k = 1). Per item the honest verdict
h ∈ {1, ½, 0} (the PR's completion better, tied, worse) is drawn with probabilities (w, t, l);
the PR's true Δ = E[h] − ½ = (w − l)/2. The judge, in each of the two orders independently,
answers "A" (the first response shown) with probability β and otherwise gives h. So per item:
base-first preference for the PR p₁ (0 when biased, else h), PR-first p₂ (1 when biased, else
h); the run's ``win_rate`` is (p₁ + p₂)/2, the pair's worse order min(p₁, p₂), consistent when
p₁ = p₂. The baseline scores ½ on every item by construction.

Every run goes through the gate's own code: :func:`evalgate.compare.paired.compare_metric` (the
paired test and its bounds, as ``evalgate compare`` runs it) and
:func:`evalgate.compare.position.guard` (the worse order for the PASS decision, the consistency
floor). "before" is the gate without the guard: the averages alone, as before issue #35.

Families: ``decisive`` (t = 0: the judge always prefers one), ``ties`` (t = 0.6). Cells: β in
{0, 0.2, 0.5, 0.8, 1.0}; at Δ = −δ (δ = 3 pp: false PASS, bound α = 0.05), at Δ = 0 (P(PASS),
the price of the rule, and false FAIL). ok marks a false PASS / FAIL rate within 2 Monte-Carlo
SE of α. The script prints figures only and asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from evalgate.compare.paired import compare_metric
from evalgate.compare.position import PairwiseSide, guard

DELTA, ALPHA = 0.03, 0.05
FAMILIES = {"decisive": 0.0, "ties": 0.6}
BETAS = (0.0, 0.2, 0.5, 0.8, 1.0)


def _probabilities(ties: float, delta: float) -> tuple[float, float, float]:
    """(w, t, l) with w + t + l = 1 and (w − l)/2 = delta."""
    rest = 1.0 - ties
    return rest / 2 + delta, ties, rest / 2 - delta


def _one_run(
    rng: np.random.Generator, n: int, probs: tuple[float, float, float], beta: float, seed: int
) -> tuple[str, str]:
    """(status with the guard, status before it) for one simulated PR run."""
    h = rng.choice(np.array([1.0, 0.5, 0.0]), size=n, p=probs)
    biased_1 = rng.random(n) < beta  # base shown first: "A" is the base's
    biased_2 = rng.random(n) < beta  # PR shown first: "A" is the PR's
    p1 = np.where(biased_1, 0.0, h)
    p2 = np.where(biased_2, 1.0, h)
    average, worse = (p1 + p2) / 2, np.minimum(p1, p2)
    base = np.full(n, 0.5)
    ids = [str(i) for i in range(n)]

    def test(values: np.ndarray, with_mde: bool = False) -> object:
        return compare_metric(
            "win_rate", base, values, clusters=None, margin=DELTA, alpha=ALPHA, seed=seed,
            n_resamples=2_000, with_mde=with_mde, scale=[0.0, 1.0],
        )  # fmt: skip

    before = test(average)
    side = PairwiseSide(dict(zip(ids, worse, strict=True)), int(np.sum(p1 == p2)), n)
    after = guard(before, ids, side, test)  # type: ignore[arg-type]
    return after.status, before.status  # type: ignore[attr-defined]


def _mark(rate: float, runs: int) -> str:
    se = math.sqrt(ALPHA * (1 - ALPHA) / runs)
    return "ok" if rate <= ALPHA + 2 * se else "HIGH"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n", type=int, nargs="+", default=[200, 500])
    parser.add_argument("--zero-runs", type=int, default=None, help="runs at Δ = 0")
    parser.add_argument("--betas", type=float, nargs="+", default=list(BETAS))
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    args = parser.parse_args()
    print(
        f"runs/cell {args.runs} (Δ = 0: {args.zero_runs or args.runs}), δ = {DELTA}, "
        f"α = {ALPHA}; P(status) with the guard "
        "(before: averages only)"
    )
    print("family    n    β    | Δ = −δ: false PASS (before)  | Δ = 0: PASS (before), false FAIL")
    for family in args.families:
        ties = FAMILIES[family]
        for n in args.n:
            for beta in args.betas:
                t0 = time.perf_counter()
                rng = np.random.default_rng([args.seed, n, int(beta * 100), int(ties * 100)])
                cells = {}
                zero_runs = args.zero_runs or args.runs
                for name, delta, runs in (("null", -DELTA, args.runs), ("zero", 0.0, zero_runs)):
                    probs = _probabilities(ties, delta)
                    got = [_one_run(rng, n, probs, beta, r) for r in range(runs)]
                    cells[name] = {
                        "pass": sum(a == "PASS" for a, _ in got) / runs,
                        "pass_before": sum(b == "PASS" for _, b in got) / runs,
                        "fail": sum(a == "FAIL" for a, _ in got) / runs,
                        "runs": runs,
                    }
                null, zero = cells["null"], cells["zero"]
                print(
                    f"{family:9} {n:4} {beta:4.2f} | {null['pass']:.3f} "
                    f"{_mark(null['pass'], args.runs):4} ({null['pass_before']:.3f})"
                    f"         | {zero['pass']:.3f} ({zero['pass_before']:.3f}), "
                    f"{zero['fail']:.3f} {_mark(zero['fail'], zero['runs'])}"
                    f"   [{time.perf_counter() - t0:.0f} s]",
                    flush=True,
                )


if __name__ == "__main__":
    main()

"""Calibrate the evalgate gate by simulation: A/A false-FAIL rate, power at the MDE, sequential use.

Usage: ``python bench/gate_calibration.py [--runs 1000] [--n 200] [--seed 0]``

Every scenario simulates *paired* items: a latent per-item difficulty is shared by the base and
the PR arm, so discordance is realistic (per-question scores of two models correlate; Miller
2024, arXiv 2411.00640). A true effect is a shift of the PR arm's logit, solved so that the
population mean difference equals the target Δ exactly.

Scenarios (n items each, default 200):
  binary k=1     θ_i ~ N(1.6, 2.8²); each arm scores Bernoulli(expit θ_i)  → exact McNemar
  binary k=4     same items, 4 rollouts per arm: Binomial(4, expit θ_i)/4    → sign-flip
  graded (Beta)  m_i ~ Beta(3.5, 1.5); each arm scores Beta(6 m_i, 6 (1 − m_i)) → sign-flip
  clustered      groups of 5: θ_g ~ N(1.6, 2.4²), θ_i = θ_g + N(0, 1.4²), plus a per-run,
                 per-group shock N(0, SHOCK²) in each arm (e.g. one retrieved passage or
                 few-shot draw reused by the group's items)          → cluster sign-flip
  The clustered data is also analysed *ignoring* the groups, for contrast (it inflates the
  false-FAIL rate: the items of a group are not independent evidence).

The MDE is the one the scorecard reports, ``stats.mde_for_test`` (the effect the gate's own FAIL
test detects with 80 % power), taken as its median over the A/A runs; section (b) checks that
power at that effect is ≥ 80 % and prints the normal-theory ``stats.mde_paired`` beside it, with
the ratio between the two, for reference.

Permutation tests inside the simulation use 2,000 sign-flip resamples (the gate's default is
10,000) to keep the run short; that adds a little Monte-Carlo noise to each p, not bias. The
script prints figures only and makes no timing assertions.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import optimize
from scipy.special import expit, logit

try:
    from evalgate import stats
except ImportError:  # run as `python bench/gate_calibration.py` from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from evalgate import stats
__all__ = ["SCENARIOS", "Scenario", "main", "simulate"]

SIM_RESAMPLES = 2_000
LOOKS = 4
GROUP = 5
SHOCK = 1.0  # SD (logit scale) of the per-run, per-group shock in the clustered scenario


@dataclass(frozen=True)
class Scenario:
    """A paired data generator: draw(rng, runs, n, shift) -> (base, head), each runs x n."""

    name: str
    draw: Callable[[np.random.Generator, int, int, float], tuple[np.ndarray, np.ndarray]]
    mean_delta: Callable[[float], float]  # population Δ for a given logit shift of the PR arm
    clustered: bool = False  # analyse with groups of GROUP consecutive items
    use_clusters: bool = True  # False: the contrast row that ignores the groups


@functools.cache
def _population(kind: str) -> np.ndarray:
    """A large fixed sample of the latent variable, for the population Δ(shift)."""
    rng = np.random.default_rng(20240101)
    size = 400_000
    if kind == "binary":
        return 1.6 + 2.8 * rng.standard_normal(size)
    if kind == "graded":
        return rng.beta(3.5, 1.5, size)
    # clustered: group + item + per-run group shock (the shock is mean-zero in both arms)
    return 1.6 + np.sqrt(2.4**2 + 1.4**2 + SHOCK**2) * rng.standard_normal(size)


def _binary_draw(k: int) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    def draw(rng: np.random.Generator, runs: int, n: int, shift: float):
        theta = 1.6 + 2.8 * rng.standard_normal((runs, n))
        base = rng.binomial(k, expit(theta)) / k
        head = rng.binomial(k, expit(theta + shift)) / k
        return base, head

    return draw


def _graded_draw(rng: np.random.Generator, runs: int, n: int, shift: float):
    m = rng.beta(3.5, 1.5, (runs, n))
    m_head = expit(logit(m) + shift)
    kappa = 6.0
    return rng.beta(kappa * m, kappa * (1 - m)), rng.beta(kappa * m_head, kappa * (1 - m_head))


def _clustered_draw(rng: np.random.Generator, runs: int, n: int, shift: float):
    groups = math.ceil(n / GROUP)
    theta_g = np.repeat(1.6 + 2.4 * rng.standard_normal((runs, groups)), GROUP, axis=1)[:, :n]
    theta = theta_g + 1.4 * rng.standard_normal((runs, n))

    def shock() -> np.ndarray:
        return np.repeat(SHOCK * rng.standard_normal((runs, groups)), GROUP, axis=1)[:, :n]

    base = rng.binomial(1, expit(theta + shock())).astype(float)
    head = rng.binomial(1, expit(theta + shock() + shift)).astype(float)
    return base, head


def _delta_binary(shift: float) -> float:
    theta = _population("binary")
    return float(np.mean(expit(theta + shift) - expit(theta)))


def _delta_graded(shift: float) -> float:
    m = _population("graded")
    return float(np.mean(expit(logit(m) + shift) - m))


def _delta_clustered(shift: float) -> float:
    theta = _population("clustered")
    return float(np.mean(expit(theta + shift) - expit(theta)))


SCENARIOS = (
    Scenario("binary k=1", _binary_draw(1), _delta_binary),
    Scenario("binary k=4", _binary_draw(4), _delta_binary),
    Scenario("graded (Beta)", _graded_draw, _delta_graded),
    Scenario("clustered (groups of 5)", _clustered_draw, _delta_clustered, clustered=True),
    Scenario(
        "  same, groups ignored",
        _clustered_draw,
        _delta_clustered,
        clustered=True,
        use_clusters=False,
    ),
)


def shift_for(scenario: Scenario, delta: float) -> float:
    """Logit shift of the PR arm that makes the population mean difference equal ``delta``."""
    if delta == 0.0:
        return 0.0
    return float(optimize.brentq(lambda s: scenario.mean_delta(s) - delta, -8.0, 8.0))


def _clusters(scenario: Scenario, n: int) -> np.ndarray | None:
    return np.arange(n) // GROUP if scenario.clustered and scenario.use_clusters else None


def simulate(
    scenario: Scenario, *, runs: int, n: int, delta: float, margin: float, alpha: float, seed: int
) -> dict[str, np.ndarray]:
    """Fixed-sample gate on ``runs`` simulated PRs: verdicts and the MDE each run would report.

    ``mde`` is the scorecard's (stats.mde_for_test); ``mde_formula`` the normal-theory
    stats.mde_paired, for comparison.
    """
    rng = np.random.default_rng(seed)
    base, head = scenario.draw(rng, runs, n, shift_for(scenario, delta))
    clusters = _clusters(scenario, n)
    verdicts = np.empty(runs, dtype=object)
    mdes = np.empty(runs)
    formula = np.empty(runs)
    for r in range(runs):
        res = stats.paired_compare(
            base[r],
            head[r],
            clusters=clusters,
            margin=margin,
            alpha=alpha,
            n_resamples=SIM_RESAMPLES,
            seed=seed + r,
        )
        verdicts[r] = stats.verdict(res)
        mdes[r] = stats.mde_for_test(base[r], head[r], alpha=alpha, clusters=clusters)
        formula[r] = stats.mde_paired(base[r], head[r], alpha=alpha, clusters=clusters)
    return {"verdict": verdicts, "mde": mdes, "mde_formula": formula}


def simulate_sequential(
    scenario: Scenario, *, runs: int, n: int, delta: float, margin: float, alpha: float, seed: int
) -> dict[str, np.ndarray]:
    """Group-sequential gate (LOOKS looks, O'Brien-Fleming, curtailment for binary data).

    Simulated items are exchangeable, so a prefix of the items is the seeded shuffle the gate
    would use; look sizes are multiples of the group size, so groups are never split.
    """
    rng = np.random.default_rng(seed)
    base, head = scenario.draw(rng, runs, n, shift_for(scenario, delta))
    clusters = _clusters(scenario, n)
    bounds = stats.obrien_fleming_bounds(LOOKS, alpha)
    sizes = stats.look_sizes(n, LOOKS)
    verdicts = np.empty(runs, dtype=object)
    used = np.empty(runs)
    for r in range(runs):
        for look, size in enumerate(sizes, start=1):
            decision = stats.sequential_decision(
                base[r, :size],
                head[r, :size],
                look=look,
                looks=LOOKS,
                margin=margin,
                alpha=alpha,
                n_total=n,
                clusters=None if clusters is None else clusters[:size],
                bounds=bounds,
                n_resamples=SIM_RESAMPLES,
                seed=seed + r,
            )
            if decision is not None:
                verdicts[r], used[r] = decision, size / n
                break
    return {"verdict": verdicts, "used": used}


def _rate(verdicts: np.ndarray, label: str) -> tuple[float, float]:
    rate = float(np.mean(verdicts == label))
    return rate, math.sqrt(rate * (1.0 - rate) / verdicts.size)


def _mark(ok: bool) -> str:
    utf = (sys.stdout.encoding or "").lower().replace("-", "").startswith("utf")
    return ("✓" if ok else "✗") if utf else ("ok" if ok else "NO")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="simulated PRs per cell")
    parser.add_argument("--n", type=int, default=200, help="items per run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--margin", type=float, default=0.03, help="non-inferiority margin")
    parser.add_argument("--alpha", type=float, default=0.05, help="one-sided level")
    args = parser.parse_args(argv)
    runs, n, alpha, margin = args.runs, args.n, args.alpha, args.margin
    started = time.perf_counter()
    null_se = math.sqrt(alpha * (1 - alpha) / runs)
    common = {"runs": runs, "n": n, "margin": margin, "alpha": alpha}
    print(
        f"evalgate gate calibration: {runs} runs x {n} items, one-sided alpha {alpha}, "
        f"margin {margin}, {SIM_RESAMPLES} sign-flip resamples per test, seed {args.seed}\n"
    )

    print(f"(a) A/A false-FAIL rate (ok: ≤ α + 2 MC SE at α, i.e. ≤ {alpha + 2 * null_se:.3f})")
    print(f"{'scenario':<26}{'method':<32}{'FAIL':>7}{'MC SE':>8}{'PASS':>7}  ok")
    typical: dict[str, float] = {}
    formula: dict[str, float] = {}
    for i, sc in enumerate(SCENARIOS):
        out = simulate(sc, delta=0.0, seed=args.seed + 1000 * i, **common)
        fail, se = _rate(out["verdict"], "FAIL")
        passed, _ = _rate(out["verdict"], "PASS")
        typical[sc.name] = float(np.median(out["mde"]))
        formula[sc.name] = float(np.median(out["mde_formula"]))
        mark = _mark(fail <= alpha + 2 * null_se) if sc.use_clusters else "(contrast)"
        print(f"{sc.name:<26}{_method_name(sc, n):<32}{fail:>7.3f}{se:>8.3f}{passed:>7.3f}  {mark}")

    print(
        "\n(b) power (FAIL rate) at true Δ = −MDE; MDE = median mde_for_test over the A/A runs "
        "(the scorecard's MDE)"
    )
    print("    formula = median mde_paired, (z_α + z_β)·SE, for reference; ratio = MDE / formula")
    print("    (ok: ≥ 0.80 within 2 MC SE)")
    print(
        f"{'scenario':<26}{'formula (pp)':>13}{'MDE (pp)':>9}{'ratio':>7}{'power':>8}"
        f"{'MC SE':>8}  ok"
    )
    for i, sc in enumerate(SCENARIOS[:4]):
        out = simulate(sc, delta=-typical[sc.name], seed=args.seed + 1000 * i + 100, **common)
        power, se = _rate(out["verdict"], "FAIL")
        print(
            f"{sc.name:<26}{100 * formula[sc.name]:>13.2f}{100 * typical[sc.name]:>9.2f}"
            f"{typical[sc.name] / formula[sc.name]:>7.3f}{power:>8.3f}{se:>8.3f}  "
            f"{_mark(power >= 0.80 - 2 * se)}"
        )

    bounds = stats.obrien_fleming_bounds(LOOKS, alpha)
    print(
        f"\n(c) sequential: {LOOKS} looks at {stats.look_sizes(n, LOOKS)} items, O'Brien-Fleming "
        f"z ≥ {', '.join(f'{b:.2f}' for b in bounds)}; final look at α_K = "
        f"{1 - _norm_cdf(bounds[-1]):.4f}; curtailment for binary k=1"
    )
    print(f"{'scenario':<26}{'true Δ':>8}{'items used':>11}{'FAIL':>7}{'PASS':>7}{'MC SE':>8}  ok")
    for i, sc in enumerate(SCENARIOS[:4]):
        for effect in (0, 1, 2):
            out = simulate_sequential(
                sc,
                delta=-effect * typical[sc.name],
                seed=args.seed + 1000 * i + 200 + effect,
                **common,
            )
            fail, se = _rate(out["verdict"], "FAIL")
            passed, _ = _rate(out["verdict"], "PASS")
            frac = float(np.mean(out["used"]))
            marks = {0: _mark(fail <= alpha + 2 * null_se), 1: "", 2: _mark(frac <= 0.65)}
            label = "0 (A/A)" if effect == 0 else f"-{effect} MDE"
            print(
                f"{sc.name if effect == 0 else '':<26}{label:>8}{frac:>10.1%}{fail:>8.3f}"
                f"{passed:>7.3f}{se:>8.3f}  {marks[effect]}"
            )
    print("    ok: A/A rows: false-FAIL ≤ α within 2 MC SE; −2 MDE rows: items used ≤ 65 %.")
    print("    −1 MDE rows are for reference (FAIL column = power).")

    print("\n(d) non-inferiority error: false-PASS rate at true Δ = −margin (binary k=1)")
    sc = SCENARIOS[0]
    fixed = simulate(sc, delta=-margin, seed=args.seed + 7000, **common)
    seq = simulate_sequential(sc, delta=-margin, seed=args.seed + 7001, **common)
    print(f"{'':<26}{'PASS':>7}{'MC SE':>8}  ok")
    for label, out in (("fixed-sample", fixed), ("sequential", seq)):
        rate, se = _rate(out["verdict"], "PASS")
        print(f"{label:<26}{rate:>7.3f}{se:>8.3f}  {_mark(rate <= alpha + 2 * null_se)}")
    print(f"\ntotal {time.perf_counter() - started:.1f} s")
    return 0


def _method_name(scenario: Scenario, n: int) -> str:
    base, head = scenario.draw(np.random.default_rng(0), 1, n, 0.0)
    return stats.paired_compare(
        base[0], head[0], clusters=_clusters(scenario, n), n_resamples=10
    ).method


def _norm_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


if __name__ == "__main__":
    raise SystemExit(main())

"""The price of honesty for fractional and graded scores: how much wider the PASS bound (the
betting lower bound, valid for any bounded data) is than a paired t bound on the same data.

    nice -n 10 python bench/pass_bound_width.py [--runs 200] [--variants | --others]
    nice -n 10 python bench/pass_bound_width.py --pass-rate | --fit-boldness | --fit-shape

Per cell, ``runs`` simulated PR-vs-base pairs with no change (Δ = 0): items with latent pass
rate p ~ Beta(2, 1) scored over k = 4 rollouts in each arm, or graded rewards drawn
Beta(2p, 2(1 − p)) in each arm ("graded"), or k = 4 where the PR replays the base's scores on
90 % of the items ("k=4 90%": differences mostly 0, the zero-inflated case). Printed: the
median ratio (Δ̂ − L_betting) / (Δ̂ − L_t) at n = 50 / 200 / 500, L_t = Δ̂ − t_{n−1, 1−α}·SE
(one-sided α = .05), and the items the betting bound needs for the same width, ≈ ratio². The
t bound is the reference only: it is not valid for a PR that breaks a few items (skewed
differences).

Four lines always: ``gate`` is a fixed design's bound (``fixed_n``: bets that track the capital
towards 1/α at n, cap 0.99/m, see evalgate/stats/_betting.py), ``keyed`` the same bound as
``evalgate compare`` reads a fixed run: the items in the order of a key the gate draws
(``stats.OrderKey``), through ``paired_compare`` with its coherent bound (L ≤ Δ̂), ``shaped``
the fixed design's bound before it (the plug-in bets times a schedule s(i/n) fixed in
advance, fitted in the normal limit, cap 0.9/m: :data:`SHAPE`), and ``flat`` the flat bets of a
sequential run's one process (cap 0.75/m), on the same data. ``--pass-rate`` prints, for three
of them (not ``keyed``), how often a PR with
Δ = 0 PASSes against δ = 3 pp (1,000 runs a cell, n = 100 / 200 / 500 / 1,000): what the
narrower bound buys at the gate. ``--fit-boldness`` redoes the fit of the tracking bets' factor
(``_BOLDNESS``) on data of another family (k = 2 rollouts with p ~ Beta(3, 2), graded
Beta(5p, 5(1 − p)); n = 50 / 200 / 500, 300 runs a cell) through the gate's own
``betting_lower``, and prints the mean median width for each factor tried. ``--oracle``
prints the floor of any betting test on the k = 4 and "k=4 90%" data: the median width of the
best strategy (bets any function of the capital and of t, cap 0.99/m) when the data's law is
known, by dynamic programming over (t, log K). ``--fit-shape``
redoes the fit of ``shaped``'s knots in the normal limit (Brownian motion with known σ, 3,000
paths of 200 steps, Nelder–Mead from the flat bets) and prints them with the limit's median
width in t widths.

``--variants`` also prints other valid bounds from the flat bets' family on the same data, the
survey behind the gate's choice (docs/gate.md, "The price of honesty"): the capital at n only
(Markov instead of Ville: what the running maximum buys), bets scaled ×1.25 and ×0.8 (is the
fixed-n tuning of λ optimal?), and the mean of B = 20 stopped capitals over 20 betting orders
(each an e-value by optional stopping; their mean is one too) with the stop at 2/α.
Outside betting, on the same data (``--others``, or ``--variants`` for all; figures in
docs/gate.md):

* ``orderstat``: the order-statistic bound whose validity Anderson (1969) and Phan, Thomas &
  Learned-Miller (2021) prove: with X_(i) = G(U_(i)) (G the quantile function, U uniform), the
  mean is at least the induced mean Σ X_(i)·(U_(i+1) − U_(i)) (lo below X_(1)); this is
  nonincreasing in each U_(i), so it is at least x_(n) − Σ b_i·(x_(i) − x_(i−1)) whenever
  U_(i) ≤ b_i for all i, an event of probability 1 − α for a fixed band b. The band here has
  the same level at every i (b_i the Beta(i, n − i + 1) quantile at 1 − α', α' set by 20,000
  uniform samples so the band holds with 1 − α; Berk–Jones-like), the best band we tried;
* ``anderson``: the same with Anderson's band b_i = i/n + √(log(1/α)/(2n)) (DKW–Massart);
* ``bernstein``: Maurer & Pontil's (2009, Thm 4) empirical Bernstein bound;
* ``bentkus``: Bentkus's (2004) bound inf_h E(T_n − h)₊/(x − h) for sums of variables bounded
  above with a variance bound (T_n: n two-point variables), the variance bounded by a betting
  upper bound at α/5 on the halved squared differences of disjoint pairs, the rest of α for the
  mean (a union bound), inverted over the mean (b = hi − m for each candidate m);
* ``bentkus-known-var``: the same with the sample variance taken as known: NOT valid, the floor
  of any Bentkus bound with a variance bound.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats as sps

try:
    from evalgate import stats
    from evalgate.stats._betting import _MAX_BET, _bets, _log_capital, betting_lower
except ImportError:  # run as `python bench/pass_bound_width.py` from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from evalgate import stats
    from evalgate.stats._betting import _MAX_BET, _bets, _log_capital, betting_lower

ALPHA = 0.05
# ``shaped``: the fixed design's schedule before the tracking bets, s(u) at u = 0, 1/7, ..., 1
# (``--fit-shape``), and its cap.
SHAPE = (0.42, 0.82, 0.92, 0.99, 1.01, 1.09, 1.42, 3.28)
SHAPED_CAP = 0.9


KINDS = ("k=4", "graded", "k=4 90%")


def draw(kind: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    p = rng.beta(2.0, 1.0, n)
    if kind == "k=4":
        return rng.binomial(4, p) / 4, rng.binomial(4, p) / 4
    if kind == "k=4 90%":  # the PR replays the base's scores on 90 % of the items
        base, head = rng.binomial(4, p) / 4, rng.binomial(4, p) / 4
        return base, np.where(rng.random(n) < 0.9, base, head)
    a, b = 2.0 * p + 1e-3, 2.0 * (1.0 - p) + 1e-3
    return rng.beta(a, b), rng.beta(a, b)


def _shaped_lower(d: np.ndarray, seed: int) -> float:
    """Lower bound on the mean of d ∈ [−1, 1] with ``shaped`` bets (:data:`SHAPE`), in the
    random order :func:`betting_lower` uses without a horizon."""
    x = (d[np.random.default_rng(seed).permutation(d.size)] + 1.0) / 2.0
    u = np.arange(1, x.size + 1, dtype=float) / x.size
    bets = _bets(x, ALPHA) * np.interp(u, np.linspace(0.0, 1.0, len(SHAPE)), SHAPE)
    rejected, accepted = 0.0, float(x.mean())
    if _log_capital(x, bets, accepted, SHAPED_CAP) >= math.log(1.0 / ALPHA):
        return 2.0 * accepted - 1.0
    while accepted - rejected > 1e-5:
        mid = (rejected + accepted) / 2.0
        hit = _log_capital(x, bets, mid, SHAPED_CAP) >= math.log(1.0 / ALPHA)
        rejected, accepted = (mid, accepted) if hit else (rejected, mid)
    return 2.0 * rejected - 1.0


def _variant_lower(d: np.ndarray, seed: int, variant: str) -> float:
    """Lower bound on the mean of d ∈ [−1, 1] by a variant of the gate's betting test."""
    rng = np.random.default_rng(seed)
    orders = 20 if variant == "avg20" else 1
    xs = np.stack([(d[rng.permutation(d.size)] + 1.0) / 2.0 for _ in range(orders)])
    scale = {"x1.25": 1.25, "x0.8": 0.8}.get(variant, 1.0)
    bets = np.stack([scale * _bets(x, ALPHA) for x in xs])

    def reject(m: float) -> bool:
        capped = np.minimum(bets, _MAX_BET / max(m, 1e-12))
        log_k = np.cumsum(np.log1p(capped * (xs - m)), axis=1)
        if variant == "markov":
            return bool(log_k[0, -1] >= math.log(1.0 / ALPHA))
        if variant == "avg20":  # stop each order at 2/α (or n); the mean is an e-value
            hit = log_k >= math.log(2.0 / ALPHA)
            stop = np.where(hit.any(axis=1), hit.argmax(axis=1), d.size - 1)
            return bool(np.mean(np.exp(log_k[np.arange(orders), stop])) >= 1.0 / ALPHA)
        return bool(log_k.max() >= math.log(1.0 / ALPHA))

    rejected, accepted = 0.0, float(xs[0].mean())
    while accepted - rejected > 1e-5:
        mid = (rejected + accepted) / 2.0
        rejected, accepted = (mid, accepted) if reject(mid) else (rejected, mid)
    return 2.0 * rejected - 1.0


@functools.cache
def _band(n: int, kind: str) -> np.ndarray:
    """b with P(U_(i) ≤ b_i for all i) ≥ 1 − α for n uniform order statistics (``orderstat``)."""
    i = np.arange(1, n + 1)
    if kind == "anderson":  # DKW with Massart's constant, one-sided
        return np.minimum(1.0, i / n + math.sqrt(math.log(1.0 / ALPHA) / (2.0 * n)))
    rng, runs = np.random.default_rng(1), 20_000
    lowest = np.concatenate(
        [
            sps.beta.sf(np.sort(rng.random((1000, n)), axis=1), i, n - i + 1).min(axis=1)
            for _ in range(runs // 1000)
        ]
    )
    # The α-quantile of the smallest local tail, less 2 Monte-Carlo SEs (conservative).
    level = float(np.quantile(lowest, ALPHA - 2.0 * math.sqrt(ALPHA * (1.0 - ALPHA) / runs)))
    return np.asarray(sps.beta.isf(level, i, n - i + 1))


def _bentkus_half(n: int, var: float, top: float, alpha: float) -> float:
    """Smallest t with inf_h E(T_n − h)₊ / (n·t − h) ≤ alpha (Bentkus 2004, Thm 1.1): T_n is
    the sum of n two-point variables (top w.p. var/(var + top²), else −var/top), the extreme
    sum of n independent mean-0 variables ≤ top with variance ≤ var."""
    k = np.arange(n + 1)
    pmf = sps.binom.pmf(k, n, var / (var + top * top))
    values = k * (top + var / top) - n * var / top
    mass = np.cumsum(pmf[::-1])[::-1]  # P(T ≥ values[j])
    first = np.cumsum((pmf * values)[::-1])[::-1]  # E[T; T ≥ values[j]]
    excess = first - values * mass  # E(T − h)₊ at h = values[j]

    def tail(x: float) -> float:  # the infimum over h is at an atom of T below x
        below = values < x
        return float(np.min(excess[below] / (x - values[below]))) if below.any() else 0.0

    rejected, accepted = 0.0, float(n * top)
    while accepted - rejected > 1e-6 * n:
        mid = (rejected + accepted) / 2.0
        rejected, accepted = (mid, accepted) if tail(mid) > alpha else (rejected, mid)
    return accepted / n


def _other_lower(d: np.ndarray, seed: int, variant: str) -> float:
    """Lower bound on the mean of d ∈ [−1, 1] by a method outside betting (the docstring)."""
    x = (d + 1.0) / 2.0  # on [0, 1]
    n = x.size
    if variant in ("orderstat", "anderson"):
        xs = np.sort(x)
        return 2.0 * float(xs[-1] - np.sum(_band(n, variant) * np.diff(np.r_[0.0, xs]))) - 1.0
    if variant == "bernstein":
        log_term = math.log(2.0 / ALPHA)
        half = math.sqrt(2.0 * float(x.var(ddof=1)) * log_term / n)
        return 2.0 * (float(x.mean()) - half - 7.0 * log_term / (3.0 * (n - 1))) - 1.0
    if variant == "bentkus-known-var":
        var, level = float(x.var()), ALPHA
    else:  # a valid variance bound at α/5 from disjoint pairs, (x_2j − x_2j−1)²/2 ∈ [0, 1/2]
        pairs = x[np.random.default_rng(seed).permutation(n)][: n - n % 2].reshape(-1, 2)
        half_sq = (pairs[:, 0] - pairs[:, 1]) ** 2 / 2.0
        low, _ = betting_lower(-half_sq, -0.5, 0.0, -0.5, ALPHA / 5.0, seed)
        var, level = -low, ALPHA * 4.0 / 5.0
    mean = float(x.mean())

    def rejected(m: float) -> bool:  # H0: E x = m, so x − m ≤ 1 − m and Var ≤ min(var, m(1 − m))
        v = max(min(var, m * (1.0 - m)), 1e-12)
        return mean - m >= _bentkus_half(n, v, 1.0 - m, level)

    low_m, high_m = 0.0, mean
    while high_m - low_m > 1e-5:
        mid = (low_m + high_m) / 2.0
        low_m, high_m = (mid, high_m) if rejected(mid) else (low_m, mid)
    return 2.0 * low_m - 1.0


OTHERS = ("orderstat", "anderson", "bernstein", "bentkus", "bentkus-known-var")


def ratio(base: np.ndarray, head: np.ndarray, seed: int, variant: str = "gate") -> float:
    d = head - base
    n = d.size
    t_half = float(sps.t.ppf(1.0 - ALPHA, n - 1)) * float(d.std(ddof=1)) / math.sqrt(n)
    if variant in ("gate", "flat"):
        lo, _ = betting_lower(d, -1.0, 1.0, -0.03, ALPHA, seed, fixed_n=variant == "gate")
    elif variant == "keyed":  # the gate's own path: a drawn key's order, the coherent bound
        ids = [f"q{i:04d}" for i in range(n)]
        at = [int(i[1:]) for i in stats.item_order(ids, stats.OrderKey.draw())]
        lo = stats.paired_compare(
            base[at], head[at], stats.Design(alpha=ALPHA, margin=0.03, horizon=n, n_resamples=100)
        ).lo
    elif variant == "shaped":
        lo = _shaped_lower(d, seed)
    elif variant in OTHERS:
        lo = _other_lower(d, seed, variant)
    else:
        lo = _variant_lower(d, seed, variant)
    return (float(d.mean()) - lo) / t_half if t_half > 0.0 else math.nan  # all d equal


def fit_shape(knots: int = 8, steps: int = 200, paths: int = 3000) -> None:
    """Fit the fixed design's bet schedule in the normal limit and print it (``--fit-shape``).

    X(u) = δ·u + W(u) on u ∈ [0, 1] (σ = 1, time in units of n); bets λ(u) = s(u)·√(2 log(1/α))
    with s piecewise linear on ``knots`` knots; the bound rejects a mean δ below the truth when
    max_u ∫λ dX − ½∫λ² du ≥ log(1/α). Minimised: the δ at which half the paths reject (the
    median width), in units of z_α (the t width in the limit)."""
    from scipy.optimize import minimize

    level = math.log(1.0 / ALPHA)
    rng = np.random.default_rng(5)
    noise = rng.standard_normal((paths, steps)) / math.sqrt(steps)
    u = np.arange(1, steps + 1) / steps
    flat = math.sqrt(2.0 * level)

    def median_delta(shape: np.ndarray) -> float:
        bets = flat * np.interp(u, np.linspace(0.0, 1.0, shape.size), np.abs(shape))
        gain, drift, cost = (
            np.cumsum(noise * bets, axis=1),
            np.cumsum(bets) / steps,
            np.cumsum(bets**2) / (2 * steps),
        )
        lo, hi = 0.0, 6.0
        for _ in range(40):
            mid = (lo + hi) / 2.0
            share = float(np.mean(np.max(gain + mid * drift - cost, axis=1) >= level))
            lo, hi = (mid, hi) if share < 0.5 else (lo, mid)
        return hi / float(sps.norm.ppf(1.0 - ALPHA))

    start = np.r_[0.4, 0.8, 1.0, 1.0, 1.0, 1.1, 1.5, 3.0][:knots]
    best = minimize(median_delta, start, method="Nelder-Mead", options={"maxiter": 500})
    print(f"normal limit: flat bets {median_delta(np.ones(knots)):.3f} t widths, fitted "
          f"{best.fun:.3f}; knots {np.round(np.abs(best.x), 2).tolist()}")  # fmt: skip


def _k4_lattice() -> tuple[np.ndarray, np.ndarray]:
    """The exact distribution of :func:`draw`'s k = 4 differences: (values, probabilities)."""
    from scipy import integrate

    values, probs = np.arange(-4, 5) / 4.0, np.zeros(9)
    for c in range(5):
        for b in range(5):

            def density(p: float, c: int = c, b: int = b) -> float:
                return float(sps.binom.pmf(c, 4, p) * sps.binom.pmf(b, 4, p) * 2.0 * p)

            probs[c - b + 4] += integrate.quad(density, 0.0, 1.0)[0]
    return values, probs / probs.sum()


def _oracle_power(values: np.ndarray, probs: np.ndarray, null: float, n: int) -> float:
    """The largest P(max_t K_t ≥ 1/α) over every betting strategy with bets in [0, 0.99/m],
    each bet any function of the capital and of t, for data of the given law (known to the
    strategy: an oracle) against the null mean ``null``: dynamic programming over (t, log K)."""
    x, m = (values + 1.0) / 2.0, (null + 1.0) / 2.0
    target = math.log(1.0 / ALPHA)
    grid = np.linspace(-6.0, target, 1200)  # below e^−6 the capital counts as lost
    steps = np.log1p(np.outer(np.linspace(0.0, 0.99 / m, 80), x - m))  # bets × outcomes
    value = (grid >= target).astype(float)
    for _ in range(n):
        after = (grid[:, None, None] + steps[None]).ravel()
        reached = np.interp(after, grid, value, left=0.0, right=1.0)
        reached[after >= target] = 1.0
        value = (reached.reshape(grid.size, *steps.shape) @ probs).max(axis=1)
        value[-1] = 1.0
    return float(np.interp(0.0, grid, value))


def oracle() -> None:
    """``--oracle``: the median width, in t widths, of the best betting test there is for the
    bench's k = 4 data when its law is known: the shift below the mean at which the oracle's
    power is one half (bisection). No strategy that must learn the law from the items can be
    narrower, so this is the floor of everything betting can reach here."""
    values, k4 = _k4_lattice()
    same = 0.1 * k4 + 0.9 * (values == 0.0)  # "k=4 90%": D = 0 on the replayed items
    for kind, probs in (("k=4", k4), ("k=4 90%", same)):
        mean = float(values @ probs)
        sd = math.sqrt(float(probs @ (values - mean) ** 2))
        for n in (50, 200, 500):
            t_half = float(sps.t.ppf(1.0 - ALPHA, n - 1)) * sd / math.sqrt(n)
            lo, hi = 0.5, 3.0
            for _ in range(12):
                mid = (lo + hi) / 2.0
                lo, hi = (
                    (lo, mid)
                    if _oracle_power(values, probs, mean - mid * t_half, n) >= 0.5
                    else (mid, hi)
                )
            print(f"oracle            {kind:<8} n={n}: {hi:.3f}", flush=True)


def draw_fit(kind: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The fit's data, a family apart from :func:`draw`'s evaluation data: latent pass rate
    p ~ Beta(3, 2), scored over k = 2 rollouts ("k=2") or graded Beta(5p, 5(1 − p))."""
    p = rng.beta(3.0, 2.0, n)
    if kind == "k=2":
        return rng.binomial(2, p) / 2, rng.binomial(2, p) / 2
    a, b = 5.0 * p + 1e-3, 5.0 * (1.0 - p) + 1e-3
    return rng.beta(a, b), rng.beta(a, b)


def fit_boldness(runs: int = 300) -> None:
    """The tracking bets' factor (``--fit-boldness``): for each factor tried, the mean over
    k = 2 / graded and n = 50 / 200 / 500 of the median width ratio of ``runs`` PR pairs with
    Δ = 0 of :func:`draw_fit`'s family (never the evaluation data of :func:`draw`), through the
    gate's own ``betting_lower(..., fixed_n=True)`` with ``_BOLDNESS`` set to it (the same data
    for every factor). Any constant keeps the bets predictable: only the width is at stake."""
    from evalgate.stats import _betting

    rng = np.random.default_rng(7)
    cells = [
        [draw_fit(kind, n, rng) for _ in range(runs)]
        for kind in ("k=2", "graded")
        for n in (50, 200, 500)
    ]
    original = _betting._BOLDNESS
    try:
        for factor in (1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.8):
            _betting._BOLDNESS = factor
            medians = [np.median([ratio(*x, seed=s) for s, x in enumerate(c)]) for c in cells]
            print(f"factor {factor:.1f}: mean {np.mean(medians):.3f} t widths "
                  f"({' '.join(f'{m:.3f}' for m in medians)})", flush=True)  # fmt: skip
    finally:
        _betting._BOLDNESS = original


def pass_rates(runs: int = 1000) -> None:
    """P(PASS) at Δ = 0 against δ = 3 pp, flat / shaped / gate bets, on the bench's data."""
    print(f"P(PASS) at Δ = 0, δ = 3 pp, {runs} runs a cell: flat / shaped / gate (fixed design)")
    for kind in ("k=4", "graded"):
        cells = []
        for n in (100, 200, 500, 1000):
            rng = np.random.default_rng(11)
            passes = np.zeros(3)
            for seed in range(runs):
                base, head = draw(kind, n, rng)
                d = head - base
                passes[0] += betting_lower(d, -1.0, 1.0, -0.03, ALPHA, seed)[1] <= ALPHA
                passes[1] += _shaped_lower(d, seed) > -0.03
                passes[2] += (
                    betting_lower(d, -1.0, 1.0, -0.03, ALPHA, seed, fixed_n=True)[1] <= ALPHA
                )
            cells.append(f"n={n}: " + " / ".join(f"{v / runs:.3f}" for v in passes))
        print(f"{kind:<7} " + "   ".join(cells), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--variants", action="store_true", help="also the survey's variants")
    parser.add_argument("--others", action="store_true", help="also the methods outside betting")
    parser.add_argument(
        "--fit-shape", action="store_true", help="refit the bet schedule, then exit"
    )
    parser.add_argument(
        "--fit-boldness", action="store_true", help="refit the tracking bets' factor, then exit"
    )
    parser.add_argument("--pass-rate", action="store_true", help="P(PASS) of each; exit")
    parser.add_argument(
        "--oracle", action="store_true", help="the best betting test knowing the law; exit"
    )
    args = parser.parse_args()
    if args.pass_rate:
        pass_rates()
        return 0
    if args.fit_shape:
        fit_shape()
        return 0
    if args.oracle:
        oracle()
        return 0
    if args.fit_boldness:
        fit_boldness()
        return 0
    print(f"betting / paired-t width of the one-sided {1 - ALPHA:.0%} lower bound, median of "
          f"{args.runs} runs (items needed for the same width ≈ ratio²)")  # fmt: skip
    variants: tuple[str, ...] = ("gate", "keyed", "shaped", "flat")
    if args.variants:
        variants += ("markov", "x1.25", "x0.8", "avg20")
    if args.variants or args.others:
        variants += OTHERS
    for variant in variants:
        rng = np.random.default_rng(0)  # the same data for every variant
        for kind in KINDS:
            cells = []
            for n in (50, 200, 500):
                data = [draw(kind, n, rng) for _ in range(args.runs)]
                r = float(  # nan: a run whose differences are all 0 has no t width
                    np.nanmedian([ratio(*x, seed=s, variant=variant) for s, x in enumerate(data)])
                )
                cells.append(f"n={n}: {r:.2f} ({r * r:.1f}x items)")
            print(f"{variant:<18}{kind:<8} " + "   ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

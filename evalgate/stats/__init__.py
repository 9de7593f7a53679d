"""Paired statistics for gating a pull request on per-item eval results.

Pure functions: estimates with confidence intervals, the paired PR-vs-base comparison, the
three-valued verdict, Holm's multiplicity correction, minimum detectable effects (the
normal-theory formula, and the one calibrated to the gate's own tests), pass@k / pass^k, and
group-sequential (Wang–Tsiatis) looks with repeated confidence intervals.

Conventions used throughout:

* The unit of analysis is the item (Miller 2024, "Adding Error Bars to Evals", arXiv
  2411.00640): rollouts are averaged per item first, and items sharing a group id are also
  tested as one unit per group.
* Δ = mean(head) − mean(base). ``lo`` / ``hi`` of a :class:`PairedResult` are the one-sided
  (1 − α) lower / upper bounds on Δ (the ends of a two-sided 1 − 2α interval).
* One method per kind of data, and the bounds are the inversion of the tests whose p-values
  decide, so PASS ⇔ lo > −margin and FAIL ⇔ hi < 0 (PASS first) hold by construction.

Layout (private modules; import everything from ``evalgate.stats``):

* ``_design``: :class:`Design`, the constants of a paired comparison (α, margin, range, plan of
  items, looks and groups, resampling) that :func:`paired_compare`, :func:`sequential_compare`
  and :func:`sequential_decision` take;
* ``_estimates``: :class:`Estimate`, :func:`item_scores`, :func:`mean_ci`;
* ``_paired``: :class:`PairedResult`, :func:`paired_compare` and :func:`verdict`;
* ``_exact``: the exact unconditional test for paired 0/1 scores (its p-values),
  ``_exact_interval`` its inversion (:func:`exact_paired`: the bounds), ``_exact_regions`` its
  rejection regions for every discordant count (power, sequential crossing probabilities);
* ``_betting``: the betting lower bound for bounded (fractional) differences;
* ``_order``: :func:`item_order`, the one data-independent order of a run's items (keyed hash;
  whole groups contiguous, the groups in a keyed order), and :class:`OrderKey`, the key the gate
  draws for it;
* ``_multiplicity``: :func:`holm`;
* ``_power``: :func:`mde`, :func:`mde_paired`, :func:`mde_for_test`; ``_brent`` the root finder
  its searches use (scipy's brentq, step for step, without importing scipy.optimize);
* ``_passk``: :func:`pass_at_k`, :func:`pass_hat_k`;
* ``_sequential``: Wang–Tsiatis / O'Brien-Fleming bounds, :func:`look_sizes`, :func:`nominal_alpha`,
  :func:`repeated_p`, :func:`design_level`, :func:`sequential_compare`, :func:`sequential_decision`,
  :func:`fail_crossing_probability` and :func:`pass_crossing_probability` (the design's exact
  A/A false-FAIL and false-PASS rates for 0/1 items);
* ``_pure``: the numpy-free estimates a run summary needs, and the lazy scipy imports;
* ``_binomial``: :func:`binom_cdf`, :func:`binom_sf`, :func:`clopper_pearson_lower` (a
  threshold's exact test, on plain floats);
* ``_common``: input validation and standard errors on arrays;
* ``_display``: :func:`decimals_against` (a bound shown on the side of the edge it lies on);
* ``_scale``: :class:`Scale`, :func:`metric_scale` (proportion, bounded range, count, real).

Nothing heavy loads with this package: each name imports its module on first use, numpy with
the paired machinery, scipy on the first computation that needs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# Names load from their private module on first use (PEP 562), so that a run which only
# summarises its scores (``mean_ci``) never imports numpy, scipy or the paired machinery: start-up
# time. The ``X as X`` names are not in __all__ but stay reachable as evalgate.stats.X (the verdict
# strings, the group threshold, and the McNemar helpers that tests/test_stats.py checks).
_WHERE = {
    "binom_cdf": "_binomial",
    "binom_sf": "_binomial",
    "clopper_pearson_lower": "_binomial",
    "decimals_against": "_display",
    "Design": "_design",
    "Scale": "_scale",
    "metric_scale": "_scale",
    "Estimate": "_estimates",
    "item_scores": "_estimates",
    "mean_ci": "_estimates",
    "holm": "_multiplicity",
    "FAIL": "_paired",
    "INCONCLUSIVE": "_paired",
    "MIN_GROUPS": "_paired",
    "PASS": "_paired",
    "PairedResult": "_paired",
    "paired_compare": "_paired",
    "verdict": "_paired",
    "_mcnemar_p": "_paired",
    "item_order": "_order",
    "item_rank": "_order",
    "OrderKey": "_order",
    "pass_at_k": "_passk",
    "pass_hat_k": "_passk",
    "_mcnemar_critical": "_power",
    "mde": "_power",
    "mde_for_test": "_power",
    "mde_paired": "_power",
    "design_level": "_sequential",
    "fail_crossing_probability": "_sequential",
    "pass_crossing_probability": "_sequential",
    "look_sizes": "_sequential",
    "nominal_alpha": "_sequential",
    "obrien_fleming_bounds": "_sequential",
    "repeated_p": "_sequential",
    "sequential_compare": "_sequential",
    "sequential_decision": "_sequential",
    "wang_tsiatis_bounds": "_sequential",
}
_MODULES = frozenset(_WHERE.values()) | {
    "_betting",
    "_brent",
    "_common",
    "_exact",
    "_exact_interval",
    "_exact_regions",
    "_pure",
}

if TYPE_CHECKING:
    from evalgate.stats._binomial import binom_cdf, binom_sf, clopper_pearson_lower
    from evalgate.stats._design import Design
    from evalgate.stats._display import decimals_against
    from evalgate.stats._estimates import Estimate, item_scores, mean_ci
    from evalgate.stats._multiplicity import holm
    from evalgate.stats._order import OrderKey, item_order, item_rank
    from evalgate.stats._paired import FAIL as FAIL
    from evalgate.stats._paired import INCONCLUSIVE as INCONCLUSIVE
    from evalgate.stats._paired import MIN_GROUPS as MIN_GROUPS
    from evalgate.stats._paired import PASS as PASS
    from evalgate.stats._paired import PairedResult, paired_compare, verdict
    from evalgate.stats._paired import _mcnemar_p as _mcnemar_p
    from evalgate.stats._passk import pass_at_k, pass_hat_k
    from evalgate.stats._power import _mcnemar_critical as _mcnemar_critical
    from evalgate.stats._power import mde, mde_for_test, mde_paired
    from evalgate.stats._scale import Scale, metric_scale
    from evalgate.stats._sequential import (
        design_level,
        fail_crossing_probability,
        look_sizes,
        nominal_alpha,
        obrien_fleming_bounds,
        pass_crossing_probability,
        repeated_p,
        sequential_compare,
        sequential_decision,
        wang_tsiatis_bounds,
    )


def __getattr__(name: str) -> object:
    if name in _WHERE:
        value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
        globals()[name] = value  # later lookups are plain attribute reads
        return value
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


__all__ = [
    "Design",
    "Estimate",
    "OrderKey",
    "PairedResult",
    "Scale",
    "binom_cdf",
    "binom_sf",
    "clopper_pearson_lower",
    "decimals_against",
    "design_level",
    "fail_crossing_probability",
    "holm",
    "item_order",
    "item_rank",
    "item_scores",
    "look_sizes",
    "mde",
    "mde_for_test",
    "mde_paired",
    "mean_ci",
    "metric_scale",
    "nominal_alpha",
    "obrien_fleming_bounds",
    "paired_compare",
    "pass_at_k",
    "pass_crossing_probability",
    "pass_hat_k",
    "repeated_p",
    "sequential_compare",
    "sequential_decision",
    "verdict",
    "wang_tsiatis_bounds",
]

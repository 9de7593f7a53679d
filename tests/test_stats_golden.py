"""The paired statistics' outputs are the ones recorded before their seams moved.

Seeded random cases of every kind the gate compares (0/1 items, k > 1 rollouts, a scaled
metric, groups, fixed designs with and without a horizon, sequential looks and decisions, the
exact test's bounds) are run through the public entry points, and every field of every result
must equal, to the last bit (``repr`` of each float), what the code gave before the typed
:class:`evalgate.stats.Design` replaced the keyword arguments (recorded from commit 0b75211 with
``python tests/test_stats_golden.py --write`` run against that code, which took the same values
as keywords: :func:`_call` speaks both). Rewrite the file only for a change that means to move
the numbers.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

GOLDEN = Path(__file__).parent / "data" / "stats_golden.json"


def _case(i: int) -> dict[str, Any]:
    """One seeded case: the scores, the clusters and the design's values (plain keywords)."""
    rng = np.random.default_rng(1000 + i)
    kind = ("binary", "rollouts", "scaled", "grouped binary", "grouped rollouts")[i % 5]
    n = int(rng.integers(12, 50))
    p = rng.uniform(0.2, 0.9, n)
    shift = float(rng.normal(0.0, 0.1))
    draws = 1 if "binary" in kind else 4
    base = (rng.random((n, draws)) < p[:, None]).mean(1)
    head = (rng.random((n, draws)) < np.clip(p + shift, 0.0, 1.0)[:, None]).mean(1)
    design: dict[str, Any] = {
        "margin": float(rng.choice([0.0, 0.02, 0.05, 0.1])),
        "alpha": float(rng.choice([0.05, 0.1, 0.2])),
        "n_resamples": int(rng.choice([200, 999])),
        "seed": int(rng.integers(0, 5)),
    }
    if kind == "scaled":
        base, head = base * 10.0 - 2.0, head * 10.0 - 2.0
        design.update(bounds=(-2.0, 8.0), margin=design["margin"] * 10.0)
    clusters = None
    if kind.startswith("grouped"):
        sizes = np.minimum(rng.integers(1, 5, n), n)
        ends = np.cumsum(sizes)
        sizes = sizes[: int(np.searchsorted(ends, n)) + 1]
        sizes[-1] -= int(sizes.sum()) - n
        clusters = [f"g{j}" for j, size in enumerate(sizes) for _ in range(size)]
        design.update(groups_total=len(sizes) + int(rng.integers(0, 3)), group_size=max(sizes))
    if rng.random() < 0.6:
        design["horizon"] = n + int(rng.integers(0, 10))
    elif clusters is not None:
        del design["groups_total"], design["group_size"]
    looks = int(rng.integers(1, 5))
    return {
        "base": base,
        "head": head,
        "clusters": clusters,
        "design": design,
        "looks": looks,
        "look": int(rng.integers(1, looks + 1)),
        "n_total": n + int(rng.integers(0, 10)),
    }


def _call(name: str, base: Any, head: Any, design: dict[str, Any], **rest: Any) -> Any:
    """``evalgate.stats.<name>`` with ``design``'s values: as a Design where the function
    takes one, as keywords where it does not (the code the golden file was recorded from)."""
    from evalgate import stats

    function = getattr(stats, name)
    if "design" not in inspect.signature(function).parameters:
        if name == "sequential_decision":
            design = {("n_total" if k == "horizon" else k): v for k, v in design.items()}
        return function(base, head, **design, **rest)
    return function(base, head, stats.Design(**design), **rest)


def _fields(result: Any) -> Any:
    if result is None or isinstance(result, str):
        return result
    return {key: repr(value) for key, value in dataclasses.asdict(result).items()}


def _outputs(count: int = 20) -> list[dict[str, Any]]:
    from evalgate.stats import _exact

    try:
        from evalgate.stats._exact_interval import exact_paired
    except ImportError:  # the code the golden file was recorded from
        exact_paired = _exact.exact_paired
    found = []
    for i in range(count):
        case = _case(i)
        base, head, clusters, design = case["base"], case["head"], case["clusters"], case["design"]
        looks, look = case["looks"], case["look"]
        fixed = _call("paired_compare", base, head, design, clusters=clusters)
        sequential = {**design, "looks": looks}
        at_look = _call("sequential_compare", base, head, sequential, look=look, clusters=clusters)
        planned = {**sequential, "horizon": case["n_total"]}
        if clusters is not None:
            planned.setdefault("groups_total", len(set(clusters)))
        decision = _call("sequential_decision", base, head, planned, look=look, clusters=clusters)
        row = {"fixed": _fields(fixed), "look": _fields(at_look), "decision": decision}
        if i % 5 == 0:  # the exact test's bounds on a table of its own
            n, b, c = base.size, int(base.size * 0.3), int(base.size * 0.1)
            row["exact"] = [repr(x) for x in exact_paired(b, c, n, design["margin"], 0.05)]
        found.append(row)
    return found


def test_the_statistics_give_the_recorded_outputs_bit_for_bit() -> None:
    recorded = json.loads(GOLDEN.read_text(encoding="utf-8"))
    found = _outputs(len(recorded))
    for i, (got, want) in enumerate(zip(found, recorded, strict=True)):
        assert got == want, f"case {i}"
    # The cases reach every verdict and every method (an all-INCONCLUSIVE file proves little).
    assert {row["decision"] for row in found} >= {"PASS", "FAIL", "INCONCLUSIVE", None}
    methods = {row["fixed"]["method"] for row in found}
    assert len(methods) == 3, methods


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    GOLDEN.write_text(json.dumps(_outputs(), indent=0, sort_keys=True) + "\n", encoding="utf-8")

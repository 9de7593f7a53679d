"""Sequential looks on grouped items and on metrics with their own scale.

With groups the gate's PASS side is the betting bound over groups (items inside a group share
what they share). A sequential run goes whole group by whole group in a keyed order, and the
PASS side over groups is ONE betting capital process over the complete groups seen, tuned to the
planned number of groups and checked at the full α at every look (Ville's inequality), as for
graded items without groups. Re-betting each look on its own spends up to the sum of the looks'
levels. And every look reads the metric on the range `evalgate compare` reads it on.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from evalgate import stats
from evalgate.compare.paired import compare_runs
from evalgate.run.fingerprint import item_hash
from evalgate.run.sequential import plan_order
from evalgate.stats._betting import _bets, betting_lower_groups
from evalgate.stats._paired import _compare as paired_compare_core
from evalgate.stats._paired import _Reading
from evalgate.suites.base import Item
from tests.test_sequential import _loaded, looks_metadata, order_key_of, run_looks

# ------------------------------------------------------------------ the process over groups


def _grouped(rng: np.random.Generator, groups: int, binary: bool) -> tuple[Any, ...]:
    """Base and PR scores of ``groups`` contiguous groups of 1–5 items, and their group ids."""
    sizes = rng.integers(1, 6, groups)
    clusters = np.repeat(np.arange(groups), sizes)
    n = clusters.size
    if binary:
        base = (rng.random(n) < 0.7).astype(float)
        head = np.where(rng.random(n) < 0.15, 1.0 - base, base)
    else:
        base = rng.beta(2, 2, n)
        head = np.clip(base + rng.normal(0.01, 0.2, n), 0.0, 1.0)
    return base, head, clusters, sizes


def _capital_p(base: Any, head: Any, clusters: Any, groups: int, size: int, margin: float) -> float:
    """1 / max capital of the betting process over the groups, in their order, tuned to
    ``groups`` planned groups and scaled by the planned largest group ``size`` (written out)."""
    d = head - base
    sums = np.bincount(clusters, weights=d)
    m = np.bincount(clusters).astype(float)
    y = (sums + margin * m + (1.0 - margin) * size) / (2.0 * size)
    mean0 = (1.0 - margin) / 2.0
    bets = np.minimum(_bets(y, 0.05, groups), 0.75 / mean0)
    return min(1.0, 1.0 / float(np.exp(np.max(np.cumsum(np.log1p(bets * (y - mean0)))))))


@pytest.mark.parametrize("binary", [False, True])
def test_a_looks_pass_side_over_groups_is_one_process_at_the_full_alpha(binary: bool) -> None:
    # At every look (a prefix of whole groups), the PASS side over groups is the one capital
    # process of the whole run read at that prefix: its p is 1 / (max capital so far), tuned to
    # the planned groups, at the full α (not the look's nominal level, not re-betted per look),
    # and the same as the fixed-sample bound on the prefix with the same plan.
    rng = np.random.default_rng(5 if binary else 6)
    groups, looks, margin = 80, 4, 0.05
    base, head, clusters, sizes = _grouped(rng, groups, binary)
    top = int(sizes.max())
    ends = np.cumsum(sizes)
    p_seen = []
    for look in range(1, looks + 1):
        seen = int(ends[look * groups // looks - 1])  # whole groups
        design = stats.Design(
            margin=margin, n_resamples=50, horizon=base.size, groups_total=groups, group_size=top
        )
        res = stats.sequential_compare(
            base[:seen], head[:seen], replace(design, looks=looks), look=look,
            clusters=clusters[:seen],
        )  # fmt: skip
        # The same process read at this prefix by the fixed-sample code (flat bets: a fixed run
        # read at its end would shape them, paired_compare with horizon = n).
        alone = paired_compare_core(
            base[:seen], head[:seen], clusters[:seen], design, _Reading(0.05)
        )
        p_group = _capital_p(base[:seen], head[:seen], clusters[:seen], groups, top, margin)
        _, p_direct = betting_lower_groups(
            np.bincount(clusters[:seen], weights=head[:seen] - base[:seen]),
            np.bincount(clusters[:seen]).astype(float),
            1.0,
            -margin,
            0.05,
            0,
            groups,
            top,
        )
        assert p_direct == pytest.approx(p_group, rel=1e-9)
        # Both tests must reject: the look's p is the larger of the group process's and the
        # items' (graded: the items' process at α, so the fixed bound's; 0/1: the exact test's
        # repeated p-value at this look).
        assert res.p_noninferiority >= p_group - 1e-12
        if not binary:
            assert res.p_noninferiority == alone.p_noninferiority
            assert res.lo == alone.lo
        else:
            item = stats.paired_compare(
                base[:seen], head[:seen], stats.Design(margin=margin, alpha=0.05)
            )
            nominal = stats.sequential_compare(
                base[:seen],
                head[:seen],
                stats.Design(looks=looks, margin=margin, alpha=0.05),
                look=look,
            )
            assert item.n_clusters is None and nominal.n_clusters is None
            assert res.p_noninferiority == pytest.approx(
                max(p_group, nominal.p_noninferiority), rel=1e-9
            )
        p_seen.append(p_group)
    # One process: the running max of its capital never falls, so its p never rises.
    assert all(a >= b for a, b in itertools.pairwise(p_seen)), p_seen


def _whole_groups_at_the_margin(
    rng: np.random.Generator, groups: int, size: int, margin: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Δ = −margin exactly, made of whole groups that move by ±½ together: the group test is
    the one that decides, and where the betting bound over groups is tightest."""
    d = np.repeat(np.where(rng.random(groups) < 0.5 - margin, 0.5, -0.5), size)
    head = np.clip(rng.random(groups * size) + d, 0.0, 1.0)
    return head - d, head, np.repeat(np.arange(groups), size)


@pytest.mark.slow
def test_grouped_false_pass_over_many_looks_is_at_most_alpha() -> None:
    # 20 looks, 100 groups of 2, Δ = −δ. One process over the groups, read at every look at α,
    # spends α (Ville); a process of its own at each look, each at α, spends far more (0.12
    # here), so the looks are many enough to show a PASS side that is not one process. (The
    # looks used to re-bet at each look's nominal level: worst case the sum of the levels.)
    # Read through paired_compare at the look's prefix with the run's plan (the previous test:
    # the look's own PASS side), FAIL ignored (stopping for FAIL only makes PASS rarer).
    rng = np.random.default_rng(20261126)
    groups, size, looks, margin, alpha, runs = 100, 2, 20, 0.05, 0.05, 300
    ends = [math.ceil(k * groups / looks) * size for k in range(1, looks + 1)]
    one, each = 0, 0
    for r in range(runs):
        base, head, clusters = _whole_groups_at_the_margin(rng, groups, size, margin)
        d = head - base
        one += any(
            stats.paired_compare(
                base[:end],
                head[:end],
                stats.Design(
                    margin=margin,
                    alpha=alpha,
                    horizon=base.size,
                    groups_total=groups,
                    group_size=size,
                    n_resamples=1,
                ),
                clusters=clusters[:end],
            ).p_noninferiority
            <= alpha
            for end in ends
        )
        each += any(
            betting_lower_groups(
                np.bincount(clusters[:end], weights=d[:end]),
                np.full(end // size, float(size)),
                1.0,
                -margin,
                alpha,
                r,
            )[1]
            <= alpha
            for end in ends
        )
    se = math.sqrt(alpha * (1.0 - alpha) / runs)
    assert each / runs > alpha + 2.0 * se  # the data can show an invalid PASS side
    assert one / runs <= alpha, (one, each)


# ------------------------------------------------------------------- the looks and compare


def _record(item_id: str, score: float, group: str | None) -> dict[str, Any]:
    return {
        "example_id": item_id,
        "group": group,
        "error": None,
        "metrics": {"accuracy": score},
        "reward": score,
    }


def _grouped_pr(seed: int, groups: int, binary: bool, drop: float) -> tuple[Any, ...]:
    """(items, base scores, head scores, baseline) of a seeded PR on grouped items (a few
    ungrouped), whose change moves whole groups."""
    rng = random.Random(seed)
    items = []
    for g in range(groups):
        for j in range(rng.randint(1, 5)):
            items.append(Item(f"g{g:02d}i{j}", f"Q{g}.{j}", f"A{g}.{j}", group=f"topic{g}"))
    items += [Item(f"solo{j}", f"S{j}", f"B{j}") for j in range(5)]
    shift = {it.group: rng.gauss(-drop, 0.2) for it in items}
    base, head = {}, {}
    for it in items:
        p = rng.betavariate(4, 2)
        if binary:
            base[it.id] = float(rng.random() < p)
            head[it.id] = float(rng.random() < min(1.0, max(0.0, p + shift[it.group])))
        else:
            base[it.id] = p
            head[it.id] = min(1.0, max(0.0, p + shift[it.group] + rng.gauss(0, 0.1)))
    baseline = SimpleNamespace(
        records=[
            {**_record(it.id, base[it.id], it.group), "item_hash": item_hash(it.prompt, it.answer)}
            for it in items
        ],
        rollouts=1,
    )
    return items, base, head, baseline


def _run_looks(
    items: list[Item],
    baseline: Any,
    head: dict[str, float],
    seed: int,
    errored: set[str],
    scale: Any = None,
    looks: int = 4,
) -> tuple[Any, Any, list[list[str]]]:
    return run_looks(
        items, baseline, head, seed, errored, scale=scale, looks=looks,
        record=lambda it: _record(it.id, head[it.id], it.group),
    )  # fmt: skip


def _compare(
    tmp_path: Path,
    tag: str,
    baseline: Any,
    records: Any,
    result: Any,
    seed: int,
    scales: Any = None,
) -> Any:
    hashes = {r["example_id"]: r["item_hash"] for r in baseline.records}
    head_records = [{**rec, "item_hash": hashes[rec["example_id"]]} for rec in records]
    comparison = compare_runs(
        _loaded(tmp_path / f"base{tag}", baseline.records, {}),
        _loaded(
            tmp_path / f"head{tag}",
            head_records[::-1],  # finished in any order
            looks_metadata(result, seed),
        ),
        margin=0.05,
        alpha=0.05,
        scales=scales,
    )
    (mc,) = [m for m in comparison.metrics if m.metric == "accuracy"]
    return mc


def test_grouped_looks_end_at_group_ends() -> None:
    # Each look moves to the group end nearest its equal slice (the later on a tie), so a look
    # never sees part of a group; a group larger than a slice makes a look see nothing new.
    assert stats.look_sizes(500, 4, [100] * 5) == [100, 300, 400, 500]
    assert stats.look_sizes(12, 4, [1, 2, 3, 6]) == [3, 6, 12, 12]
    assert stats.look_sizes(400, 4, [2] * 200) == stats.look_sizes(400, 4)
    with pytest.raises(ValueError, match="sum to n_total"):
        stats.look_sizes(10, 2, [3, 3])


def test_grouped_looks_run_whole_groups_in_a_keyed_order() -> None:
    items, _base, _head, baseline = _grouped_pr(3, 40, False, 0.0)
    for seed in (0, 9):
        key = order_key_of(seed)
        order, unpaired, _ = plan_order(items, baseline, "accuracy", key)
        assert not unpaired and len(order) == len(items)
        runs = [it.group or it.id for it in order]
        # Each group's items are contiguous, the groups in a keyed hash order of their ids.
        assert len({g for g in runs}) == sum(
            1 for a, b in zip([None, *runs], runs, strict=False) if a != b
        )
        firsts = [g for i, g in enumerate(runs) if i == 0 or runs[i - 1] != g]
        assert firsts != sorted(firsts)
        grouping = {it.id: it.group for it in items}
        ids = [it.id for it in order]
        assert stats.item_order(reversed(ids), key, grouping) == ids
        kept = [i for i in ids if hash(i) % 5]  # dropped items never reorder the rest
        assert stats.item_order(kept, key, grouping) == kept
    # Without groups the order is the plain one.
    plain = [f"q{i}" for i in range(30)]
    assert stats.item_order(plain, 4, dict.fromkeys(plain)) == stats.item_order(plain, 4)


@pytest.mark.parametrize("binary", [False, True])
def test_a_grouped_looks_verdict_is_the_one_compare_reads_from_the_results(
    tmp_path: Path, binary: bool
) -> None:
    # The looks run whole groups (each look ends at a group's end) and compare reads the
    # results back in the same order with the same plan of groups: the scorecard's verdict and
    # bounds are the ones the look computed, errored items or not.
    decisions = set()
    for seed in (11, 25, 47, 3, 8, 14):
        # Gains large enough to PASS with the errored items scored 0 (evalgate.run.imputed).
        drop = (0.25 if seed % 2 else -0.2) if binary else (0.1 if seed % 2 else -0.15)
        items, base, head, baseline = _grouped_pr(seed, 60, binary, drop)
        errored = {it.id for it in items[seed::23]}
        records, result, ran = _run_looks(items, baseline, head, seed, errored)
        assert result is not None and result.groups_total == 65
        decisions.add(result.decision)
        order, _, _ = plan_order(items, baseline, "accuracy", order_key_of(seed))
        # Every look ended at a group's end: no group was split between looks.
        assert sum(len(chunk) for chunk in ran) == result.items_used
        position = {it.id: k for k, it in enumerate(order)}
        for chunk in ran[:-1]:
            last = order[position[chunk[-1]]]
            after = order[position[chunk[-1]] + 1]
            assert last.group is None or after.group != last.group
        mc = _compare(tmp_path, f"{binary}{seed}", baseline, records, result, seed)
        assert mc.status == result.decision, seed
        seen = [it.id for it in order[: result.items_used] if it.id not in errored]
        clusters = [next(x.group for x in order if x.id == i) for i in seen]
        design = stats.Design(
            looks=4,
            margin=0.05,
            alpha=0.05,
            horizon=len(order),
            groups_total=result.groups_total,
            group_size=result.group_size,
        )  # the look's plan, for the PR's side and for the PASS side alike
        look = stats.sequential_compare(
            np.array([base[i] for i in seen]),
            np.array([head[i] for i in seen]),
            design,
            look=result.look,
            clusters=[g or f"item:{i}" for g, i in zip(clusters, seen, strict=True)],
        )
        assert mc.result is not None and mc.result.n == len(seen)
        assert (mc.result.hi, mc.result.p_regression) == (look.hi, look.p_regression)
        # The PASS side reads the errored items too, scored 0 (evalgate.run.imputed), in the
        # same order, with the same plan of groups.
        tried = [it for it in order[: result.items_used]]
        worst = stats.sequential_compare(
            np.array([base[it.id] for it in tried]),
            np.array([0.0 if it.id in errored else head[it.id] for it in tried]),
            design,
            look=result.look,
            clusters=[it.group or f"item:{it.id}" for it in tried],
        )
        assert mc.imputed == len(errored & {it.id for it in tried}) > 0
        assert (mc.result.lo, mc.result.p_noninferiority) == (worst.lo, worst.p_noninferiority)
    assert decisions >= {"PASS", "FAIL"}  # both sides were exercised


# --------------------------------------------------------------------- the metric's own scale


def test_a_looks_decision_uses_the_metrics_declared_range(tmp_path: Path) -> None:
    # A 0–10 metric (gate.scales: [0, 10]) that this run happens to score within 0–8: the
    # looks must read it on [0, 10] as compare does, not on [0, 1] widened to what they saw.
    n = 200
    rng = random.Random(2)
    items = [Item(f"q{i:03d}", f"Q{i}", f"A{i}") for i in range(n)]
    base = {it.id: round(rng.uniform(2.0, 8.0), 2) for it in items}
    head = {k: min(8.0, max(0.0, v + rng.gauss(0.3, 0.6))) for k, v in base.items()}
    baseline = SimpleNamespace(
        records=[
            {**_record(it.id, base[it.id], None), "item_hash": item_hash(it.prompt, it.answer)}
            for it in items
        ],
        rollouts=1,
    )
    for declared in ([0, 10], "count", None):
        records, result, _ = _run_looks(items, baseline, head, 1, set(), scale=declared, looks=2)
        assert result is not None
        mc = _compare(tmp_path, str(declared), baseline, records, result, 1, {"accuracy": declared})
        assert mc.status == result.decision
        order, _, _ = plan_order(items, baseline, "accuracy", order_key_of(1))
        seen = [it.id for it in order[: result.items_used]]
        b, h = np.array([base[i] for i in seen]), np.array([head[i] for i in seen])
        found = stats.metric_scale(np.concatenate([b, h]), declared)
        look = stats.sequential_compare(
            b,
            h,
            stats.Design(
                looks=2, margin=0.05, alpha=0.05, horizon=n, bounds=(found.low, found.high)
            ),
            look=result.look,
        )
        assert (mc.result.lo, mc.result.p_noninferiority) == (look.lo, look.p_noninferiority)
        assert stats.verdict(look) == result.decision
    # The declared range is wider than the values: a look on [0, 10] is not one on [0, 8].
    seen_range = stats.sequential_compare(
        b, h, stats.Design(looks=2, margin=0.05, alpha=0.05, horizon=n), look=1
    )
    declared_range = stats.sequential_compare(
        b, h, stats.Design(looks=2, margin=0.05, alpha=0.05, horizon=n, bounds=(0.0, 10.0)), look=1
    )
    assert seen_range.lo != declared_range.lo


# ------------------------------------------------------------------------ end to end (CLI)


def test_a_grouped_sequential_run_is_reproduced_by_compare(
    tmp_path: Path, scripted_server: Any
) -> None:
    # Through the CLI: a grouped dataset (50 groups of 8), a PR that loses a third of the items.
    # The looks run whole groups (every look ends at a group's end), the run records its plan
    # of groups, and `evalgate compare` on the two run folders reaches the look's verdict.
    import json

    from evalgate.cli import main
    from tests.conftest import write_config
    from tests.test_sequential import N, _answers, _run

    rows = [
        {"id": f"q{i:03d}", "prompt": f"Q{i}", "answer": f"A{i}", "group": f"g{i // 8}"}
        for i in range(N)
    ]
    (tmp_path / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")

    def setup(url: str) -> Path:
        return write_config(
            tmp_path,
            f"""
models: [{{name: m, backend: openai, base_url: "{url}", model: org/m}}]
benchmarks: [{{name: qa, kind: jsonl, path: qa.jsonl}}]
eval: {{max_concurrent: 16}}
""",
        )

    _run(tmp_path, setup(scripted_server(_answers(None)).base_url), "base")
    head = scripted_server(_answers(3))
    code, verdict = _run(
        tmp_path, setup(head.base_url), "head", "--baseline", str(tmp_path / "base"),
        "--eval.sequential=true",
    )  # fmt: skip
    seq = verdict["runs"][0]["extra"]["sequential"]
    assert (seq["groups_total"], seq["group_size"]) == (N // 8, 8)
    assert seq["items_used"] % 8 == 0 and len(head.requests) == seq["items_used"]
    assert verdict["status"] == seq["decision"] == "FAIL" and code == 1
    main(
        [
            "compare",
            str(tmp_path / "base"),
            str(tmp_path / "head"),
            "--output",
            str(tmp_path / "c"),
        ],
        environ={"CI": "1"},
    )
    compared = json.loads((tmp_path / "c" / "verdict.json").read_text())
    (metric,) = [m for m in compared["comparisons"][0]["metrics"] if m["metric"] == "accuracy"]
    assert metric["status"] == seq["decision"]
    assert compared["comparisons"][0]["n_not_run"] == N - seq["items_used"]

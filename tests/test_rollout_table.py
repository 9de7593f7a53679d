"""A run keeps its rollouts as columns (RolloutTable), not as record dicts: what is summarised
from it must equal what is summarised from the records themselves."""

from __future__ import annotations

import math
import random
import sys
from dataclasses import asdict

import pytest

from evalgate.run.budget import stop_reason
from evalgate.run.rollouts import RolloutTable
from evalgate.run.summary import item_metrics, summarize


def _records(n_items: int, k: int, seed: int = 3) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n_items):
        for r in range(k):
            error = "timeout: no answer" if rng.random() < 0.1 else None
            reward = None if error else rng.choice([0.0, 0.5, 1.0])
            metrics = {} if error else {"accuracy": reward, **({"f1": 0.25} if i % 3 else {})}
            rec = {
                "example_id": f"i{i}",
                "item_hash": f"h{i}",
                "rollout": r,
                "group": f"g{i % 4}" if i % 2 else None,
                "prompt": [{"role": "user", "content": "x" * 500}],
                "completion": None if error else rng.choice(["", "  ", "an answer"]),
                "answer": "a",
                "reward": reward,
                "metrics": metrics,
                "usage": {"prompt_tokens": rng.randint(1, 9), "completion_tokens": 2},
                "timing": {"start": 0.0, "latency_ms": 1.0},
                "error": error,
            }
            if i == 5:
                rec["cost_usd"] = 0.01
            out.append(rec)
    rng.shuffle(out)  # finishing order
    return out


def test_a_table_summarises_exactly_as_its_records() -> None:
    records = _records(40, 3)
    table = RolloutTable()
    table.extend(records)
    assert len(table) == len(records)
    kw = dict(benchmark="b", model="m", model_id="m", run_dir="", n_items=40, rollouts=3,
              time_s=0.0)  # fmt: skip
    assert asdict(summarize(table, **kw)) == asdict(summarize(records, **kw))
    assert item_metrics(table, 3) == item_metrics(records, 3)
    slim = list(table)
    assert [r["cost_usd"] for r in slim if "cost_usd" in r] == [0.01] * 3
    assert sorted((r["example_id"], r["rollout"]) for r in slim) == sorted(
        (r["example_id"], r["rollout"]) for r in records
    )

    class Meter:
        reached = "tokens 10"

    assert stop_reason(Meter(), table, 50, 3) == stop_reason(Meter(), records, 50, 3)


def test_a_small_table_is_summarised_from_its_columns_not_a_dict_per_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run below summary.COLUMNAR_ROWS (no numpy) is summarised from the table's columns:
    no row is built as a dict, and the summary and per-item values are the records' to the
    bit, with errors (one with an empty message), a NaN score (an error of its own kind), an
    int reward, blank completions, groups, a metric some rows lack and usage names some lack."""
    records = _records(60, 3, seed=11)
    records[0] = {**records[0], "error": "", "reward": None, "metrics": {}, "completion": None}
    records[1] = {**records[1], "error": None, "reward": 1.0, "metrics": {"accuracy": math.nan}}
    records[2] = {**records[2], "error": None, "reward": 1, "metrics": {"accuracy": 1}}
    records[3] = {**records[3], "usage": {**records[3]["usage"], "reasoning_tokens": 7}}
    table = RolloutTable()
    table.extend(records)
    kw = dict(benchmark="b", model="m", model_id="m", run_dir="", n_items=60, rollouts=3,
              time_s=0.0)  # fmt: skip
    expected = asdict(summarize(records, **kw))
    expected_values = [item_metrics(records, 3, derived=d) for d in (True, False)]

    def no_row(*args: object, **kwargs: object) -> None:
        raise AssertionError("a dict built per row")

    monkeypatch.setattr(RolloutTable, "_row", no_row)
    got = asdict(summarize(table, **kw))
    assert repr(got) == repr(expected)  # NaN-safe, order-sensitive
    assert got["errors"] > 0 and got["empty_replies"] > 0 and got["usage"]["reasoning_tokens"]
    for derived, values in zip((True, False), expected_values, strict=True):
        got_values = item_metrics(table, 3, derived=derived)
        assert [(k, list(v.items())) for k, v in got_values.items()] == [
            (k, list(v.items())) for k, v in values.items()
        ]


def test_a_table_holds_far_less_than_its_records() -> None:
    records = _records(200, 5)
    table = RolloutTable()
    table.extend(records)
    held = sum(
        sys.getsizeof(v)
        for v in (table._item, table._rollout, table._reward, table._blank,
                  *table._usage.values(), *table._metrics.values())
    )  # fmt: skip
    per_rollout = held / len(records)
    assert per_rollout < 80, per_rollout  # a record dict with its prompt: kilobytes


@pytest.mark.parametrize("vector_from", [8, 1 << 30])
def test_the_item_id_table_finds_every_id_as_it_grows(
    monkeypatch: pytest.MonkeyPatch, vector_from: int
) -> None:
    """The compact id table (run/item_ids.py) gives each id its index, in order, and finds no
    absent one, while it grows (re-placed by numpy or one by one), with ids on few codes (long
    probe runs, wrapping past the last slot) and in text blocks and the open one."""
    import evalgate.run.item_ids as item_ids

    monkeypatch.setattr(item_ids, "_VECTOR_GROW", vector_from)
    monkeypatch.setattr(item_ids, "_code", lambda item_id: (hash(item_id) % 499) * 104729 - 2**40)
    ids = item_ids.ItemIds()
    names = [f"id-{i}-{'é' * (i % 3)}" for i in range(5000)]
    assert [ids.add(name) for name in names] == list(range(len(names)))
    assert [ids.add(name) for name in names[::7]] == list(range(0, len(names), 7))
    assert [ids.find(name) for name in names] == list(range(len(names)))
    assert list(ids) == names and ids[4095] == names[4095] and ids[4999] == names[4999]
    assert ids.find("id-x") == -1 and ids.find("id-1-") == -1


def _per_item_means(records: list[dict]) -> dict[str, dict[str, float]]:
    """metric → item → statistics.fmean of its scored rollouts' values: the definition, with
    metrics in the order the items (first seen first) name them, each item's names sorted."""
    from statistics import fmean

    per: dict[str, dict[str, list[float]]] = {}
    for rec in records:
        if rec["error"] is None:
            values = per.setdefault(rec["example_id"], {})
            for name, value in rec["metrics"].items():
                values.setdefault(name, []).append(float(value))
    out: dict[str, dict[str, float]] = {}
    for item, values in per.items():
        for name in sorted(values):
            out.setdefault(name, {})[item] = fmean(values[name])
    return out


@pytest.mark.parametrize("repeats", [1, 2])
def test_per_item_values_are_each_items_mean_to_the_bit(repeats: int) -> None:
    """Items of one scored rollout (most runs: every item) and of several, errored rows, -0.0
    (math.fsum's sum of it is 0.0), int values, and a metric first named by a later
    item: the values, their order and their signs are the definition's."""
    records = []
    for i in range(30):
        for r in range(repeats if i % 3 else 1):
            value: object = [-0.0, 0.25, 1, 0, 0.1 + 0.2][(i + r) % 5]
            metrics = {"z": value, **({"a": 0.5 * r} if i > 10 else {})}
            records.append(
                {"example_id": f"i{i}", "rollout": r, "reward": 1.0, "metrics": metrics,
                 "error": "timeout: no answer" if i == 7 and r == 0 else None}
            )  # fmt: skip
    random.Random(5).shuffle(records)
    expected = _per_item_means(records)
    got = item_metrics(records, 1)
    assert [(k, [(i, repr(v)) for i, v in vs.items()]) for k, vs in got.items()] == [
        (k, [(i, repr(v)) for i, v in vs.items()]) for k, vs in expected.items()
    ]
    assert "-0.0" not in repr(got) and any(v == 0.0 for v in got["z"].values())

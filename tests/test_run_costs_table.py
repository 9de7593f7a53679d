"""The costs pass over a run's table: the same figures as over its records, read from only the
rows that carry a cost, a judgement or a fallback (a 2,000-item run without any builds no dict
per row)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from evalgate.run.manifest import run_costs
from evalgate.run.rollouts import RolloutTable
from evalgate.run.summary import RunSummary


class _Model:
    params = None


def _summary() -> RunSummary:
    return RunSummary(
        benchmark="b",
        model="m",
        model_id="gpt-4o-mini",  # priced: the model's own share is costed too
        run_dir="",
        n_items=6,
        rollouts=1,
        n_rollouts=6,
        errors=0,
        error_kinds={},
        metrics={},
        usage={"prompt_tokens": 600, "completion_tokens": 60},
        time_s=1.0,
    )


def _records() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(6):
        rec: dict[str, Any] = {
            "example_id": f"q{i}",
            "item_hash": None,
            "rollout": 0,
            "reward": 1.0,
            "error": None,
            "completion": "x",
            "usage": {"prompt_tokens": 100, "completion_tokens": 10},
            "metrics": {},
        }
        if i in (1, 4):  # what an agent said it spent
            rec["cost_usd"] = 0.25 * i
        if i in (2, 4):  # a judged rollout
            rec["judge"] = {"usage": {"prompt_tokens": 7, "completion_tokens": 3}, "cost_usd": 0.5}
        if i == 5:  # a fallback answered
            rec["served_by"] = {
                "other/model": {"requests": 1, "prompt_tokens": 100, "completion_tokens": 10}
            }
        out.append(rec)
    return out


class _NoIteration(RolloutTable):
    def __iter__(self) -> Iterator[dict[str, Any]]:
        raise AssertionError("the costs pass iterated every row of the table")


def test_costs_over_a_table_match_its_records_without_a_dict_per_row() -> None:
    records = _records()
    table = _NoIteration()
    table.extend(copy.deepcopy(records))
    from_records, summary_records = _summary(), _summary()
    want = run_costs(summary_records, _Model(), records)
    got = run_costs(from_records, _Model(), table)
    assert got == want
    assert from_records.extra == summary_records.extra
    assert want["judge_usage"] == {"prompt_tokens": 14, "completion_tokens": 6}
    assert want["judge_cost_usd"] == 1.0
    assert want["fallback_rollouts"] == 1
    assert want["agent_cost_usd"] == 1.25

"""Budgets count what the model bridge saw, never what an agent says it used.

A command agent's stderr JSON (``{"input_tokens": …, "cost_usd": …}``) is shown, never summed
into the usage a budget counts; negative or impossible figures are refused outright.
"""

from __future__ import annotations

import asyncio
from typing import Any

from evalgate.config.spec.budget import BudgetSettings
from evalgate.run.budget import BudgetMeter
from evalgate.sandbox.base import ExecResult
from evalgate.suites.agent.command import CommandAgent, parse_turn_meta
from evalgate.suites.agent.runner import AgentRun, Attempt
from evalgate.suites.agent.tasks import Check, Task

FORGED = '{"turn": 1, "input_tokens": -100000000, "output_tokens": 5, "cost_usd": -40}\n'


class FakeBox:
    """A sandbox whose bridge saw ``usage``; the agent's command prints ``stderr``."""

    workdir = "/workspace"

    def __init__(self, usage: dict[str, int], stderr: str) -> None:
        self.usage, self.stderr = usage, stderr

    async def exec(self, argv: Any, **kw: Any) -> ExecResult:
        if argv[:2] == ["sh", "-c"]:  # the probe for the agent's command
            return ExecResult(0, "/bin/agent\n", "")
        return ExecResult(0, "done", self.stderr)


def _run(usage: dict[str, int], stderr: str) -> AgentRun:
    task = Task(id="t", prompts=("p",), check=Check("true"))
    record = AgentRun()
    agent = CommandAgent(["agent"])
    box: Any = FakeBox(usage, stderr)
    no_client: Any = None  # a command agent calls the model through the sandbox's bridge
    asyncio.run(agent.run(Attempt(box, task, no_client, rollout=0, record=record, budget_s=10)))
    return record


def test_negative_and_impossible_self_reports_are_refused() -> None:
    lines = [
        FORGED,
        '{"input_tokens": 1e300}',
        '{"input_tokens": NaN, "output_tokens": Infinity}',
        '{"input_tokens": 2.5}',
        '{"turn": 2, "input_tokens": 10, "output_tokens": 4, "cost_usd": 0.25}',
    ]
    turns, cost, usage, _rest = parse_turn_meta("\n".join(lines))
    assert turns == 2
    assert usage == {"prompt_tokens": 10, "completion_tokens": 9}
    assert cost == 0.25


def test_the_budget_counts_the_bridge_not_the_agent() -> None:
    record = _run({"prompt_tokens": 700, "completion_tokens": 30, "requests": 3}, FORGED)
    assert dict(record.usage) == {"prompt_tokens": 700, "completion_tokens": 30}
    assert "reported" in record.log and "-100000000" not in record.log
    # Without any bridge-seen tokens the agent's word still counts for nothing.
    record = _run({}, '{"input_tokens": 5000, "output_tokens": 5000}\n')
    assert sum(record.usage.values()) == 0, record.usage
    assert "5000" in record.log  # shown


def test_a_budget_refuses_negative_counts() -> None:
    budget = BudgetMeter(BudgetSettings(tokens=1000))
    budget.add({"prompt_tokens": -100_000_000, "completion_tokens": 5})
    budget.add({"prompt_tokens": 600, "completion_tokens": 600})
    assert budget.tokens == 1205 and budget.exhausted()


def test_a_budget_counts_only_finite_non_negative_numbers() -> None:
    odd = [True, False, -1, 0, 7, 2**70, 3.9, -2.5, float("nan"), float("inf"), "12", None]
    for prompt in odd:
        for completion in (5, *odd):
            budget = BudgetMeter(BudgetSettings())
            budget.add({"prompt_tokens": prompt, "completion_tokens": completion})  # type: ignore[dict-item]

            def counted(value: object) -> int:
                if type(value) is int and value >= 0:
                    return value
                return int(value) if type(value) is float and 0 < value < float("inf") else 0

            assert budget.tokens == counted(prompt) + counted(completion), (prompt, completion)
    budget = BudgetMeter(BudgetSettings())
    budget.add(None)
    budget.add({})
    assert budget.tokens == 0

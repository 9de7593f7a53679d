"""Every evals.yaml field is classified as the candidate (the PR's) or the exam (the base's)."""

from __future__ import annotations

import types
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

from evalgate.config.load import EvalsFile
from evalgate.config.spec import AgentBenchmark, AgentSpec, Benchmark, Model, SandboxSpec
from evalgate.config.split import FIELDS, field_role, merge_benchmark


def _models(tp: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's type holds (through Annotated, unions, lists, dicts)."""
    if get_origin(tp) is Annotated:
        return _models(get_args(tp)[0])
    if get_origin(tp) in (Union, types.UnionType, list, dict, tuple):
        return [m for arg in get_args(tp) for m in _models(arg)]
    return [tp] if isinstance(tp, type) and issubclass(tp, BaseModel) else []


def _paths(members: list[type[BaseModel]], prefix: str) -> set[str]:
    out: set[str] = set()
    for member in members:
        for name, info in member.model_fields.items():
            path = f"{prefix}{name}"
            out.add(path)
            out |= _paths(_models(info.annotation), path + ".")
    return out


def schema_paths() -> set[str]:
    """Every field path of evals.yaml, benchmarks and models as resolved (not as entries)."""
    top = {n for n in EvalsFile.model_fields if n not in ("models", "benchmarks")}
    out = {p for p in _paths([EvalsFile], "") if p.split(".")[0] in top}
    return out | _paths(_models(Model), "models[].") | _paths(_models(Benchmark), "benchmarks[].")


def test_every_field_is_the_candidate_or_the_exam() -> None:
    paths = schema_paths()
    mixed = {p for p in paths if any(k.startswith(p + ".") for k in FIELDS)}  # e.g. `agent`
    unclassified = sorted(p for p in paths - mixed if field_role(p) is None)
    assert unclassified == [], f"classify these in evalgate/config/split.py FIELDS: {unclassified}"
    stale = sorted(k for k in FIELDS if k not in paths)
    assert stale == [], f"FIELDS names fields the schema does not have: {stale}"


def test_a_new_field_is_caught_unclassified() -> None:
    class Extended(AgentSpec):
        new_knob: int = 0

    paths = _paths([Extended], "benchmarks[].agent.")
    assert [p for p in paths if field_role(p) is None] == ["benchmarks[].agent.new_knob"]


def test_merge_keeps_the_exam_and_takes_the_candidate() -> None:
    base = AgentBenchmark(kind="agent", name="a", tasks="/base/tasks",
                          sandbox=SandboxSpec(timeout_s=120))  # fmt: skip
    pr = AgentBenchmark(
        kind="agent",
        name="a",
        tasks="/pr/tasks",
        sandbox=SandboxSpec(timeout_s=121, verifier_network=True),
        agent=AgentSpec(type="command", command=["./agent"], max_turns=999),
        eval={"max_error_rate": 0.9, "max_retries": 0},
        sampling={"temperature": 0.7},
    )
    merged = merge_benchmark(base, pr)
    assert merged.tasks == "/base/tasks" and merged.sandbox == base.sandbox
    assert merged.eval == base.eval and merged.agent.max_turns == base.agent.max_turns
    assert merged.agent.command == ["./agent"] and merged.agent.type == "command"
    assert merged.sampling.temperature == 0.7

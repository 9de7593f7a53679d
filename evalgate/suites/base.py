"""The benchmark interface the engine runs: items, and one scored rollout at a time."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Protocol

from evalgate.errors import ConfigError

__all__ = ["SUITES", "Item", "Outcome", "Suite", "build_suite", "build_suites"]


@dataclass(frozen=True)
class Item:
    """One benchmark item. ``id`` is stable across runs: paired comparisons join on it."""

    id: str
    prompt: str
    answer: str
    group: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """What one rollout produced, before the engine adds ids and timing."""

    prompt: list[dict[str, str]]
    completion: str
    reward: float
    metrics: dict[str, float]
    usage: dict[str, int]
    cost_usd: float | None = None  # by the rollout's own account (a command agent's report)


class Suite(Protocol):
    """A runnable benchmark. Implementations must be safe to call concurrently."""

    name: str  # the benchmark's name, as in evals.yaml
    items: list[Item]  # the items to run, in order (num_examples already applied)

    async def rollout(self, item: Item, index: int, client: Any) -> Outcome:
        """Run rollout ``index`` of ``item`` against ``client``; raise on infrastructure failure."""
        ...


# kind → "module:Class"; each class has ``from_spec(spec) -> Suite``. Imported lazily: a kind's
# heavy dependencies (datasets, verifiers, sandboxes) load only when a benchmark uses it.
SUITES: dict[str, str] = {
    "arith": "evalgate.suites.qa:QASuite",
    "jsonl": "evalgate.suites.qa:QASuite",
    "hf": "evalgate.suites.qa:QASuite",
    "humaneval": "evalgate.suites.humaneval:HumanEvalSuite",
    "agent": "evalgate.suites.agent.suite:AgentSuite",
    "verifiers": "evalgate.suites.verifiers:VerifiersSuite",
}


def build_suite(spec: Any) -> Suite:
    """The suite for a resolved benchmark config."""
    target = SUITES.get(spec.kind)
    if target is None:
        raise ConfigError(f"benchmark {spec.name!r}: unknown kind {spec.kind!r}")
    module_name, _, cls_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"benchmark {spec.name!r}: kind {spec.kind!r} needs {exc.name!r}, which is not "
            "installed (see the README for the extra that provides it)"
        ) from None
    return getattr(module, cls_name).from_spec(spec)


def build_suites(spec: Any) -> list[Suite]:
    """One suite per agent variant (named ``{benchmark}.{variant}``, same item ids, so variants
    compare item by item); one suite otherwise."""
    if spec.kind == "agent" and getattr(spec, "variants", None):
        from evalgate.suites.agent.suite import AgentSuite

        return list(AgentSuite.for_variants(spec))
    return [build_suite(spec)]

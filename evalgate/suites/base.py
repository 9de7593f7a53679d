"""The benchmark interface the engine runs: items, and one scored rollout at a time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Item", "Outcome", "Suite", "build_suite"]


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


class Suite(Protocol):
    """A runnable benchmark. Implementations must be safe to call concurrently."""

    name: str  # the benchmark's name, as in evals.yaml
    items: list[Item]  # the items to run, in order (num_examples already applied)

    async def rollout(self, item: Item, index: int, client: Any) -> Outcome:
        """Run rollout ``index`` of ``item`` against ``client``; raise on infrastructure failure."""
        ...


def build_suite(spec: Any) -> Suite:
    """The suite for a resolved benchmark config (imports each kind lazily)."""
    if spec.kind in ("arith", "jsonl", "hf"):
        from evalgate.suites.qa import QASuite

        return QASuite.from_spec(spec)
    raise ValueError(f"unknown benchmark kind {spec.kind!r}")

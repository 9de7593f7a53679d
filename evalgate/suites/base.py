"""The benchmark interface the engine runs: items, and one scored rollout at a time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from evalgate._lazy import load_entry
from evalgate.errors import ConfigError

if TYPE_CHECKING:
    from evalgate.config.spec import AgentVariant, Benchmark
    from evalgate.serve.client import ChatClient, Reply

__all__ = ["SUITES", "Item", "Outcome", "Suite", "SuiteDefaults", "build_suite", "build_suites"]


@dataclass(frozen=True)
class Item:
    """One benchmark item. ``id`` is stable across runs: paired comparisons join on it, and pair
    only items with the same content hash (prompt, answer and ``exam``)."""

    id: str
    prompt: str
    answer: str
    group: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    # A digest (``suites.identity``) of whatever else decides this item's score: a task's check
    # and files, a verifier, an image's build context, a data row's other columns. Empty when
    # the prompt and answer are all of it (such an item keeps the hash it always had).
    exam: str = ""
    # Never hashable: the generated __hash__ hashed `fields`, a dict, and always raised. Said
    # here, it is not compiled at every start-up (dataclasses exec each generated method).
    __hash__ = None  # type: ignore[assignment]


# init=False: the class writes its own __init__ (below); the dataclass's would be compiled
# at import only to be discarded.
@dataclass(frozen=True, init=False)
class Outcome:
    """What one rollout produced, before the engine adds ids and timing."""

    prompt: list[dict[str, str]]
    completion: str
    reward: float
    metrics: dict[str, float]
    usage: dict[str, int]
    timing: dict[str, float] = field(default_factory=dict)  # the suite's own stages, seconds
    reason: str | None = None  # why this reward (a sandboxed check's verdict), for the journal
    cost_usd: float | None = None  # by the rollout's own account (a command agent's report)
    judge: Mapping[str, object] | None = None  # a model-graded scorer's judgement (score, usage…)
    # Never hashable: the generated __hash__ hashed `metrics` and `usage`, dicts, and always
    # raised. Said here, it is not compiled at every start-up (dataclasses exec each method).
    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self,
        prompt: list[dict[str, str]],
        completion: str,
        reward: float,
        metrics: dict[str, float],
        usage: dict[str, int],
        timing: dict[str, float] | None = None,
        reason: str | None = None,
        cost_usd: float | None = None,
        judge: Mapping[str, object] | None = None,
    ) -> None:
        # The dataclass's own __init__ of a frozen class sets each field through
        # object.__setattr__, about 2 µs for these nine, once a rollout: the fields go into the
        # instance's dict instead (frozen all the same: assignment still raises). A subclass
        # (VerifiersOutcome) gets the dataclass's own. tests/test_engine.py holds this
        # signature to the fields.
        fields = self.__dict__
        fields["prompt"] = prompt
        fields["completion"] = completion
        fields["reward"] = reward
        fields["metrics"] = metrics
        fields["usage"] = usage
        fields["timing"] = {} if timing is None else timing  # the field's default_factory
        fields["reason"] = reason
        fields["cost_usd"] = cost_usd
        fields["judge"] = judge

    @classmethod
    def of_reply(
        cls,
        prompt: list[dict[str, str]],
        reply: Reply,
        reward: float,
        *,
        metric: str = "accuracy",
        reason: str | None = None,
        judge: Mapping[str, object] | None = None,
    ) -> Outcome:
        """A single-turn rollout: the model's ``reply`` to ``prompt``, scored ``reward``, which
        is also its one metric (qa, HumanEval)."""
        # Positional, in field order (prompt, completion, reward, metrics, usage, timing,
        # reason, cost_usd, judge): once per rollout, and keywords cost a third more.
        return cls(
            prompt, reply.text, reward, {metric: reward}, reply.usage, {}, reason, None, judge
        )


class Suite(Protocol):
    """A runnable benchmark. Implementations must be safe to call concurrently."""

    name: str  # the benchmark's name, as in evals.yaml ("{benchmark}.{variant}" for a variant)
    items: list[Item]  # the items to run, in order (num_examples already applied)
    variant: AgentVariant | None  # the agent variant this suite runs; fingerprinted

    async def rollout(self, item: Item, index: int, client: ChatClient) -> Outcome:
        """Run rollout ``index`` of ``item`` against ``client``; raise on infrastructure failure."""
        ...

    def artifacts(self) -> list[Path]:
        """Files the suite produced that belong in the run directory (e.g. inspect's log)."""
        ...

    def plan(self, pairs: list[tuple[Item, int]]) -> None:
        """The (item, rollout) pairs the engine is about to ask for, before it asks: a suite
        that runs its items as one batch (inspect) runs these, not every item (a resumed run,
        a sequential look)."""
        ...

    @property
    def unenforced_limits(self) -> list[str]:
        """Sandbox limits this runner cannot enforce (the scorecard names them)."""
        ...

    def close(self) -> None:
        """Release what the suite holds (a worker process) once every run of it is done; the
        pipeline calls it, also after a failure. Idempotent."""
        ...


class SuiteDefaults:
    """What most suites share: no variant, no artifacts, no sandbox limits left unenforced.
    Suites inherit it and override."""

    variant: AgentVariant | None = None

    @property
    def unenforced_limits(self) -> list[str]:
        return []

    def artifacts(self) -> list[Path]:
        return []

    def plan(self, pairs: list[tuple[Item, int]]) -> None:
        return None  # one rollout at a time: nothing to prepare

    def close(self) -> None:
        return None  # nothing held between rollouts


# kind → "module:Class"; each class has ``from_spec(spec) -> Suite``. Imported lazily: a kind's
# heavy dependencies (datasets, verifiers, sandboxes) load only when a benchmark uses it.
SUITES: dict[str, str] = {
    "arith": "evalgate.suites.qa:QASuite",
    "jsonl": "evalgate.suites.qa:QASuite",
    "hf": "evalgate.suites.qa:QASuite",
    "humaneval": "evalgate.suites.humaneval:HumanEvalSuite",
    "agent": "evalgate.suites.agent.suite:AgentSuite",
    "verifiers": "evalgate.suites.verifiers:VerifiersSuite",
    "inspect": "evalgate.suites.inspect_task:InspectSuite",
}


def _suite_class(spec: Benchmark) -> Any:
    target = SUITES.get(spec.kind)
    if target is None:
        raise ConfigError(f"benchmark {spec.name!r}: unknown kind {spec.kind!r}")
    return load_entry(
        target, what=f"benchmark {spec.name!r}: kind {spec.kind!r}", error=ConfigError
    )


def build_suite(spec: Benchmark, sandboxes: Any = None) -> Suite:
    """The suite for a resolved benchmark config. ``sandboxes`` (:class:`evalgate.sandbox.
    Sandboxes`): the run's backends, for the kinds that execute code; every kind's ``from_spec``
    takes it."""
    return _suite_class(spec).from_spec(spec, sandboxes=sandboxes)


def build_suites(spec: Benchmark, sandboxes: Any = None) -> list[Suite]:
    """One suite per agent variant (named ``{benchmark}.{variant}``, same item ids, so variants
    compare item by item); one suite otherwise. Through the registry, like every kind: this
    module never imports a suite implementation (they import it)."""
    if spec.kind == "agent" and getattr(spec, "variants", None):
        suites = list(_suite_class(spec).for_variants(spec, sandboxes=sandboxes))
    else:
        suites = [build_suite(spec, sandboxes)]
    _check_size(spec, suites[0])
    return suites


def _check_size(spec: Benchmark, suite: Suite) -> None:
    """Every kind takes the first ``num_examples`` items; a promise of more than the benchmark
    has must not shrink silently to what there is (the scorecard would claim the larger n)."""
    from evalgate.suites.datasets import DataError  # it imports this module

    wanted, have = spec.eval.num_examples, len(suite.items)
    if wanted is not None and have < wanted:
        raise DataError(
            f"{wanted} items asked for, but benchmark {spec.name!r} has {have}; "
            f"set eval.num_examples to at most {have}, or null for all",
            field="eval.num_examples",
        )

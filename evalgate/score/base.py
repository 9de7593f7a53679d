"""What every judge evalgate serves has in common, whoever reads its verdicts.

Two kinds of judge grade a run: evalgate's own (:class:`~evalgate.score.judge.Judge`,
``scorer: {type: judge}``), which renders the prompt and reads the verdict itself, and the judge
of code that grades in another process (:class:`~evalgate.score.relay.Grader`: inspect's
``grader`` role, a verifiers environment's judges), asked through the relay. Both are served
and bound by the run alike (``client``: a ChatClient on the judge's endpoint), priced alike, and
count their calls alike; that is this class. A judge that gives no usable verdict is
:class:`JudgeFailed` for both: the rollout is an error of kind ``judge_*``, never a 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypedDict, TypeVar

from evalgate.errors import InfraError

if TYPE_CHECKING:  # the HTTP client loads with a run: `validate` builds suites without it
    from collections.abc import Callable, Mapping

    from evalgate.config.spec import GraderSpec, JudgeScorer
    from evalgate.serve.client import ChatClient, Reply, RequestFailed

__all__ = [
    "JudgeBase",
    "JudgeFailed",
    "JudgeRecord",
    "JudgeSample",
    "JudgeStats",
    "failure",
    "judge_identity",
    "no_usage",
]


class JudgeStats(TypedDict):
    """A judge's calls over a run (metadata.json's ``judge``, with its client's counts)."""

    calls: int
    cache_hits: int


class JudgeSample(TypedDict, total=False):
    """One judgement: its score in [0, 1] (None: unreadable; pairwise: the preference for the
    PR), the judge's reasoning and whole reply, and pairwise the order it was shown."""

    score: float | None
    reasoning: str
    raw: str
    order: str


class JudgeRecord(TypedDict, total=False):
    """A rollout's ``judge`` entry in results.jsonl: what the judge said and cost."""

    score: float
    note: str  # why no judge was asked (a pairwise tie by construction)
    samples: list[JudgeSample]  # evalgate's own judge's; relayed: none (the grading code read them)
    usage: dict[str, int]  # the judge's tokens
    cost_usd: float | None
    orders: dict[str, float]  # pairwise: the preference in each order
    consistent: bool  # pairwise: both orders gave the same preference
    worse_order: float  # pairwise: the PR's preference in its worse order
    calls: int  # relayed: the grading code's calls, and how many the cache answered
    cache_hits: int
    replies: list[str]  # relayed: the judge's replies, as the grading code read them


class JudgeFailed(InfraError):
    """The judge gave no usable verdict: the rollout is an error of ``kind``, never a 0.
    ``partial``: what the record keeps all the same (the candidate's prompt, completion and
    usage, the judge's raw replies). An InfraError, not a RequestFailed: this module must not
    import the HTTP client (`validate` builds suites without loading it)."""

    def __init__(self, kind: str, detail: str, partial: Mapping[str, object]) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.partial: dict[str, object] = dict(partial)


def no_usage() -> dict[str, int]:
    """Tokens, as the OpenAI API counts them: none yet."""
    return {"prompt_tokens": 0, "completion_tokens": 0}


def failure(exc: RequestFailed) -> tuple[str, str]:
    """(kind, detail) of a judge call that failed for good: the kind is ``judge_`` + this."""
    return exc.kind, str(exc).partition(": ")[2] or exc.kind


SpecT = TypeVar("SpecT", bound="JudgeScorer | GraderSpec")


@dataclass
class JudgeBase(Generic[SpecT]):
    """A judge: its config (``spec``), its client (bound by the run before the first rollout,
    unbound after), its price (USD per input and output token; None: unknown) and its counts."""

    spec: SpecT
    client: ChatClient | None = None
    price: tuple[float, float] | None = (0.0, 0.0)
    stats: JudgeStats = field(default_factory=lambda: JudgeStats(calls=0, cache_hits=0))

    def reset_stats(self) -> None:
        """Counts from zero: one judge serves every model of a run, each counted on its own."""
        self.stats = JudgeStats(calls=0, cache_hits=0)

    def cost(self, usage: Mapping[str, int]) -> float | None:
        """What ``usage`` of this judge cost, in USD (None: its price is unknown)."""
        if self.price is None:
            return None
        return usage["prompt_tokens"] * self.price[0] + usage["completion_tokens"] * self.price[1]

    async def ask(
        self,
        messages: list[dict[str, str]],
        *,
        rollout: int,
        usage: dict[str, int],
        response_format: dict[str, object] | None = None,
        keep: Callable[[str], bool] | None = None,
        complete_only: bool = False,
    ) -> Reply:
        """One judge call through the bound client (its retries, concurrency and cache),
        counted: in :attr:`stats`, and its tokens added to ``usage``. Raises RequestFailed."""
        assert self.client is not None, "the run binds the judge's client first"
        reply = await self.client.chat(
            messages,
            rollout=rollout,
            keep=keep,
            complete_only=complete_only,
            response_format=response_format,
        )
        self.stats["calls"] += 1
        self.stats["cache_hits"] += int(reply.cached)
        for k in usage:
            usage[k] += int(reply.usage.get(k) or 0)
        return reply


def judge_identity(spec: JudgeScorer | GraderSpec) -> str:
    """What identifies a judge in cache keys, stably across runs (not its port): backend,
    model id and a digest of its model config. Prompt and sampling are in the request body."""
    import hashlib
    import json

    model = spec.model
    cfg = json.dumps(
        model.model_dump(mode="json", exclude={"name"}), sort_keys=True, separators=(",", ":")
    )
    digest = hashlib.sha256(cfg.encode("utf-8")).hexdigest()[:16]
    return "\n".join(["judge", model.backend, model.model_id, digest])

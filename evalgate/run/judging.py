"""A judged suite's judge bound to its own client for one run (its sampling, the benchmark's
retries and concurrency, the run's cache under the judge's identity), and what it needs from
the baseline: what the session and `evalgate judge-check` / `doctor` share."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from evalgate.run.cache import ResponseCache
from evalgate.run.rundir import LoadedRun
from evalgate.serve import Endpoint
from evalgate.serve.client import ChatClient
from evalgate.suites import Suite

if TYPE_CHECKING:
    from evalgate.config.spec import EvalSettings, GraderSpec, JudgeScorer

__all__ = ["bound_judge", "judge_client"]


def judge_client(
    spec: JudgeScorer | GraderSpec,
    endpoint: Endpoint,
    ev: EvalSettings,
    cache: ResponseCache | None,
) -> ChatClient:
    """A judge's own client: its sampling, the benchmark's retries, timeout and concurrency,
    ``cache`` under the judge's identity (a run's judge and `evalgate judge-check` alike)."""
    from evalgate.score.base import judge_identity

    return ChatClient(
        endpoint,
        spec.sampling,
        timeout_s=ev.request_timeout_s,
        max_retries=ev.max_retries,
        max_concurrent=ev.max_concurrent,
        adaptive=ev.adaptive_concurrency,
        cache=cache,
        cache_identity=judge_identity(spec),
        max_reply_bytes=int(ev.max_reply_mib * (1 << 20)),
    )


@contextlib.asynccontextmanager
async def bound_judge(
    suite: Suite,
    endpoint: Endpoint | None,
    ev: EvalSettings,
    cache: ResponseCache | None,
    stats: dict[str, Any] | None,
    baseline: LoadedRun | None = None,
) -> AsyncIterator[None]:
    """Bind a judged suite's judge to its own client for the run: the judge's sampling, the
    benchmark's retries, timeout and concurrency, the run's response cache under the judge's
    identity. Its calls and cache hits go to ``stats["judge"]``."""
    judge = getattr(suite, "judge", None)
    if judge is None or endpoint is None:
        yield
        return
    from evalgate.score.base import JudgeBase
    from evalgate.score.judge import Judge
    from evalgate.score.relay import Grader, JudgeRelay

    assert isinstance(judge, JudgeBase), f"a suite's judge is a JudgeBase, not {type(judge)}"
    # One suite (and judge) serves every model of the run: this run's baseline and counts only.
    if isinstance(judge, Judge):
        pairwise = baseline is not None and judge.spec.mode == "pairwise"
        judge.baseline = _baseline_completions(baseline) if baseline and pairwise else None
    judge.reset_stats()
    async with judge_client(judge.spec, endpoint, ev, cache if ev.cache else None) as client:
        judge.client = client
        try:
            async with contextlib.AsyncExitStack() as relayed:
                if isinstance(judge, Grader):  # graded in another process: through the relay
                    judge.relay = await relayed.enter_async_context(JudgeRelay(judge))
                yield
            if isinstance(judge, Judge) and judge.labels:  # measured with the judge that graded
                from evalgate.score.labels import measure

                graded = judge.stats.copy()
                agreement = await measure(judge, judge.labels)
                agreement.pop("details")
                judge.stats = graded  # the run's own judgements, not the labelled set's
                if stats is not None:
                    stats["judge_agreement"] = agreement
        finally:
            judge.client = None
            if isinstance(judge, Grader):
                judge.relay = None
            if stats is not None:
                stats["judge"] = {**client.stats.as_dict(), **judge.stats}


def _baseline_completions(baseline: LoadedRun) -> dict[str, list[str]]:
    """The baseline's completions by item and rollout, for a pairwise judge (errored rollouts
    left out: there is nothing to compare with)."""
    by_rollout: dict[str, list[tuple[int, str]]] = {}
    for rec in baseline.full_records():  # the table keeps no texts: read them from the journal
        item, rollout, text = rec["example_id"], rec.get("rollout", 0), rec.get("completion")
        if (
            rec.get("error") is None
            and isinstance(text, str)
            and isinstance(item, str)  # load_run checked the id and the rollout
            and isinstance(rollout, int)
        ):
            by_rollout.setdefault(item, []).append((rollout, text))
    # In rollout order (a stable sort: as sorting the whole journal by rollout would give).
    return {
        item: [text for _, text in sorted(texts, key=lambda t: t[0])]
        for item, texts in by_rollout.items()
    }

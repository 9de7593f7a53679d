"""A judged suite's judge bound to its own client for one run (its sampling, the benchmark's
retries and concurrency, the run's cache under the judge's identity), and what it needs from
the baseline: what the session and `evalgate judge-check` / `doctor` share."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from evalgate.run.cache import ResponseCache
from evalgate.run.rundir import LoadedRun
from evalgate.serve import Endpoint
from evalgate.serve.client import ChatClient
from evalgate.suites import Suite

__all__ = ["bound_judge", "judge_client"]


def judge_client(spec: Any, endpoint: Endpoint, ev: Any, cache: ResponseCache | None) -> ChatClient:
    """A judge's own client: its sampling, the benchmark's retries, timeout and concurrency,
    ``cache`` under the judge's identity (a run's judge and `evalgate judge-check` alike)."""
    from evalgate.score.judge import judge_identity

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
    ev: Any,
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
    # One suite (and judge) serves every model of the run: this run's baseline and counts only.
    pairwise = baseline is not None and getattr(judge.spec, "mode", None) == "pairwise"
    judge.baseline = _baseline_completions(baseline) if pairwise else None  # type: ignore[arg-type]
    judge.stats = {"calls": 0, "cache_hits": 0}
    async with judge_client(judge.spec, endpoint, ev, cache if ev.cache else None) as client:
        judge.client = client
        try:
            async with contextlib.AsyncExitStack() as relayed:
                if hasattr(judge, "relay"):  # graded in another process: through the relay
                    from evalgate.score.relay import JudgeRelay

                    judge.relay = await relayed.enter_async_context(JudgeRelay(judge))
                yield
            if judge.labels:  # measured with the judge that graded, for the scorecard
                from evalgate.score.labels import measure

                graded = dict(judge.stats)
                agreement = await measure(judge, judge.labels)
                agreement.pop("details")
                judge.stats.update(graded)  # the run's own judgements, not the labelled set's
                if stats is not None:
                    stats["judge_agreement"] = agreement
        finally:
            judge.client = None
            if hasattr(judge, "relay"):
                judge.relay = None
            if stats is not None:
                stats["judge"] = {**client.stats.as_dict(), **judge.stats}


def _baseline_completions(baseline: LoadedRun) -> dict[str, list[str]]:
    """The baseline's completions by item and rollout, for a pairwise judge (errored rollouts
    left out: there is nothing to compare with)."""
    by_rollout: dict[str, list[tuple[int, str]]] = {}
    for rec in baseline.full_records():  # the table keeps no texts: read them from the journal
        if rec.get("error") is None and isinstance(rec.get("completion"), str):
            by_rollout.setdefault(rec["example_id"], []).append(
                (rec.get("rollout", 0), rec["completion"])
            )
    # In rollout order (a stable sort: as sorting the whole journal by rollout would give).
    return {
        item: [text for _, text in sorted(texts, key=lambda t: t[0])]
        for item, texts in by_rollout.items()
    }

"""Run a suite's items × rollouts with bounded concurrency, journaling every result.

A fixed pool of workers pulls (item, rollout) pairs from one iterator, instead of one task per
rollout behind a semaphore: with thousands of rollouts that keeps memory and scheduling flat.
Each finished rollout is written to the journal at once (flushed), so an interrupted run keeps
what it computed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

from evalgate.client import RequestFailed
from evalgate.errors import InfraError
from evalgate.fingerprint import item_hash
from evalgate.suites.base import Item, Suite

__all__ = ["run_suite"]


def _record(item: Item, index: int, answer: str) -> dict[str, Any]:
    return {
        "example_id": item.id,
        "item_hash": item_hash(item.prompt, item.answer),
        "rollout": index,
        "group": item.group,
        "prompt": None,
        "completion": None,
        "answer": answer,
        "reward": None,
        "metrics": {},
        "usage": {"prompt_tokens": 0, "completion_tokens": 0},
        "timing": {},
        "error": None,
    }


async def _one(suite: Suite, client: Any, item: Item, index: int) -> dict[str, Any]:
    rec = _record(item, index, item.answer)
    started = time.time()
    t0 = time.perf_counter()
    try:
        out = await suite.rollout(item, index, client)
    except (RequestFailed, InfraError) as exc:
        # An infrastructure failure is counted as an error, never scored as a 0.
        rec["error"] = str(exc)
    else:
        rec.update(
            prompt=out.prompt,
            completion=out.completion,
            reward=out.reward,
            metrics=out.metrics,
            usage=out.usage,
        )
    rec["timing"] = {
        "start": round(started, 3),
        "latency_ms": round((time.perf_counter() - t0) * 1e3, 1),
    }
    return rec


async def run_suite(
    suite: Suite,
    client: Any,
    *,
    rollouts: int,
    max_concurrent: int,
    journal: IO[str] | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """All rollouts of ``suite``; returned in (item order, rollout) order."""
    order = {item.id: i for i, item in enumerate(suite.items)}
    work: Iterator[tuple[Item, int]] = ((it, r) for it in suite.items for r in range(rollouts))
    results: list[dict[str, Any]] = []

    async def worker() -> None:
        for item, index in work:  # a shared iterator: each pair is taken by exactly one worker
            rec = await _one(suite, client, item, index)
            results.append(rec)
            if journal is not None:
                journal.write(json.dumps(rec, ensure_ascii=False) + "\n")
                journal.flush()
            if on_result is not None:
                on_result(rec)

    n_workers = max(1, min(max_concurrent, len(suite.items) * rollouts))
    await asyncio.gather(*(worker() for _ in range(n_workers)))
    results.sort(key=lambda r: (order[r["example_id"]], r["rollout"]))
    return results

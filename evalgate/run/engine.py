"""Run a suite's items × rollouts with bounded concurrency, journaling every result.

A fixed pool of workers pulls (item, rollout) pairs from one iterator, instead of one task per
rollout behind a semaphore: with thousands of rollouts that keeps memory and scheduling flat.

Each finished rollout goes to the journal (results.jsonl). Lines are written and flushed in
batches — every ``flush_every`` records, and at most ``flush_interval_s`` after a record finished
— because a flush per record costs more than the rest of a fast rollout's bookkeeping. The batch
is always written on the way out, errors, Ctrl-C and cancellation included, so a clean exit loses
nothing; kill -9 loses at most the last batch, which a resumed run computes again
(:mod:`evalgate.run.journal`, ``skip=``).

With a budget meter (:mod:`evalgate.run.budget`), each worker checks it before starting a rollout:
once a cap is reached no new rollout starts, the ones in flight finish and are journaled, and the
pairs never started are left for ``evalgate resume``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping
from collections.abc import Set as AbstractSet
from typing import IO, TYPE_CHECKING, Any

from evalgate.errors import InfraError, secret_redactor
from evalgate.run.fingerprint import item_hash as _item_hash  # one per item, not per rollout
from evalgate.run.rollouts import RolloutTable
from evalgate.run.scored import unusable
from evalgate.serve import served
from evalgate.serve.breaker import EndpointDown
from evalgate.serve.client import RequestFailed, dumps
from evalgate.suites.base import Item, Outcome, Suite

if TYPE_CHECKING:
    from evalgate.run.budget import BudgetMeter
    from evalgate.serve.client import ChatClient

__all__ = ["run_suite"]


class _Journal:
    """Buffered lines over a text file: written by count or age, and on close."""

    def __init__(self, fh: IO[str], every: int, interval_s: float) -> None:
        self.fh = fh
        self.every = max(1, every)
        self.interval_s = interval_s
        self.lines: list[bytes] = []  # encoded once, joined and written as bytes
        self._timer: asyncio.TimerHandle | None = None
        self._error: InfraError | None = None  # a failed timed flush, raised at the next add

    def add(self, rec: Mapping[str, object]) -> None:
        if self._error is not None:
            raise self._error  # disk full or gone: fail the run, don't drop results quietly
        self.lines.append(dumps(rec))
        if len(self.lines) >= self.every or self.interval_s <= 0:
            self.flush()
        elif self._timer is None:
            # One timer per batch, not per record: bounds how long a finished rollout can sit
            # in memory when results trickle in (a slow model).
            self._timer = asyncio.get_running_loop().call_later(self.interval_s, self._timed)

    def _timed(self) -> None:
        self._timer = None
        try:
            self.flush()
        except InfraError as exc:
            self._error = exc

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.lines:
            try:
                _append(self.fh, b"\n".join(self.lines) + b"\n")
            except OSError as exc:  # disk full, quota, file too large, folder gone read-only
                name = getattr(self.fh, "name", None)
                raise InfraError(
                    f"cannot write {name or 'the journal'}: {exc.strerror or exc}; the journal "
                    f"keeps every complete line (free space, then {_resume_command(name)})"
                ) from exc
            self.lines.clear()  # only once written: a failed write keeps them for the next try


def _resume_command(journal: str | None) -> str:
    """The command that finishes the run whose journal is ``journal``
    ({root}/evals/{folder}/{run_id}/results.jsonl), spelled out; plain `evalgate resume` for a
    journal elsewhere (a test's)."""
    if not journal:
        return "`evalgate resume`"
    path = os.path.abspath(journal)
    run_dir = os.path.dirname(path)
    root = os.path.dirname(os.path.dirname(os.path.dirname(run_dir)))
    if os.path.basename(os.path.dirname(os.path.dirname(run_dir))) != "evals":
        return "`evalgate resume`"
    return f"`evalgate resume {os.path.basename(run_dir)} --output {root}`"


def _append(fh: IO[str], data: bytes) -> None:
    """Append whole lines or nothing: a write that fails halfway (ENOSPC after some bytes) is
    cut back, so the journal never holds a torn line that a later batch would follow."""
    try:
        fd = fh.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (a test's StringIO)
        fh.write(data.decode("utf-8"))
        fh.flush()
        return
    fh.flush()  # nothing of ours is buffered there, but keep the two views in step
    start = os.lseek(fd, 0, os.SEEK_END)
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
        raise


def _record(
    item: Item, ihash: str, index: int, out: Outcome | Exception, started: float, latency_ms: float
) -> dict[str, Any]:
    """One journal line: the rollout's outcome, or its infrastructure error (reward None).

    Built key by key, in the journal's order (example_id … error, then reason, cost_usd and
    judge where a rollout has one): once a rollout, on the request path."""
    if isinstance(out, Exception):
        return _error_record(item, ihash, index, out, started, latency_ms)
    reward: float | None = out.reward
    metrics = out.metrics
    # A score that is not a number (a reward function's string, NaN) is the rollout's error
    # in the journal itself: a reader then refuses any non-numeric score as damage. The common
    # outcome (finite floats) is told apart without unusable()'s record.
    usable = type(reward) is float and reward - reward == 0.0
    if usable:
        for value in metrics.values():
            if type(value) is not float or value - value != 0.0:
                usable = False
                break
    error = None if usable else unusable({"reward": reward, "metrics": metrics})
    if error is not None:
        reward, metrics = None, {}
    timing: dict[str, object] = {"start": round(started, 3), "latency_ms": latency_ms}
    if out.timing:  # a suite's own per-stage timings
        timing["stages"] = out.timing
    rec = {
        "example_id": item.id,
        "item_hash": ihash,
        "rollout": index,
        "group": item.group,
        "prompt": out.prompt,
        "completion": out.completion,
        "answer": item.answer,
        "reward": reward,
        "metrics": metrics,
        "usage": out.usage,
        "timing": timing,
        "error": error,
    }
    if out.reason:
        rec["reason"] = out.reason
    if out.cost_usd is not None:  # only where a suite reports one: other records keep their keys
        rec["cost_usd"] = out.cost_usd
    if out.judge is not None:
        rec["judge"] = out.judge
    return rec


def _error_record(
    item: Item, ihash: str, index: int, exc: Exception, started: float, latency_ms: float
) -> dict[str, Any]:
    """The journal line of a rollout that failed: its error (reward None, never a 0). A scorer
    that failed after the model answered (a judge) keeps what it had: the completion and its
    tokens, and the judge's raw replies, for the reader of the error."""
    partial = getattr(exc, "partial", None) or {}
    rec: dict[str, Any] = {
        "example_id": item.id,
        "item_hash": ihash,
        "rollout": index,
        "group": item.group,
        "prompt": partial.get("prompt"),
        "completion": partial.get("completion"),
        "answer": item.answer,
        "reward": None,
        "metrics": {},
        "usage": partial.get("usage") or {"prompt_tokens": 0, "completion_tokens": 0},
        "timing": {"start": round(started, 3), "latency_ms": latency_ms},
        "error": str(exc),
    }
    judge = partial.get("judge")
    if judge is not None:
        rec["judge"] = judge
    return rec


def _work_plan(
    suite: Suite, rollouts: int, skip: Collection[tuple[str, int]]
) -> tuple[int, Iterator[tuple[Item, int]]]:
    """How many (item, rollout) pairs are to run, and the pairs, as workers will take them."""
    items = suite.items
    skip = skip if isinstance(skip, AbstractSet) else set(skip)  # journal.Pairs is one
    plan = getattr(suite, "plan", None)
    if plan is not None:  # the suite sees the whole plan first (a list)
        pairs = [(it, r) for it in items for r in range(rollouts) if (it.id, r) not in skip]
        plan(pairs)
        return len(pairs), iter(pairs)
    # Generated as workers take them: no list of a million pairs.
    n_pairs = len(items) * rollouts
    if not skip:  # a new run: no pair to look up, a tuple and a set probe less a rollout
        return n_pairs, ((it, r) for it in items for r in range(rollouts))
    n_pairs -= sum(1 for it in items for r in range(rollouts) if (it.id, r) in skip)
    return n_pairs, ((it, r) for it in items for r in range(rollouts) if (it.id, r) not in skip)


async def _run_workers(
    worker: Callable[[], Awaitable[None]], n_workers: int, sink: _Journal | None
) -> None:
    tasks = [asyncio.ensure_future(worker()) for _ in range(n_workers)]
    try:
        await asyncio.gather(*tasks)
    finally:
        # On an error or a cancellation, stop the other workers before the last flush, so no
        # record finishes after it; then write the batch: a clean exit loses nothing.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if sink is not None:
            sink.flush()


async def run_suite(
    suite: Suite,
    client: ChatClient,
    *,
    rollouts: int,
    max_concurrent: int,
    journal: IO[str] | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    skip: Collection[tuple[str, int]] = (),
    flush_every: int = 256,
    flush_interval_s: float = 0.5,
    budget: BudgetMeter | None = None,
    slim: bool = False,
) -> list[dict[str, Any]]:
    """Run every (item, rollout) pair not in ``skip``; records in (item order, rollout) order.

    ``skip``: (example_id, rollout) pairs already done — from
    :func:`evalgate.run.journal.resume_journal` — which are neither run nor returned.
    ``journal``: a text file each finished record is appended to (see the module docstring for
    when lines are flushed). ``on_result``: called with each record as it finishes.
    ``budget``: a :class:`evalgate.run.budget.BudgetMeter`; rollouts stop starting once it is
    exhausted, and the returned records are then a prefix of the work, not all of it.
    ``slim``: return a :class:`~evalgate.run.rollouts.RolloutTable` (what summaries read of each
    record, in finishing order; the journal has it all), so memory does not grow with prompts
    and completions.
    """
    n_pairs, work = _work_plan(suite, rollouts, skip)
    # With ``slim``, columns of what summaries read (evalgate.run.rollouts): the journal has
    # the records, and memory must not grow by a prompt and a completion per rollout.
    results: Any = RolloutTable() if slim else []
    hashes: dict[str, str] = {}  # one item_hash per item, not per rollout
    sink = _Journal(journal, flush_every, flush_interval_s) if journal is not None else None
    # An error's text is a provider's or a sandbox's words, and may echo a key; it is stored in
    # the journal, pushed with a baseline and quoted in the PR's comment.
    redact = secret_redactor(os.environ)
    rollout = suite.rollout
    perf_counter, wall_clock = time.perf_counter, time.time

    async def worker() -> None:
        # Replies another model (a fallback) served, for the rollout being run: this task's own
        # notes (served.open_notes), opened anew only once a record has kept them.
        others = served.open_notes()
        for item, index in work:  # a shared iterator: each pair is taken by exactly one worker
            if budget is not None and budget.exhausted():
                return  # this pair was not started: a resume runs it
            ihash = hashes.get(item.id)
            if ihash is None:
                ihash = hashes[item.id] = _item_hash(item.prompt, item.answer, item.exam)
            started = wall_clock()
            t0 = perf_counter()
            try:
                out: Outcome | Exception = await rollout(item, index, client)
            except EndpointDown:
                raise  # the endpoint is gone: the run stops here, it is no rollout's error
            except (RequestFailed, InfraError) as exc:
                out = exc  # an infrastructure failure: counted as an error, never scored 0
            latency_ms = round((perf_counter() - t0) * 1e3, 1)
            rec = _record(item, ihash, index, out, started, latency_ms)
            if rec["error"] is not None:
                rec["error"] = redact(rec["error"])
            if others:  # only then: every other record keeps its keys
                rec["served_by"] = others
                others = served.open_notes()  # the record keeps these: the next rollout's anew
            usage = rec["usage"]
            results.append(rec)
            if budget is not None:
                budget.add(usage)
                if "judge" in rec:  # the judge's tokens count too, at the judge's price
                    budget.add_judge(rec["judge"])
            if sink is not None:
                sink.add(rec)
            if on_result is not None:
                on_result(rec)

    await _run_workers(worker, max(1, min(max_concurrent, n_pairs)), sink)
    if not slim:  # a table stays in finishing order: what reads it does not depend on order
        order = {item.id: i for i, item in enumerate(suite.items)}
        results.sort(key=lambda r: (order[r["example_id"]], r["rollout"]))
    return results

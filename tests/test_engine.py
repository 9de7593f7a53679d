"""run_suite: ordering, skip, batched journal writes that a clean exit never loses."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import inspect
import io
import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.errors import InfraError
from evalgate.run.engine import _item_hash, run_suite
from evalgate.run.fingerprint import dataset_hash, item_hash
from evalgate.run.journal import RECORD_KEYS
from evalgate.serve import served
from evalgate.serve.base import Endpoint
from evalgate.serve.client import ChatClient, Reply, RequestFailed
from evalgate.suites.base import Item, Outcome
from tests.test_faults import SAMPLING, _suite


class FakeSuite:
    """Rollouts without HTTP: reward 1 unless the item id says "fail" (an infrastructure error).

    ``gate``: when set, rollouts wait for it after the first ``pass_first`` finished.
    """

    def __init__(self, n: int, *, gate: asyncio.Event | None = None, pass_first: int = 0) -> None:
        self.name = "fake"
        self.items = [Item(id=f"i{i}", prompt=f"p{i}", answer=str(i), group=None) for i in range(n)]
        self.gate = gate
        self.pass_first = pass_first
        self.started = 0
        self.in_flight = 0
        self.max_in_flight = 0

    async def rollout(self, item: Item, index: int, client: Any) -> Outcome:
        self.started += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.gate is not None and self.started > self.pass_first:
                await self.gate.wait()
            await asyncio.sleep(0)
            if "fail" in item.id:
                raise RequestFailed("http_500", "scripted")
            return Outcome(
                prompt=[{"role": "user", "content": item.prompt}],
                completion=f"{item.answer}/{index}",
                reward=1.0,
                metrics={"accuracy": 1.0},
                usage={"prompt_tokens": 1, "completion_tokens": 1},
            )
        finally:
            self.in_flight -= 1


def _lines(fh: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in fh.getvalue().splitlines()]


def test_records_are_complete_ordered_and_journaled() -> None:
    suite = FakeSuite(7)
    suite.items.append(Item(id="fail-1", prompt="x", answer="y", group="g"))
    journal = io.StringIO()
    seen: list[dict[str, Any]] = []
    records = asyncio.run(
        run_suite(suite, None, rollouts=3, max_concurrent=4, journal=journal, on_result=seen.append)
    )
    assert [(r["example_id"], r["rollout"]) for r in records] == [
        (it.id, k) for it in suite.items for k in range(3)
    ]
    assert all(set(r) == RECORD_KEYS for r in records)
    assert records[0]["item_hash"] == item_hash("p0", "0")
    assert records[4]["completion"] == "1/1" and records[4]["reward"] == 1.0
    failed = [r for r in records if r["error"]]
    assert len(failed) == 3 and all(r["error"] == "http_500: scripted" for r in failed)
    assert all(r["reward"] is None and r["group"] == "g" for r in failed)
    assert suite.max_in_flight <= 4
    # The journal holds exactly the records, each once; on_result saw each once.
    order = {(r["example_id"], r["rollout"]): i for i, r in enumerate(records)}
    assert sorted(_lines(journal), key=lambda r: order[r["example_id"], r["rollout"]]) == records
    assert sorted(seen, key=lambda r: order[r["example_id"], r["rollout"]]) == records


def test_skip_runs_only_the_missing_pairs() -> None:
    suite = FakeSuite(5)
    skip = {("i0", 0), ("i0", 1), ("i3", 1), ("unknown", 0), ("i1", 9)}
    journal = io.StringIO()
    records = asyncio.run(
        run_suite(suite, None, rollouts=2, max_concurrent=3, journal=journal, skip=skip)
    )
    ran = [(r["example_id"], r["rollout"]) for r in records]
    assert ran == [(f"i{i}", k) for i in range(5) for k in range(2) if (f"i{i}", k) not in skip]
    assert suite.started == 7 and len(_lines(journal)) == 7


@pytest.mark.parametrize("flush_every", [1, 5, 1000])
def test_cancelled_run_keeps_every_finished_rollout(flush_every: int) -> None:
    # Ctrl-C / SIGTERM cancel the run: whatever finished must be in the journal, once.
    async def go() -> tuple[list[dict[str, Any]], io.StringIO]:
        gate = asyncio.Event()  # never set: rollouts after the first 9 hang
        suite = FakeSuite(20, gate=gate, pass_first=9)
        journal = io.StringIO()
        seen: list[dict[str, Any]] = []
        task = asyncio.create_task(
            run_suite(
                suite,
                None,
                rollouts=1,
                max_concurrent=4,
                journal=journal,
                on_result=seen.append,
                flush_every=flush_every,
                flush_interval_s=3600,
            )
        )
        while len(seen) < 9:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return seen, journal

    seen, journal = asyncio.run(go())
    assert len(seen) == 9
    assert _lines(journal) == seen


def test_a_crashing_suite_still_flushes_what_finished() -> None:
    class Buggy(FakeSuite):
        async def rollout(self, item: Item, index: int, client: Any) -> Outcome:
            if item.id == "i6":
                raise ZeroDivisionError("a bug, not an infrastructure error")
            return await super().rollout(item, index, client)

    suite = Buggy(10)
    journal = io.StringIO()
    seen: list[dict[str, Any]] = []
    with pytest.raises(ZeroDivisionError):
        asyncio.run(
            run_suite(
                suite, None, rollouts=1, max_concurrent=2, journal=journal, on_result=seen.append
            )
        )
    assert seen and _lines(journal) == seen


def test_slow_results_are_flushed_by_age_not_only_by_count(tmp_path: Path) -> None:
    # A batch of 1000 never fills: the age limit must still put the first record on disk while
    # the run goes on (a slow model must not keep finished rollouts only in memory).
    path = tmp_path / "results.jsonl"

    async def go() -> None:
        gate = asyncio.Event()
        suite = FakeSuite(3, gate=gate, pass_first=1)
        with path.open("a", encoding="utf-8") as journal:
            task = asyncio.create_task(
                run_suite(
                    suite,
                    None,
                    rollouts=1,
                    max_concurrent=1,
                    journal=journal,
                    flush_every=1000,
                    flush_interval_s=0.01,
                )
            )
            for _ in range(2000):  # a bound for a broken build, not a timing assertion
                if path.read_text(encoding="utf-8"):
                    break
                await asyncio.sleep(0.005)
            assert len(path.read_text(encoding="utf-8").splitlines()) == 1
            assert not task.done()
            gate.set()
            await task

    asyncio.run(go())
    assert len(path.read_text(encoding="utf-8").splitlines()) == 3


def test_engine_over_http_with_the_real_client(scripted_server: Any) -> None:
    server = scripted_server(lambda body, n: "ANSWER" if body["seed"] % 2 == 0 else "no")
    suite = _suite([f"q{i}" for i in range(10)])

    async def go() -> list[dict[str, Any]]:
        endpoint = Endpoint(base_url=server.base_url, model="m")
        async with ChatClient(endpoint, SAMPLING, max_concurrent=4) as client:
            return await run_suite(suite, client, rollouts=2, max_concurrent=4)

    records = asyncio.run(go())
    assert [r["reward"] for r in records] == [1.0, 0.0] * 10
    assert all(r["usage"] == {"prompt_tokens": 7, "completion_tokens": 3} for r in records)
    assert sorted(b["seed"] for b in server.requests) == [0] * 10 + [1] * 10


def test_the_engines_item_hash_is_fingerprints() -> None:
    # Both are the digest of the stdlib's compact UTF-8 JSON array, whichever encoder made it
    # (baselines recorded before orjson was used for it stay comparable).
    tricky = ["", "plain", "é 中文 🙂", 'q"uote\\back', "\n\t\r\x00\x1f\x7f\u2028", "x" * 10_000]
    for prompt in tricky:
        for answer in ("42", "", prompt):
            for exam in ("", "exam-digest", prompt):
                value = [prompt, answer, exam] if exam else [prompt, answer]
                text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
                expected = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
                assert _item_hash(prompt, answer, exam) == expected
                assert item_hash(prompt, answer, exam) == expected
    with pytest.raises(UnicodeEncodeError):  # a lone surrogate: refused as it always was
        item_hash("\ud800", "a")


def test_the_dataset_hash_is_the_stdlib_json_digest() -> None:
    items = [Item(f"é{i}", f"q\n{i} 🙂", str(i), exam="e" if i % 2 else "") for i in range(50)]
    pairs = sorted([it.id, item_hash(it.prompt, it.answer, it.exam)] for it in items)
    text = json.dumps(pairs, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert dataset_hash(items) == hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


@pytest.mark.parametrize("flush_interval_s", [0.0, 0.001])
def test_a_journal_that_cannot_be_written_fails_the_run(flush_interval_s: float) -> None:
    class DiskFull(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(28, "No space left on device")

    async def go() -> None:
        gate = asyncio.Event()
        suite = FakeSuite(6, gate=gate, pass_first=2)
        task = asyncio.create_task(
            run_suite(
                suite,
                None,
                rollouts=1,
                max_concurrent=2,
                journal=DiskFull(),
                flush_every=100,
                flush_interval_s=flush_interval_s,
            )
        )
        await asyncio.sleep(0.05)  # the timed flush fails meanwhile; the next record raises
        gate.set()
        await task

    with pytest.raises(InfraError, match="No space left"):  # exit 3: the machine, not a bug
        asyncio.run(go())


def test_a_parsed_reply_and_its_outcome_carry_every_field_by_name() -> None:
    # Both are built positionally on the hot path: each field must land where its name says.
    client = ChatClient(Endpoint(base_url="http://127.0.0.1:9/v1", model="m"), SAMPLING)
    raw = json.dumps(
        {
            "model": "m",
            "choices": [{"message": {"content": "42"}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2},
        }
    ).encode()
    reply = client._parse(raw, 0.0, 3)
    usage = {"prompt_tokens": 5, "completion_tokens": 2}
    assert (reply.text, reply.usage, reply.attempts, reply.cached) == ("42", usage, 3, False)
    assert (reply.served_by, reply.finish_reason) == (None, "length") and reply.latency_s > 0
    prompt = [{"role": "user", "content": "q"}]
    out = Outcome.of_reply(prompt, reply, 1.0, metric="m1", reason="why", judge={"score": 1})
    assert out == Outcome(
        prompt=prompt,
        completion="42",
        reward=1.0,
        metrics={"m1": 1.0},
        usage=usage,
        timing={},
        reason="why",
        cost_usd=None,
        judge={"score": 1},
    )


@pytest.mark.parametrize("cls", [Reply, Outcome])
def test_the_hot_paths_constructors_are_the_dataclasses(cls: type) -> None:
    # Reply and Outcome write their fields past the frozen __setattr__ (once a request, once a
    # rollout): the same signature, defaults and frozen instances as the dataclass's own.
    fields = dataclasses.fields(cls)
    params = list(inspect.signature(cls).parameters.values())
    assert [p.name for p in params] == [f.name for f in fields]
    required = {p.name: f"value-{p.name}" for p in params if p.default is inspect.Parameter.empty}
    made = cls(**required)
    for f in fields:
        if f.name in required:
            assert getattr(made, f.name) == required[f.name]
        elif f.default_factory is not dataclasses.MISSING:
            assert getattr(made, f.name) == f.default_factory()
            assert getattr(made, f.name) is not getattr(cls(**required), f.name)  # fresh each
        else:
            assert getattr(made, f.name) == f.default
    assert made == cls(**required)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, fields[0].name, "changed")
    changed = dataclasses.replace(made, **{fields[-1].name: "other"})
    assert getattr(changed, fields[-1].name) == "other" and changed != made


class ServedSuite(FakeSuite):
    """Rollouts whose reply another model served when the item id says "fb" (the client's
    served.note, as for a router's fallback), in tasks the rollout starts as well as its own."""

    async def rollout(self, item: Item, index: int, client: Any) -> Outcome:
        if "fb" in item.id:
            served.note("backup", {"prompt_tokens": 2, "completion_tokens": 3})
            # A sample the rollout runs in a task of its own counts for the rollout too.
            await asyncio.ensure_future(self._note_in_task())
        return await super().rollout(item, index, client)

    async def _note_in_task(self) -> None:
        served.note("backup", {"prompt_tokens": 1, "completion_tokens": 1})


@pytest.mark.parametrize("max_concurrent", [1, 3])
def test_each_record_names_only_the_models_that_served_its_own_rollout(
    max_concurrent: int,
) -> None:
    # One worker runs many rollouts in turn: a fallback's notes belong to the rollout it served,
    # never to the next one, and a rollout no other model served has no served_by key.
    suite = ServedSuite(0)
    ids = ["a", "fb-1", "b", "c", "fb-2", "fb-3", "d"]
    suite.items = [Item(id=i, prompt=i, answer="x", group=None) for i in ids]
    records = asyncio.run(run_suite(suite, None, rollouts=2, max_concurrent=max_concurrent))
    for rec in records:
        if "fb" in rec["example_id"]:
            assert rec["served_by"] == {
                "backup": {"requests": 2, "prompt_tokens": 3, "completion_tokens": 4}
            }
        else:
            assert "served_by" not in rec
    assert served._NOTES.get() is None  # the caller's context is untouched

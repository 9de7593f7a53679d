"""Crash-safe journals: torn tails, duplicates, stale records; kill -9 a real run and resume."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalgate.config.load import load_config
from evalgate.run.engine import run_suite
from evalgate.run.fingerprint import item_hash
from evalgate.run.journal import (
    RECORD_KEYS,
    Pairs,
    is_complete,
    kept_records,
    order_records,
    order_tables,
    read_journal,
    resume_journal,
    rewrite_journal,
)
from evalgate.run.rollouts import RolloutTable
from evalgate.serve.base import Endpoint
from evalgate.serve.client import ChatClient
from evalgate.suites import build_suite
from evalgate.suites.base import Item
from tests.conftest import ROOT, write_config
from tests.fault_server import Answer, FaultServer

ITEMS = [Item(id=f"i{i}", prompt=f"p{i}", answer=str(i)) for i in range(4)]


def _rec(item: Item, rollout: int, *, error: str | None = None, **extra: Any) -> dict[str, Any]:
    rec = {
        "example_id": item.id,
        "item_hash": item_hash(item.prompt, item.answer),
        "rollout": rollout,
        "group": None,
        "prompt": [],
        "completion": None if error else item.answer,
        "answer": item.answer,
        "reward": None if error else 1.0,
        "metrics": {} if error else {"accuracy": 1.0},
        "usage": {},
        "timing": {},
        "error": error,
    }
    rec.update(extra)
    return rec


def _write(path: Path, recs: list[Any], tail: bytes = b"") -> None:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in recs]
    path.write_bytes("".join(line + "\n" for line in lines).encode() + tail)


def test_torn_tail_is_tolerated_and_cut_off(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    good = [_rec(ITEMS[0], 0), _rec(ITEMS[1], 0), _rec(ITEMS[2], 0)]
    torn = json.dumps(_rec(ITEMS[3], 0)).encode()[:57]
    _write(path, good, tail=torn)
    state = read_journal(path, items=ITEMS, rollouts=1)
    assert state.torn and list(kept_records(path, state)) == good and state.dropped == 1
    assert [r["example_id"] for r in state.records] == ["i0", "i1", "i2"]
    assert state.missing(ITEMS, 1) == [("i3", 0)]
    state = resume_journal(path, ITEMS, 1)
    assert path.read_bytes().endswith(b"}\n")  # cut at the last newline: appends are clean
    assert [json.loads(line) for line in path.read_text().splitlines()] == good
    assert read_journal(path, items=ITEMS, rollouts=1).dropped == 0


def test_first_complete_record_wins_and_junk_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    first = _rec(ITEMS[0], 0, completion="first")
    incomplete = {k: v for k, v in _rec(ITEMS[1], 0).items() if k != "timing"}
    _write(
        path,
        [
            incomplete,  # not a whole record: skipped, the pair stays open for the later one
            first,
            "{not json",
            _rec(ITEMS[0], 0, completion="second"),  # duplicate: the first is kept
            _rec(ITEMS[1], 0, completion="complete"),
            _rec(ITEMS[1], 1, reward=True),  # a bool is not a reward
            "[1, 2]",
        ],
    )
    state = read_journal(path, items=ITEMS, rollouts=2)
    kept = list(kept_records(path, state))
    assert [r["completion"] for r in kept] == ["first", "complete"]
    assert [(r["example_id"], r["rollout"]) for r in state.records] == [("i0", 0), ("i1", 0)]
    assert state.duplicates == 1 and state.bad_lines == 4 and not state.torn
    assert state.missing(ITEMS, 2) == [
        ("i0", 1),
        ("i1", 1),
        ("i2", 0),
        ("i2", 1),
        ("i3", 0),
        ("i3", 1),
    ]
    resume_journal(path, ITEMS, 2)  # rewritten: exactly the kept records
    assert [json.loads(line) for line in path.read_text().splitlines()] == kept


def test_records_outside_the_plan_are_stale(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    changed = _rec(ITEMS[1], 0, item_hash="0" * 16)  # the item's prompt or answer changed since
    unknown = _rec(Item(id="gone", prompt="x", answer="y"), 0)
    beyond = _rec(ITEMS[2], 5)  # rollout ≥ k
    _write(path, [_rec(ITEMS[0], 0), changed, unknown, beyond])
    state = read_journal(path, items=ITEMS, rollouts=2)
    assert state.stale == 3 and [r["example_id"] for r in state.records] == ["i0"]
    assert ("i1", 0) in state.missing(ITEMS, 2)
    plain = read_journal(path)  # no plan: everything complete is kept
    assert plain.stale == 0 and len(plain.records) == 4


def test_errors_are_results_unless_retried(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    _write(path, [_rec(ITEMS[0], 0, error="http_500: down"), _rec(ITEMS[1], 0)])
    assert read_journal(path, items=ITEMS, rollouts=1).done == {("i0", 0), ("i1", 0)}
    state = resume_journal(path, ITEMS, 1, retry_errors=True)
    assert state.done == {("i1", 0)} and state.retried_errors == 1
    assert len(path.read_text().splitlines()) == 1  # the errored record is gone from the file


def test_missing_file_and_helpers(tmp_path: Path) -> None:
    state = read_journal(tmp_path / "nope.jsonl", items=ITEMS, rollouts=1)
    assert len(state.records) == 0 and len(state.missing(ITEMS, 1)) == 4
    assert not is_complete({"example_id": "x"}) and is_complete(_rec(ITEMS[0], 0))
    assert set(_rec(ITEMS[0], 0)) == RECORD_KEYS
    recs = [_rec(ITEMS[2], 1), _rec(ITEMS[0], 1), _rec(ITEMS[2], 0), _rec(ITEMS[0], 0)]
    assert [(r["example_id"], r["rollout"]) for r in order_records(recs, ITEMS)] == [
        ("i0", 0),
        ("i0", 1),
        ("i2", 0),
        ("i2", 1),
    ]
    rewrite_journal(tmp_path / "new.jsonl", recs)
    assert len(read_journal(tmp_path / "new.jsonl").records) == 4


# -- kill -9 a real `python -m evalgate local`, then resume with the journal primitives ------

N_ITEMS, K, ROUNDS, PARALLEL = 8, 3, 20, 5


def _arith(prompt: str) -> str:
    a, op, b = prompt.removeprefix("What is ").rstrip("?").split()
    return str(int(a) + int(b) if op == "+" else int(a) - int(b))


class _Round:
    """One run that is killed when request ``kill_at`` arrives.

    ``linger``: hold that request 0.6 s first, so the engine's age-based flush (0.5 s) writes
    what finished: rounds alternate between "most results still buffered" and "most on disk".
    """

    def __init__(self, tmp: Path, index: int) -> None:
        rng = random.Random(index)
        self.kill_at = rng.randrange(N_ITEMS * K)
        self.linger = index % 2 == 1
        self.dir = tmp / f"round-{index}"
        self.dir.mkdir()
        self.proc: subprocess.Popen[bytes] | None = None
        self.resuming = False
        self.server = FaultServer(self.script).start()
        self.killed: asyncio.Event | None = None

    async def script(self, key: Any, attempt: int, n: int) -> Answer:
        if self.killed is None:
            self.killed = asyncio.Event()
        if self.resuming or n < self.kill_at:
            return Answer(_arith(key[0]))
        if n == self.kill_at:
            if self.linger:
                await asyncio.sleep(0.6)
            assert self.proc is not None
            os.kill(self.proc.pid, signal.SIGKILL)
            self.killed.set()
        await self.killed.wait()  # requests after the kill point never get an answer
        return Answer(_arith(key[0]))

    def start(self) -> None:
        self.config = write_config(
            self.dir,
            f"""
models:
  - {{name: scripted, backend: openai, base_url: "{self.server.base_url}", model: org/m}}
benchmarks:
  - name: arith
    eval: {{num_examples: {N_ITEMS}, rollouts: {K}, max_concurrent: 4}}
""",
        )
        env = {**os.environ, "CI": "true", "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "evalgate", "local", str(self.config), "--output", "out"],
            cwd=self.dir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )


async def _resume(rnd: _Round) -> tuple[int, int]:
    """Complete a killed run from its journal; (records kept, records run again)."""
    config = load_config(rnd.config, [])
    bench = config.benchmarks[0]
    suite = build_suite(bench)
    (journal,) = (rnd.dir / "out").glob("evals/*/*/results.jsonl")
    before = read_journal(journal)
    kept = list(kept_records(journal, before))
    state = resume_journal(journal, suite.items, K)
    assert list(state.records) == list(before.records)  # nothing complete was lost by the repair
    endpoint = Endpoint(base_url=rnd.server.base_url, model="org/m")
    async with ChatClient(endpoint, bench.sampling, max_concurrent=4) as client:
        with journal.open("a", encoding="utf-8") as fh:
            new = await run_suite(
                suite, client, rollouts=K, max_concurrent=4, journal=fh, skip=state.done
            )
    assert len(new) == len(state.missing(suite.items, K))
    # Exactly n × k records on disk, each pair once, every kept record unchanged, all correct.
    lines = journal.read_text(encoding="utf-8").splitlines()
    final = read_journal(journal, items=suite.items, rollouts=K)
    assert len(lines) == len(final.records) == N_ITEMS * K and final.dropped == 0
    assert final.done == {(it.id, r) for it in suite.items for r in range(K)}
    assert list(final.records)[: len(state.records)] == list(state.records)
    assert [json.loads(line) for line in lines[: len(kept)]] == kept
    assert all(r["error"] is None and r["reward"] == 1.0 for r in final.records)
    return len(state.records), len(new)


@pytest.mark.slow
def test_kill_9_at_random_points_then_resume(tmp_path: Path) -> None:
    kept = rerun = 0
    for start in range(0, ROUNDS, PARALLEL):  # a few at a time: start-up is most of a round
        rounds = [_Round(tmp_path, i) for i in range(start, start + PARALLEL)]
        try:
            for rnd in rounds:
                rnd.start()
            for rnd in rounds:
                assert rnd.proc is not None
                _, err = rnd.proc.communicate(timeout=60)
                assert rnd.proc.returncode == -signal.SIGKILL, err.decode()[-2000:]
            for rnd in rounds:
                rnd.resuming = True
                k, r = asyncio.run(_resume(rnd))
                kept, rerun = kept + k, rerun + r
        finally:
            for rnd in rounds:
                if rnd.proc is not None and rnd.proc.poll() is None:
                    rnd.proc.kill()
                rnd.server.stop()
    # Both sides were exercised: records that survived the kill, and records run again.
    assert kept > 0 and rerun > 0


def test_pairs_hold_what_a_set_of_tuples_holds() -> None:
    """A resume keeps its done pairs as bits per item: the same answers as a set of tuples."""
    rng = random.Random(5)
    pairs = [(f"i{rng.randrange(30)}", rng.choice([0, 1, 3, 63, 64, 1000])) for _ in range(300)]
    done, plain = Pairs(), set()
    for pair in pairs:
        done.add(pair)
        plain.add(pair)
    assert done == plain and len(done) == len(plain) and set(done) == plain
    probes = [*pairs, ("i0", 2), ("zz", 0), ("i1", -1), ("i1", 65), "i1", ("i1",)]
    assert [p in done for p in probes] == [p in plain for p in probes]


def test_kept_and_new_rollouts_merge_in_run_order_as_columns() -> None:
    """A resumed run's kept rollouts (in file order) and new ones end in (item, rollout) order,
    as order_records sorts the records, without a dict per rollout."""
    rng = random.Random(8)
    other = Item(id="gone", prompt="p", answer="a")  # an item no longer in the plan: last
    recs = [
        _rec(it, r, usage={"prompt_tokens": rng.randrange(9)}, **({"cost_usd": 0.5} if r else {}))
        for it in [*ITEMS, other]
        for r in range(3)
    ]
    rng.shuffle(recs)
    kept, new = RolloutTable(), RolloutTable()
    kept.extend(recs[:7])
    new.extend(recs[7:])
    expected = RolloutTable()
    expected.extend(order_records(recs, ITEMS))
    merged = order_tables([kept, new], ITEMS)
    assert list(merged) == list(expected) and len(merged) == len(recs)
    assert [(r["example_id"], r["rollout"]) for r in merged][-3:] == [("gone", r) for r in range(3)]

"""The response cache: content-addressed, zero calls on an unchanged re-run, never a crash."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from evalgate.run.cache import CACHE_FILE, ResponseCache, default_cache_dir
from evalgate.run.engine import run_suite
from evalgate.serve.base import Endpoint
from evalgate.serve.client import ChatClient
from tests.conftest import ScriptedServer
from tests.test_faults import _suite

USAGE = {"prompt_tokens": 7, "completion_tokens": 3}


def _run(
    server: ScriptedServer,
    cache: ResponseCache | None,
    *,
    n: int = 6,
    rollouts: int = 2,
    seed: int | None = 0,
    temperature: float = 0.0,
    model: str = "m",
) -> list[dict[str, Any]]:
    sampling = SimpleNamespace(temperature=temperature, top_p=1.0, max_tokens=8, seed=seed)
    suite = _suite([f"q{i}" for i in range(n)])

    async def go() -> list[dict[str, Any]]:
        endpoint = Endpoint(base_url=server.base_url, model=model)
        async with ChatClient(
            endpoint, sampling, max_concurrent=4, max_retries=0, cache=cache
        ) as client:
            records = await run_suite(suite, client, rollouts=rollouts, max_concurrent=4)
        assert client.stats.cache_hits + client.stats.requests >= len(records)
        return records

    return asyncio.run(go())


def _answers(records: list[dict[str, Any]]) -> list[tuple[str, int, Any, Any]]:
    return [(r["example_id"], r["rollout"], r["completion"], r["error"]) for r in records]


def test_unchanged_rerun_makes_no_model_calls(tmp_path: Path, scripted_server: Any) -> None:
    server = scripted_server(lambda body, n: f"answer {n}")
    with ResponseCache.in_dir(tmp_path) as cache:
        first = _run(server, cache)
    assert len(server.requests) == 12
    with ResponseCache.in_dir(tmp_path) as cache:  # a new process, as far as the cache knows
        second = _run(server, cache)
        assert cache.hits == 12 and cache.misses == 0
    assert len(server.requests) == 12  # not one more call
    assert _answers(second) == _answers(first)
    assert all(r["usage"] == USAGE for r in second)
    assert (tmp_path / CACHE_FILE).is_file()


def test_changed_requests_miss(tmp_path: Path, scripted_server: Any) -> None:
    server = scripted_server(lambda body, n: "ANSWER")
    with ResponseCache.in_dir(tmp_path) as cache:
        _run(server, cache)
        _run(server, cache, temperature=0.5)  # sampling changed: every request is new
        _run(server, cache, model="other")  # another model behind the same URL
        _run(server, cache, rollouts=3)  # one more rollout: only that one is new
    assert len(server.requests) == 12 + 12 + 12 + 6


def test_rollouts_stay_independent_without_a_seed(tmp_path: Path, scripted_server: Any) -> None:
    # No seed: the bodies of k rollouts are identical; the rollout index keeps them apart.
    server = scripted_server(lambda body, n: f"sample {n}")
    with ResponseCache.in_dir(tmp_path) as cache:
        first = _run(server, cache, n=2, rollouts=4, seed=None, temperature=1.0)
        second = _run(server, cache, n=2, rollouts=4, seed=None, temperature=1.0)
    assert len(server.requests) == 8
    assert len({r["completion"] for r in first}) == 8  # 8 distinct samples, none reused
    assert _answers(second) == _answers(first)


def test_errors_are_never_cached(tmp_path: Path, scripted_server: Any) -> None:
    broken = {"q1", "q4"}

    def script(body: dict[str, Any], n: int) -> Any:
        if body["messages"][-1]["content"] in broken:
            return (500, "down", {})
        return "ANSWER"

    server = scripted_server(script)
    with ResponseCache.in_dir(tmp_path) as cache:
        first = _run(server, cache)
        assert sum(r["error"] is not None for r in first) == 4
        broken.clear()  # the outage is over: a re-run asks again for exactly those
        second = _run(server, cache)
    assert len(server.requests) == 12 + 4
    assert all(r["error"] is None and r["reward"] == 1.0 for r in second)


def test_keys_and_persistence(tmp_path: Path) -> None:
    key = ResponseCache.key
    assert key("u\nm", b"{}", 0) != key("u\nm", b"{}", 1) != key("u\nm2", b"{}", 1)
    assert key("u\nm", b'{"a":1}', 0) != key("u\nm", b'{"a":2}', 0)
    assert key("a", b"b", 0) == key("a", b"b", 0) and len(key("a", b"b", 0)) == 32
    path = tmp_path / "c.sqlite3"
    cache = ResponseCache(path, batch=3)
    cache.put(b"k1", "one", USAGE)
    assert cache.get(b"k1") == ("one", USAGE)  # visible before it is written
    cache.put(b"k2", "two", {})
    cache.close()
    with ResponseCache(path) as again:
        assert again.get(b"k1") == ("one", USAGE) and again.get(b"k2") == ("two", {})
        assert again.get(b"k3") is None and len(again) == 2


def test_default_cache_dir() -> None:
    assert default_cache_dir({"EVALGATE_CACHE_DIR": "/c"}) == Path("/c")
    assert default_cache_dir({"XDG_CACHE_HOME": "/x", "HOME": "/h"}) == Path("/x/evalgate")
    assert default_cache_dir({"HOME": "/h"}) == Path("/h/.cache/evalgate")


def _corrupt_variants(tmp_path: Path) -> dict[str, Path]:
    garbage = tmp_path / "garbage" / CACHE_FILE
    garbage.parent.mkdir()
    garbage.write_bytes(b"this is not a database\n" * 200)
    cut = tmp_path / "cut" / CACHE_FILE
    with ResponseCache(cut) as cache:
        for i in range(500):
            cache.put(b"k%d" % i, "x" * 200, USAGE)
    data = cut.read_bytes()
    cut.write_bytes(data[:100] + b"\xff" * 3000 + data[3100 : len(data) // 2])
    future = tmp_path / "future" / CACHE_FILE
    future.parent.mkdir()
    db = sqlite3.connect(future)
    db.execute("PRAGMA user_version=99")
    db.close()
    return {"garbage": garbage, "cut": cut, "future": future}


@pytest.mark.parametrize("variant", ["garbage", "cut", "future"])
def test_a_corrupt_cache_is_moved_aside_not_fatal(
    tmp_path: Path, variant: str, scripted_server: Any
) -> None:
    path = _corrupt_variants(tmp_path)[variant]
    warnings: list[str] = []
    cache = ResponseCache(path, warn=warnings.append)
    server = scripted_server(lambda body, n: "ANSWER")
    records = _run(server, cache, n=3, rollouts=1)
    cache.close()
    assert all(r["reward"] == 1.0 for r in records)
    assert len(warnings) == 1 and "moved it to" in warnings[0]
    assert len(list(path.parent.glob(f"{CACHE_FILE}.corrupt-*"))) == 1
    with ResponseCache(path, warn=warnings.append) as fresh:
        assert fresh.disabled is None and len(warnings) == 1
        assert len(fresh) == 3  # the new file works and holds this run's answers


def test_corruption_found_mid_run_disables_the_cache(tmp_path: Path) -> None:
    warnings: list[str] = []
    cache = ResponseCache.in_dir(tmp_path, warn=warnings.append)

    class Broken:
        def execute(self, *args: Any) -> Any:
            raise sqlite3.DatabaseError("database disk image is malformed")

        def close(self) -> None:
            pass

    real = cache._db
    cache._db = Broken()  # type: ignore[assignment]
    assert cache.get(b"k") is None  # a miss, not a crash
    cache.put(b"k", "v", {})  # ignored once disabled
    cache.flush()
    real.close()  # type: ignore[union-attr]
    assert cache.disabled and "malformed" in cache.disabled
    assert len(warnings) == 2 and "moved it to" in warnings[0]


def test_an_unusable_cache_dir_runs_uncached(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache dir should be")
    warnings: list[str] = []
    cache = ResponseCache.in_dir(blocker / "sub", warn=warnings.append)
    cache.put(b"k", "v", {})
    assert cache.get(b"k") is None and cache.disabled and len(warnings) == 1


def test_threads_and_two_handles_share_one_file(tmp_path: Path) -> None:
    path = tmp_path / CACHE_FILE
    a, b = ResponseCache(path, batch=7), ResponseCache(path, batch=5)
    errors: list[BaseException] = []

    def work(cache: ResponseCache, t: int) -> None:
        try:
            for i in range(200):
                cache.put(b"%d-%d" % (t, i), f"{t}/{i}", {"completion_tokens": i})
                assert cache.get(b"%d-%d" % (t, i)) == (f"{t}/{i}", {"completion_tokens": i})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(a if t % 2 else b, t)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    a.close()
    b.close()
    assert not errors
    with ResponseCache(path) as cache:
        assert len(cache) == 1600
        assert cache.get(b"3-150") == ("3/150", {"completion_tokens": 150})


def test_a_locked_cache_is_not_mistaken_for_a_corrupt_one(tmp_path: Path) -> None:
    path = tmp_path / CACHE_FILE
    with ResponseCache(path) as cache:
        cache.put(b"old", "kept", {})
    other = sqlite3.connect(path)  # another process, in the middle of a write
    other.execute("BEGIN IMMEDIATE")
    warnings: list[str] = []
    cache = ResponseCache(path, timeout_s=0.05, warn=warnings.append)
    assert cache.get(b"old") == ("kept", {})  # readers are not blocked (WAL)
    cache.put(b"new", "v", {})
    cache.flush()  # the write lock is taken: this batch goes unwritten, nothing else happens
    assert cache.disabled is None and warnings == [] and path.exists()
    other.rollback()
    cache.put(b"new", "v", {})
    cache.close()
    other.close()
    with ResponseCache(path) as again:
        assert again.get(b"new") == ("v", {}) and len(again) == 2

    fresh = tmp_path / "fresh.sqlite3"  # a new file, locked before its schema was written
    holder = sqlite3.connect(fresh, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    blocked = ResponseCache(fresh, timeout_s=0.05, warn=warnings.append)
    assert blocked.disabled and "locked" in blocked.disabled
    assert not list(tmp_path.glob("*.corrupt-*"))  # disabled, but not moved aside
    holder.rollback()
    holder.close()

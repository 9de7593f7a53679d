"""The engine and client against a server that fails on purpose, over real HTTP.

Every rollout must end either scored on the completion the server really sent, or counted as an
error of the right kind — never silently wrong. The ground truth is the server's own log of what
it did to each request (tests/fault_server.py), checked rollout by rollout.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import zlib
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from evalgate.run.engine import run_suite
from evalgate.score.scorers import make_scorer
from evalgate.serve.base import Endpoint
from evalgate.serve.client import (
    AdaptiveLimit,
    ChatClient,
    ClientStats,
    RequestFailed,
    _std_dumps,
    dumps,
    parse_retry_after,
    retry_after,
)
from evalgate.suites.base import Item
from evalgate.suites.qa import QASuite
from tests.fault_server import FAULTS, Action, Answer, Fault, FaultServer, expected_outcome

ANSWER = "ANSWER"
SAMPLING = SimpleNamespace(temperature=0.0, top_p=1.0, max_tokens=8, seed=0)


# Only the tests with a "hang past timeout" fault wait out the client's timeout; it is long
# enough that a well-formed answer from loopback never exceeds it on a loaded machine (0.75 s
# did, at load 20, and the run then differed from the server's log), and the other tests use
# the default, which no answer nears.
HANG_TIMEOUT_S = 3.0


def _suite(ids: list[str]) -> QASuite:
    return QASuite(
        name="faults",
        items=[Item(id=i, prompt=i, answer=ANSWER) for i in ids],
        scorer=make_scorer(SimpleNamespace(type="exact", case_sensitive=True)),
        messages={i: [{"role": "user", "content": i}] for i in ids},
    )


def run_script(
    plans: dict[str, list[Action]] | None = None,
    *,
    script: Any = None,
    ids: list[str] | None = None,
    rollouts: int = 1,
    max_retries: int = 2,
    timeout_s: float = 30.0,
    max_concurrent: int = 16,
) -> tuple[dict[Any, dict[str, Any]], ClientStats, FaultServer]:
    """Run a suite against a FaultServer; records by example_id (or (id, rollout) if k > 1).

    ``plans``: item id → the actions for its attempts, an answer once they run out.
    ``script``: or a ``(key, attempt, n) -> Action`` of one's own.
    """
    if script is None:
        assert plans is not None

        def script(key: Any, attempt: int, n: int) -> Action:
            plan = plans[key[0]]
            return plan[attempt] if attempt < len(plan) else Answer(ANSWER)

    suite = _suite(ids or list(plans or {}))

    async def go(base_url: str) -> tuple[list[dict[str, Any]], ClientStats]:
        endpoint = Endpoint(base_url=base_url, model="scripted", model_id="org/scripted")
        async with ChatClient(
            endpoint,
            SAMPLING,
            timeout_s=timeout_s,
            max_retries=max_retries,
            max_concurrent=max_concurrent,
            backoff_base_s=0.001,
            backoff_cap_s=0.01,
        ) as client:
            records = await run_suite(
                suite, client, rollouts=rollouts, max_concurrent=max_concurrent
            )
        return records, client.stats

    with FaultServer(script) as server:
        records, stats = asyncio.run(go(server.base_url))
    by = {(r["example_id"], r["rollout"]) if rollouts > 1 else r["example_id"]: r for r in records}
    assert len(by) == len(suite.items) * rollouts
    return by, stats, server


def _check_against_log(
    records: dict[Any, dict[str, Any]], server: FaultServer, stats: ClientStats, max_retries: int
) -> Counter[str]:
    """Each rollout against what the server did to it; the client's counters against the log."""
    outcomes: Counter[str] = Counter()
    retried: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for (prompt, seed), actions in server.log.items():
        rec = records.get((prompt, seed - SAMPLING.seed)) or records.get(prompt)
        assert rec is not None and rec["rollout"] == seed - SAMPLING.seed
        status, value = expected_outcome(actions, max_retries)
        if status == "ok" and value == "":  # an answer without text: the empty_reply error
            status, value = "error", "empty_reply"
        if status == "ok":
            assert rec["error"] is None, (actions, rec["error"])
            assert rec["completion"] == value
            assert rec["reward"] == (1.0 if value == ANSWER else 0.0)
            outcomes["retried-ok" if len(actions) > 1 else "ok"] += 1
        else:
            assert rec["reward"] is None and rec["completion"] is None
            assert rec["error"].split(":", 1)[0] == value, (actions, rec["error"])
            failed[value] += 1
            outcomes["counted-error"] += 1
        retried.update(a.kind for a in actions[:-1] if isinstance(a, Fault))
    assert len(server.log) == len(records)  # every rollout reached the server
    assert stats.failures == failed
    assert stats.retried == retried
    assert stats.requests == sum(len(a) for a in server.log.values()) == server.requests
    return outcomes


def test_every_fault_transient_and_persistent() -> None:
    plans: dict[str, list[Action]] = {}
    for name, fault in FAULTS.items():
        plans[f"{name}|transient"] = [fault, Answer(ANSWER)]
        plans[f"{name}|twice, then wrong"] = [fault, fault, Answer("WRONG")]
        plans[f"{name}|persistent"] = [fault] * 3
    plans["clean"] = []
    records, stats, server = run_script(plans, max_retries=2, timeout_s=HANG_TIMEOUT_S)
    _check_against_log(records, server, stats, max_retries=2)
    for name, fault in FAULTS.items():  # and against the plan itself
        transient = records[f"{name}|transient"]
        wrong = records[f"{name}|twice, then wrong"]
        persistent = records[f"{name}|persistent"]
        assert persistent["error"].startswith(fault.kind + ":")
        if fault.retryable:
            assert transient["error"] is None and transient["reward"] == 1.0
            assert wrong["error"] is None and wrong["reward"] == 0.0  # scored, not an error
            assert len(server.log[(f"{name}|persistent", 0)]) == 3
        else:
            assert transient["error"].startswith(fault.kind + ":")
            assert len(server.log[(f"{name}|persistent", 0)]) == 1  # not retried
    assert records["clean"]["reward"] == 1.0


def test_429_bursts_with_retry_after_adapt_concurrency() -> None:
    # 30 % of requests, in bursts of three consecutive arrivals, are throttled.
    throttle = FAULTS["429 + Retry-After"]

    def script(key: Any, attempt: int, n: int) -> Action:
        return (
            throttle
            if n % 10 < 3
            else Answer(ANSWER if zlib.crc32(key[0].encode()) % 7 else "WRONG")
        )

    ids = [f"q{i}" for i in range(120)]
    records, stats, server = run_script(
        script=script, ids=ids, rollouts=2, max_retries=4, max_concurrent=32
    )
    outcomes = _check_against_log(records, server, stats, max_retries=4)
    assert outcomes["retried-ok"] > 0
    sent_429 = sum(1 for acts in server.log.values() for a in acts if a is throttle)
    assert stats.retried["http_429"] + stats.failures["http_429"] == sent_429
    # AIMD: the limit came down (never below 1), and the server never saw more than the maximum.
    assert stats.throttle_decreases >= 1
    assert 1 <= stats.min_concurrency < 32
    assert server.max_in_flight <= 32


def test_random_faults_never_silently_wrong() -> None:
    rng = random.Random(8)
    faults = [f for f in FAULTS.values() if f.name != "hang past timeout"]
    plans: dict[str, list[Action]] = {}
    for i in range(150):
        plan: list[Action] = [rng.choice(faults) for _ in range(rng.choice([0, 0, 1, 2, 3]))]
        plans[f"item-{i}"] = [*plan, Answer(rng.choice([ANSWER, ANSWER, "WRONG", ""]))]
    plans["hang-once"] = [FAULTS["hang past timeout"], Answer(ANSWER)]
    records, stats, server = run_script(
        plans, max_retries=2, max_concurrent=24, timeout_s=HANG_TIMEOUT_S
    )
    outcomes = _check_against_log(records, server, stats, max_retries=2)
    assert outcomes["counted-error"] and outcomes["retried-ok"] and outcomes["ok"]


def test_unreachable_endpoint_is_a_connection_error() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    async def go() -> tuple[Any, ClientStats]:
        endpoint = Endpoint(base_url=f"http://127.0.0.1:{port}/v1", model="m")
        async with ChatClient(endpoint, SAMPLING, max_retries=1, backoff_base_s=0.001) as client:
            with pytest.raises(RequestFailed) as info:
                await client.chat([{"role": "user", "content": "hi"}])
        return info.value, client.stats

    error, stats = asyncio.run(go())
    assert error.kind == "connection"
    assert stats.failures == {"connection": 1} and stats.retried == {"connection": 1}


def test_retry_after_is_honoured() -> None:
    slow_down = Fault("429 + Retry-After", "http_429", status=429, retry_after="7.5")
    plans: dict[str, list[Action]] = {"x": [slow_down, FAULTS["500"], Answer(ANSWER)]}
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    async def go(base_url: str) -> Any:
        endpoint = Endpoint(base_url=base_url, model="m")
        async with ChatClient(endpoint, SAMPLING, backoff_base_s=0.2, backoff_cap_s=5) as client:
            client._sleep = fake_sleep
            return await client.chat([{"role": "user", "content": "x"}])

    def script(key: Any, attempt: int, n: int) -> Action:
        plan = plans[key[0]]
        return plan[attempt] if attempt < len(plan) else Answer(ANSWER)

    with FaultServer(script) as server:
        reply = asyncio.run(go(server.base_url))
    assert reply.text == ANSWER and reply.attempts == 3
    assert slept[0] == 7.5  # the server's word, not our backoff
    assert 0 <= slept[1] <= 0.4  # full jitter: uniform(0, base * 2**attempt)


def test_retry_after_forms() -> None:
    assert retry_after({"Retry-After": "3"}) == 3.0
    assert retry_after({"Retry-After": "-1"}) == 0.0
    assert retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert retry_after({"Retry-After": "soon"}) is None
    assert retry_after({}) is None
    assert retry_after({"llm_provider-retry-after": "2"}) == 2.0  # LiteLLM's proxy
    # An HTTP date in the future: the one parser every client shares (chat, agent, GitHub).
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0
    client = ChatClient(Endpoint(base_url="http://x/v1", model="m"), SAMPLING)
    assert client._delay(0, 3600.0) == 60.0  # a server asking for an hour gets a minute


def test_aimd_halves_once_per_window_and_grows_back() -> None:
    async def go() -> None:
        limit = AdaptiveLimit(16)
        epochs = [await limit.acquire() for _ in range(16)]
        for epoch in epochs:  # a burst of 429s to requests of one window: one decrease
            limit.throttled(epoch)
            limit.release()
        assert limit.limit == 8 and limit.decreases == 1
        for _ in range(10):  # repeated throttling, each in a new window: never below 1
            limit.throttled(await limit.acquire())
            limit.release()
        assert limit.limit == 1 and limit.lowest == 1
        for _ in range(200):  # successes: +1 per window, up to the maximum
            await limit.acquire()
            limit.succeeded()
            limit.release()
        assert limit.limit == 16

    asyncio.run(go())


def test_aimd_bounds_in_flight_and_serves_waiters_in_order() -> None:
    async def go() -> None:
        limit = AdaptiveLimit(4)
        limit.throttled(await limit.acquire())  # limit 2, one slot held
        assert limit.limit == 2
        await limit.acquire()  # the second slot
        order: list[int] = []

        async def waiter(i: int) -> None:
            await limit.acquire()
            order.append(i)

        tasks = [asyncio.create_task(waiter(i)) for i in range(4)]
        await asyncio.sleep(0)
        assert order == [] and limit.in_flight == 2
        tasks[1].cancel()  # a cancelled waiter gives up its place, not a slot
        limit.release()
        limit.release()
        await asyncio.sleep(0)
        assert order == [0, 2] and limit.in_flight == 2
        limit.release()
        await asyncio.sleep(0)
        assert order == [0, 2, 3]
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(go())


def test_dumps_is_byte_identical_to_the_stdlib_form() -> None:
    # Cache keys hash the encoded body: with or without orjson, the bytes agree (floats with an
    # exponent below 1e16 aside, which sampling parameters don't use).
    values = [
        {"model": "m", "messages": [{"role": "user", "content": 'é ü 中文 🙂 \n\t"q" \\ \x01'}]},
        {"temperature": 0.7, "top_p": 1.0, "max_tokens": 16, "seed": 2**40},
        {"x": [0.25, 123456789.125, -0.0, 1e16, True, None]},
    ]
    for value in values:
        assert dumps(value) == _std_dumps(value)
    assert dumps({"seed": 2**70}) == _std_dumps({"seed": 2**70})  # beyond orjson's range


@pytest.mark.parametrize("count", [-5, 2**70, "many", [3], 1e999])
def test_a_tool_reply_with_a_token_count_no_server_can_mean_is_a_bad_response(count: Any) -> None:
    """The agent's tool-calling replies read usage as the chat client does (it was int(...)
    outside the reply's checks: a text count was an internal error, a negative one lowered the
    budget's count)."""
    from evalgate.serve.client import RequestFailed
    from evalgate.suites.agent.llm import _parse

    reply = {
        "choices": [{"message": {"role": "assistant", "content": "ok"}}],
        "usage": {"prompt_tokens": count, "completion_tokens": 1},
    }
    with pytest.raises(RequestFailed) as caught:
        _parse(json.dumps(reply).encode())
    assert caught.value.kind == "bad_response"
    fine = {**reply, "usage": {"prompt_tokens": 7, "completion_tokens": 1}}
    assert _parse(json.dumps(fine).encode()).usage == {"prompt_tokens": 7, "completion_tokens": 1}

"""evalgate's own work per rollout, with the HTTP exchange taken out (issue #36).

``bench/overhead.py`` times a whole `evalgate local` against a stub; what evalgate adds per
rollout is there mixed with aiohttp's request, the kernel's loopback and the event loop's polls,
which both sides pay. Here the engine runs the same 2,000-item ``arith`` suite as that bench
(``run_suite`` with the journal, the rollout table, the progress callback and the client's whole
policy: breaker, deadline, AIMD limit, reply cap, served-model check), but ``ChatClient._exchange``
returns a canned reply (the stub's body) after one pass of the event loop, and a raw loop of 64
workers does the same canned exchange with a pre-encoded body and ``orjson.loads``: the
difference is what evalgate's own bookkeeping costs a rollout, in CPU time (the least of
``--repeats`` runs in one process: other load only ever slows a run down).

``--callgrind`` runs each side once inside ``functools.reduce``, for valgrind's callgrind to
count the instructions of that call alone (deterministic whatever the load)::

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=functools_reduce \\
        python bench/rollout_overhead.py --callgrind evalgate   # or: raw

Usage: python bench/rollout_overhead.py [--n 2000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from multidict import CIMultiDict, CIMultiDictProxy

from evalgate.config.load import load_config
from evalgate.run.budget import BudgetMeter
from evalgate.run.engine import run_suite
from evalgate.run.progress import PlainProgress
from evalgate.serve.base import Endpoint
from evalgate.serve.client import ChatClient
from evalgate.suites import build_suite

CONCURRENCY = 64
_REPLY = (
    '{"id":"cmpl-stub","object":"chat.completion","model":"bench/stub","choices":[{"index":0,'
    '"message":{"role":"assistant","content":"%s"},"finish_reason":"stop"}],'
    '"usage":{"prompt_tokens":20,"completion_tokens":2,"total_tokens":22}}'
)
_HEADERS = CIMultiDictProxy(CIMultiDict({"Content-Type": "application/json"}))


def _suite(n: int) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "evals.yaml"
        path.write_text(
            "models:\n  - {name: stub, backend: openai, base_url: 'http://127.0.0.1:9/v1', "
            "model: bench/stub}\nbenchmarks:\n  - name: arith\n"
            f"    size: {n}\n    scorer: {{type: exact}}\n"
            f"    eval: {{num_examples: {n}, max_concurrent: {CONCURRENCY}}}\n",
            encoding="utf-8",
        )
        config = load_config(path, [])
    return config, build_suite(config.benchmarks[0])


class _Canned:
    """The stub's reply to a request body, after one pass of the event loop."""

    def __init__(self, suite: Any) -> None:
        self.answers = {suite.messages[it.id][-1]["content"]: it.answer for it in suite.items}

    async def exchange(self, payload: bytes) -> tuple[int, bytes, Any]:
        asked = orjson.loads(payload)["messages"][-1]["content"]
        await asyncio.sleep(0)
        return 200, (_REPLY % self.answers[asked]).encode(), _HEADERS


def evalgate_side(config: Any, suite: Any) -> Callable[[], float]:
    canned = _Canned(suite)

    class Client(ChatClient):
        async def _exchange(self, session: Any, payload: bytes, result: Any) -> Any:
            return await canned.exchange(payload)

    bench, model = config.benchmarks[0], config.models[0]
    endpoint = Endpoint(base_url=model.base_url, model=model.model, model_id=model.model)
    ev = bench.eval

    async def main() -> float:
        progress = PlainProgress(open(os.devnull, "w"))  # noqa: SIM115  (the run's lifetime)
        budget = BudgetMeter(config.budget)
        async with Client(
            endpoint,
            bench.sampling,
            timeout_s=ev.request_timeout_s,
            max_retries=ev.max_retries,
            deadline_s=3 * ev.request_timeout_s,
            max_concurrent=ev.max_concurrent,
        ) as client:
            with tempfile.TemporaryFile("w+", encoding="utf-8") as journal:
                progress.start(suite.name, len(suite.items))
                cpu = time.process_time()
                table = await run_suite(
                    suite,
                    client,
                    rollouts=1,
                    max_concurrent=ev.max_concurrent,
                    journal=journal,
                    on_result=lambda rec: progress.advance(error=rec["error"] is not None),
                    budget=budget if budget.caps else None,  # as the session passes it
                    slim=True,
                )
                cpu = time.process_time() - cpu
        assert len(table) == len(suite.items) and table.errored == 0
        return cpu

    return lambda: asyncio.run(main())


def raw_side(suite: Any) -> Callable[[], float]:
    canned = _Canned(suite)
    bodies = [
        orjson.dumps({"model": "bench/stub", "messages": suite.messages[it.id], "seed": 0})
        for it in suite.items
    ]

    async def main() -> float:
        work = iter(range(len(bodies)))
        correct = 0

        async def worker() -> None:
            nonlocal correct
            for i in work:
                _, raw, _ = await canned.exchange(bodies[i])
                reply = orjson.loads(raw)["choices"][0]["message"]["content"]
                correct += reply == suite.items[i].answer

        cpu = time.process_time()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        cpu = time.process_time() - cpu
        assert correct == len(bodies)
        return cpu

    return lambda: asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--callgrind", choices=["evalgate", "raw"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    config, suite = _suite(args.n)
    sides = {"evalgate": evalgate_side(config, suite), "raw": raw_side(suite)}
    gc.set_threshold(10_000, 10, 10)  # as `evalgate` runs (evalgate.cli.GC_THRESHOLD)
    for run in sides.values():
        run()  # warm: each item's hash kept, the interpreter's caches specialised
    if args.callgrind:
        functools.reduce(lambda _a, _b: sides[args.callgrind](), [0, 1])
        return
    best = {name: min(run() for _ in range(args.repeats)) for name, run in sides.items()}
    each = {name: cpu / args.n * 1e6 for name, cpu in best.items()}
    print(
        f"{args.n} arith rollouts, concurrency {CONCURRENCY}, canned exchange, least CPU of "
        f"{args.repeats}: evalgate {each['evalgate']:.1f} µs a rollout, the raw loop "
        f"{each['raw']:.1f} µs; evalgate's own work {each['evalgate'] - each['raw']:.1f} µs"
    )


if __name__ == "__main__":
    main()

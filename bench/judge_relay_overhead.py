"""What the judge relay costs a judge call made by grading code in another process.

inspect's grader and verifiers' judges reach evalgate's judge through the loopback relay
(`evalgate/score/relay.py`) instead of calling the judge's server directly. Against a
scripted judge on loopback (answering at once, so the figures are the relay's own overhead):

- direct: the judge's ChatClient asks the judge (the reference: what `scorer: {type: judge}`
  does, no relay);
- relayed, cold cache: an HTTP client posts to the relay, which asks through the same client;
- relayed, warm cache: the same requests again, every reply from the SQLite response cache.

Prints ms per call for each, the relayed/direct ratio, and the cache hits of the warm pass.

Usage: python bench/judge_relay_overhead.py [--calls 400] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from evalgate.config.spec import GraderSpec  # noqa: E402
from evalgate.run.cache import ResponseCache  # noqa: E402
from evalgate.score.relay import Grader, JudgeRelay  # noqa: E402
from evalgate.serve import Endpoint  # noqa: E402
from evalgate.serve.client import ChatClient  # noqa: E402
from tests.conftest import scripted_servers  # noqa: E402


def _messages(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Grade response {i}.\nVERDICT?"}]


async def _gather(n: int, concurrency: int, call: Any) -> float:
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with gate:
            await call(i)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return time.perf_counter() - t0


async def _bench(url: str, calls: int, concurrency: int, cache_dir: Path) -> dict[str, Any]:
    spec = GraderSpec.model_validate(
        {"model": {"name": "j", "backend": "openai", "base_url": url, "model": "bench/judge"}}
    )
    endpoint = Endpoint(base_url=url, model="bench/judge")
    out: dict[str, Any] = {}
    async with ChatClient(endpoint, spec.sampling, max_concurrent=concurrency) as client:
        out["direct"] = await _gather(calls, concurrency, lambda i: client.chat(_messages(i)))
    cache = ResponseCache.in_dir(cache_dir)
    try:
        for name in ("relayed cold", "relayed warm"):
            grader = Grader(spec)
            async with ChatClient(
                endpoint, spec.sampling, max_concurrent=concurrency, cache=cache,
                cache_identity="bench-judge",
            ) as client:  # fmt: skip
                grader.client = client
                async with (
                    JudgeRelay(grader) as relay,
                    aiohttp.ClientSession(
                        connector=aiohttp.TCPConnector(limit=concurrency)
                    ) as http,
                ):
                    tab = relay.open()
                    ep = relay.endpoint(tab)
                    headers = {"Authorization": f"Bearer {ep['api_key']}"}

                    url = ep["base_url"] + "/chat/completions"

                    async def post(i: int, url: str = url, headers: Any = headers) -> None:
                        body = {"model": "x", "messages": _messages(i)}
                        async with http.post(url, json=body, headers=headers) as resp:
                            assert resp.status == 200, await resp.text()
                            await resp.read()

                    out[name] = await _gather(calls, concurrency, post)
                    spent = relay.close(tab)
                    out[f"{name} cache hits"] = spent.cache_hits
                    out[f"{name} calls"] = spent.calls
            cache.flush()  # the warm pass reads what the cold one wrote
    finally:
        cache.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    with (
        contextlib.contextmanager(scripted_servers)() as start,
        tempfile.TemporaryDirectory() as tmp,
    ):
        judge = start(lambda body, n: "Looks right.\nVERDICT: PASS")
        got = asyncio.run(_bench(judge.base_url, args.calls, args.concurrency, Path(tmp)))
    n = args.calls
    print(f"judge calls: {n}, concurrency {args.concurrency}")
    for name in ("direct", "relayed cold", "relayed warm"):
        extra = ""
        if name != "direct":
            extra = f"  ({got[name + ' calls']} calls, {got[name + ' cache hits']} cache hits)"
        print(f"{name:>13}: {1000 * got[name] / n:7.3f} ms/call{extra}")
    print(f"relayed cold / direct: {got['relayed cold'] / got['direct']:.2f}x")
    print(f"relayed warm / direct: {got['relayed warm'] / got['direct']:.2f}x")


if __name__ == "__main__":
    main()

"""Requests/s through the LiteLLM proxy vs straight to the same upstream, in one run.

The upstream is a minimal OpenAI-compatible stub (aiohttp, its own process) that answers at
once, so what the proxy adds per request is what the rates show; ``--embedded`` adds the embedded
model (SmolLM2 on llama.cpp) as a second upstream, where model time dominates. The proxy is the
one the ``litellm`` backend starts (``LiteLLMServer``: generated config, loopback port), and the
load is evalgate's own hot path (``ChatClient``) at each concurrency: a warm-up, then a fixed
number of requests direct, then the same through the proxy. Everything runs on this machine, so
client, proxy and upstream share its cores: read the ratio, not the absolute rates.

Prints, per upstream and concurrency: direct req/s, proxied req/s, proxied/direct, median
latencies, and the CPU time the proxy's process group spent per request (independent of what
else the machine runs: 1000 / that is the most one proxy core can serve); plus its start-up time.

Usage: python bench/serve_overhead.py [--requests 2000] [--concurrency 16 32 64] [--embedded]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evalgate.config.spec.models import LiteLLMModel, LocalModel  # noqa: E402
from evalgate.serve.base import Endpoint  # noqa: E402
from evalgate.serve.client import ChatClient  # noqa: E402
from evalgate.serve.litellm import LiteLLMServer  # noqa: E402

SAMPLING = SimpleNamespace(temperature=0.0, top_p=1.0, max_tokens=8, seed=None)
MESSAGES = [{"role": "user", "content": "What is 3 + 4?"}]


def serve_stub(port: int) -> None:
    """The upstream: answers every chat request at once with a fixed completion and usage."""
    from aiohttp import web

    reply = {
        "id": "stub",
        "object": "chat.completion",
        "created": 0,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "7"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8},
    }

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response({**reply, "model": body.get("model")})

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "stub"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_up(url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the stub exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"the stub did not answer {url} within {timeout:.0f} s")


def _group_cpu_s(pgid: int | None) -> float:
    """CPU seconds (user + system) used so far by the live processes of a process group."""
    if pgid is None:
        return float("nan")
    total, tick = 0.0, os.sysconf("SC_CLK_TCK")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # fields after "(comm)": state ppid pgrp ... utime stime
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


async def _load(endpoint: Endpoint, concurrency: int, requests: int) -> dict[str, float]:
    async with ChatClient(
        endpoint, SAMPLING, max_concurrent=concurrency, max_retries=0, timeout_s=60
    ) as client:
        await asyncio.gather(*(client.chat(MESSAGES) for _ in range(2 * concurrency)))  # warm-up
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(requests):
            queue.put_nowait(i)
        latencies: list[float] = []
        errors = 0

        async def worker() -> None:
            nonlocal errors
            while not queue.empty():
                queue.get_nowait()
                try:
                    latencies.append((await client.chat(MESSAGES)).latency_s)
                except Exception:  # counted, and the rate is of successes only
                    errors += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - t0
    return {
        "rps": len(latencies) / elapsed,
        "p50_ms": 1000 * statistics.median(latencies) if latencies else float("nan"),
        "errors": errors,
    }


def compare(
    label: str,
    direct: Endpoint,
    proxy: tuple[LiteLLMServer, Endpoint],
    concurrencies: list[int],
    requests: int,
) -> None:
    server, proxied = proxy
    print(f"\n{label}: {requests} requests per cell")
    print(f"  {'conc':>4}  {'direct req/s':>12}  {'proxy req/s':>11}  {'ratio':>6}  "
          f"{'p50 direct':>10}  {'p50 proxy':>9}  {'proxy CPU/req':>13}  errors")  # fmt: skip
    for conc in concurrencies:
        d = asyncio.run(_load(direct, conc, requests))
        cpu0 = _group_cpu_s(server.pid)
        p = asyncio.run(_load(proxied, conc, requests))
        # The warm-up's requests count too: 2 x concurrency of them.
        cpu_ms = 1000 * (_group_cpu_s(server.pid) - cpu0) / (requests + 2 * conc)
        print(f"  {conc:>4}  {d['rps']:>12.1f}  {p['rps']:>11.1f}  {p['rps'] / d['rps']:>6.3f}  "
              f"{d['p50_ms']:>8.1f}ms  {p['p50_ms']:>7.1f}ms  {cpu_ms:>11.1f}ms  "
              f"{d['errors']:.0f}/{p['errors']:.0f}", flush=True)  # fmt: skip


def _proxy(model: LiteLLMModel, log_dir: Path) -> tuple[LiteLLMServer, Endpoint, float]:
    environ = {"BENCH_UPSTREAM_KEY": "sk-bench"}
    if os.environ.get("EVALGATE_LITELLM_PYTHON"):  # the proxy's own venv (see README, LiteLLM)
        environ["EVALGATE_LITELLM_PYTHON"] = os.environ["EVALGATE_LITELLM_PYTHON"]
    server = LiteLLMServer(model, log_dir=log_dir, environ=environ)
    t0 = time.perf_counter()
    endpoint = server.__enter__()
    return server, endpoint, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--embedded", action="store_true", help="also the embedded model")
    parser.add_argument("--embedded-requests", type=int, default=64)
    parser.add_argument("--serve-stub", type=int, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.serve_stub:
        serve_stub(args.serve_stub)
        return

    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; "
          "client, proxy and upstream share them")  # fmt: skip
    stack: list[Any] = []
    port = _free_port()
    stub = subprocess.Popen(
        [sys.executable, __file__, "--serve-stub", str(port)], start_new_session=True
    )
    try:
        stub_url = f"http://127.0.0.1:{port}/v1"
        _wait_up(f"{stub_url}/models", stub)
        with tempfile.TemporaryDirectory() as tmp:
            model = LiteLLMModel(
                name="bench",
                backend="litellm",
                model="openai/stub",
                api_base=stub_url,
                api_key_env="BENCH_UPSTREAM_KEY",
            )
            server, proxied, startup = _proxy(model, Path(tmp) / "stub")
            stack.append(server)
            print(f"LiteLLM proxy start-up: {startup:.1f} s")
            direct = Endpoint(base_url=stub_url, model="stub", api_key="sk-bench")
            compare("stub upstream", direct, (server, proxied), args.concurrency, args.requests)
            server.__exit__(None, None, None)
            stack.remove(server)
            if args.embedded:
                from evalgate.serve.llama_cpp import LlamaCppServer

                llama = LlamaCppServer(LocalModel(), log_dir=Path(tmp), environ={})
                llama_ep = llama.__enter__()
                stack.append(llama)
                model = model.model_copy(update={"model": "openai/smollm2",
                                                 "api_base": llama_ep.base_url})  # fmt: skip
                server, proxied, startup = _proxy(model, Path(tmp) / "embedded")
                stack.append(server)
                compare("embedded model upstream (max_tokens 8)", llama_ep, (server, proxied),
                        args.concurrency, args.embedded_requests)  # fmt: skip
    finally:
        for server in reversed(stack):
            server.__exit__(None, None, None)
        stub.terminate()
        stub.wait(10)


if __name__ == "__main__":
    main()

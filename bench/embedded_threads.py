"""The embedded server's threads: one, or every CPU with llama.cpp's threads yielding while they
wait (poll 0, evalgate's default) or spinning (poll 50, llama.cpp's), on an idle machine and
with one core kept busy by another process. Prints the wall time of the same 48 arith requests
at concurrency 4 (the quickstart's) for each setting: the figures behind
``serve._llama_server.replicas``. Measured on 2 cores: one thread 17.0 s idle, 19.0 s
beside a busy core; two threads 11.0 s (yielding) / 11.3 s (spinning) idle, both over 120 s
beside a busy core: hence one single-thread server per CPU by default (bench/embedded_replicas.py),
and these settings only with ``n_threads``.

Usage: python bench/embedded_threads.py [--n 48] [--max-tokens 24]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evalgate.config.spec import LocalModel, Sampling
from evalgate.serve.client import ChatClient
from evalgate.serve.llama_cpp import LlamaCppServer
from evalgate.suites.datasets import arith_items


class _Server(LlamaCppServer):
    """The embedded server with llama.cpp's busy-wait level set."""

    def __init__(self, model: LocalModel, log_dir: Path, poll: int) -> None:
        super().__init__(model, log_dir=log_dir, environ=dict(os.environ))
        self.poll = poll

    def command(self, gguf: Path, port: int) -> list[str]:
        return [*super().command(gguf, port), "--poll", str(self.poll)]


async def _ask(endpoint: object, prompts: list[str], max_tokens: int) -> None:
    sampling = Sampling(temperature=0.0, max_tokens=max_tokens)
    async with ChatClient(endpoint, sampling, max_concurrent=4) as client:  # type: ignore[arg-type]
        await asyncio.gather(*(client.chat([{"role": "user", "content": p}]) for p in prompts))


LIMIT_S = 120.0  # spinning threads beside a busy core can take many minutes: stopped here


def _timed(threads: int, poll: int, prompts: list[str], max_tokens: int, log_dir: Path) -> str:
    with _Server(LocalModel(n_threads=threads), log_dir, poll) as endpoint:
        t0 = time.perf_counter()
        try:
            asyncio.run(asyncio.wait_for(_ask(endpoint, prompts, max_tokens), LIMIT_S))
        except TimeoutError:
            return f"> {LIMIT_S:.0f} s"
        return f"{time.perf_counter() - t0:.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=48)
    parser.add_argument("--max-tokens", type=int, default=24)
    args = parser.parse_args()
    cpus = len(os.sched_getaffinity(0))
    prompts = [f"What is {it.prompt}?" for it in arith_items(args.n, 0, 20, ["+", "-"])]
    settings = [(1, 0), (cpus, 0), (cpus, 50)]
    print(f"{args.n} arith requests, concurrency 4, {cpus} CPUs, load {os.getloadavg()[0]:.1f}")
    print("| threads | poll | idle machine | one core busy |")
    print("|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for threads, poll in settings:
            idle = _timed(threads, poll, prompts, args.max_tokens, Path(tmp))
            busy_proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            try:
                busy = _timed(threads, poll, prompts, args.max_tokens, Path(tmp))
            finally:
                busy_proc.kill()
                busy_proc.wait()
            print(f"| {threads} | {poll} | {idle} | {busy} |", flush=True)


if __name__ == "__main__":
    main()

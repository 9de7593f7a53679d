"""The embedded server on N CPUs: single-thread replicas behind the relay (the default) against
one single-thread server (``n_threads: 1``, the previous default on 2 cores), in one run.

Sends the quickstart's work (60 arith + 40 capitals prompts, its system prompts, 16 tokens,
temperature 0, concurrency 4) through evalgate's own client to each, alternating the two for
``--repeats`` rounds, and prints each one's wall time, the server's CPU time (user + system of
its process, robust to other load) and whether the completions are the same. On a quiet 2-core
machine the replicas should take about half the wall time for the same CPU time; beside other
work they still never wait on each other (no barrier between their threads).

Usage: python bench/embedded_replicas.py [--repeats 2] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

from evalgate.config.spec import LocalModel, Sampling
from evalgate.serve.client import ChatClient
from evalgate.serve.llama_cpp import LlamaCppServer
from evalgate.suites.datasets import arith_items

ROOT = Path(__file__).resolve().parent.parent
ARITH_SYSTEM = "You are a calculator. Reply with the number only."
CAPITALS_SYSTEM = "Answer with the name of the city only."


def _conversations() -> list[list[dict[str, str]]]:
    arith = [
        [
            {"role": "system", "content": ARITH_SYSTEM},
            {"role": "user", "content": f"What is {i.prompt}?"},
        ]
        for i in arith_items(60, 0, 20, ["+", "-"])
    ]
    rows = (ROOT / "examples" / "quickstart" / "capitals.jsonl").read_text().splitlines()
    capitals = [
        [
            {"role": "system", "content": CAPITALS_SYSTEM},
            {"role": "user", "content": f"What is the capital of {json.loads(r)['prompt']}?"},
        ]
        for r in rows
    ]
    return arith + capitals


async def _ask(endpoint: object, convs: list[list[dict[str, str]]], concurrency: int) -> list[str]:
    sampling = Sampling(temperature=0.0, max_tokens=16)
    async with ChatClient(endpoint, sampling, max_concurrent=concurrency) as client:  # type: ignore[arg-type]
        replies = await asyncio.gather(*(client.chat(c) for c in convs))
    return [r.text for r in replies]


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _timed(
    model: LocalModel, convs: list, concurrency: int, log_dir: Path
) -> tuple[float, float, list[str]]:
    server = LlamaCppServer(model, log_dir=log_dir, environ=dict(os.environ))
    with server as endpoint:
        assert server._proc is not None
        cpu0, t0 = _cpu(server._proc.pid), time.perf_counter()
        replies = asyncio.run(_ask(endpoint, convs, concurrency))
        return time.perf_counter() - t0, _cpu(server._proc.pid) - cpu0, replies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    convs = _conversations()
    cpus = len(os.sched_getaffinity(0))
    print(f"{len(convs)} requests, concurrency {args.concurrency}, {cpus} CPUs")
    print("| server | wall | server CPU | load | same completions |")
    print("|---|---:|---:|---:|---|")
    first: list[str] | None = None
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            for label, model in (
                ("replicas (default)", LocalModel()),
                ("one server, 1 thread", LocalModel(n_threads=1)),
            ):
                wall, cpu, replies = _timed(model, convs, args.concurrency, Path(tmp))
                first = first or replies
                print(
                    f"| {label} | {wall:.1f} s | {cpu:.1f} s | {os.getloadavg()[0]:.1f} | "
                    f"{replies == first} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()

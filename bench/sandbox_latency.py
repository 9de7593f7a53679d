"""What does a sandbox cost? bubblewrap (``local``) against plain subprocesses, in one run.

Two measurements per backend, the non-isolating ``subprocess`` backend being the reference:

- latency: create + exec(``true``) + destroy, one sandbox at a time; median and p90 of each
  phase and of the total (the goal for bubblewrap: a median total under 50 ms);
- throughput: tasks per minute at concurrency 8, a task being one of the built-in agent-basics
  tasks run end to end with its reference solution as the agent (fresh sandbox, workspace copied
  in, solution, processes killed, workspace copied out, sandbox destroyed, a second fresh sandbox
  for the check with the workspace and check files copied in, check, destroy).

Prints the figures and the bubblewrap/subprocess ratios. The host's load matters: the figures
are only comparable within one run (both backends are measured in it, interleaved).

``--no-cgroup`` measures bubblewrap as it runs where no cgroup may be created (inside a Docker
action): the sandbox's supervisor then accounts for memory and processes itself every 25 ms.

Usage: python bench/sandbox_latency.py [--iterations 60] [--tasks 64] [--concurrency 8]
       [--no-cgroup]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evalgate.sandbox import SandboxConfig, open_backend  # noqa: E402
from evalgate.suites.agent import load_tasks, run_task  # noqa: E402

BACKENDS = ("subprocess", "local")


class SolutionAgent:
    """The reference solution as the agent: measures the harness, not a model."""

    async def run(self, box: Any, task: Any, client: Any, **kw: Any) -> None:
        await box.exec(["sh", "-s"], stdin=task.solution, timeout_s=60)


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return 1e3 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def latency(backends: dict[str, Any], iterations: int) -> dict[str, dict[str, list[float]]]:
    config = SandboxConfig(timeout_s=60)
    phases: dict[str, dict[str, list[float]]] = {
        name: {"create": [], "exec": [], "destroy": [], "total": []} for name in backends
    }
    for i in range(iterations + 3):
        for name, backend in backends.items():  # interleaved: both see the same host load
            t0 = time.perf_counter()
            box = await backend.create(config)
            t1 = time.perf_counter()
            result = await box.exec(["true"])
            t2 = time.perf_counter()
            await box.destroy()
            t3 = time.perf_counter()
            assert result.ok, result
            if i >= 3:  # warm-up: first-use costs (page cache, probes) are not the steady state
                for key, value in (
                    ("create", t1 - t0), ("exec", t2 - t1), ("destroy", t3 - t2),
                    ("total", t3 - t0),
                ):  # fmt: skip
                    phases[name][key].append(value)
    return phases


async def throughput(backend: Any, n_tasks: int, concurrency: int) -> tuple[float, int]:
    tasks = load_tasks(ROOT / "benchmarks" / "agent-basics")
    work = [tasks[i % len(tasks)] for i in range(n_tasks)]
    config = SandboxConfig(timeout_s=120)
    agent = SolutionAgent()
    gate = asyncio.Semaphore(concurrency)
    passed = 0

    async def one(task: Any) -> None:
        nonlocal passed
        async with gate:
            result = await run_task(task, agent, None, backend=backend, sandbox=config)
            passed += result.reward == 1.0

    t0 = time.perf_counter()
    await asyncio.gather(*(one(t) for t in work))
    return time.perf_counter() - t0, passed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--no-cgroup", action="store_true", help="bubblewrap without cgroups")
    args = parser.parse_args()
    if args.no_cgroup:
        from evalgate.sandbox import bubblewrap

        bubblewrap._Cgroup.create = classmethod(lambda cls, name, config: None)  # type: ignore[method-assign]
    backends = {name: open_backend(name) for name in BACKENDS}
    print(
        f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
        f"{args.iterations} iterations, {args.tasks} tasks at concurrency {args.concurrency}"
    )
    limits = backends["local"].limits(SandboxConfig())
    print(f"local backend limits: processes: {limits['processes']}; memory: {limits['memory']}")

    phases = await latency(backends, args.iterations)
    print("\ncreate + exec(true) + destroy, one at a time (ms)")
    print(f"{'backend':<11} {'phase':<8} {'median':>8} {'p90':>8}")
    for name in backends:
        for phase, values in phases[name].items():
            print(f"{name:<11} {phase:<8} {_ms(values, 0.5):8.1f} {_ms(values, 0.9):8.1f}")
    ref = statistics.median(phases["subprocess"]["total"])
    bw = statistics.median(phases["local"]["total"])
    goal = "met" if bw < 0.050 else "missed"
    print(f"bubblewrap median total {1e3 * bw:.1f} ms (goal < 50 ms: {goal}); {bw / ref:.1f}× ref")

    print(f"\nagent-basics tasks with reference solutions, concurrency {args.concurrency}")
    rates = {}
    for name, backend in backends.items():
        elapsed, passed = await throughput(backend, args.tasks, args.concurrency)
        rates[name] = 60 * args.tasks / elapsed
        print(
            f"{name:<11} {rates[name]:8.0f} tasks/min  ({args.tasks} tasks in {elapsed:.1f} s, "
            f"{passed} passed)"
        )
    print(f"bubblewrap/subprocess throughput: {rates['local'] / rates['subprocess']:.2f}×")


if __name__ == "__main__":
    asyncio.run(main())

"""evalgate's overhead over a raw aiohttp loop in the same run: the figures of issue #36.

Against a free OpenAI-compatible stub (bench/engine_throughput.py's: its own process on core 0,
the clients on core 1), 2,000 in-memory ``arith`` items at concurrency 64, no cache, at 0 ms and
20 ms of added latency, repeats interleaved so a noisy spell hits both alike:

- ``raw loop``: 64 aiohttp workers, one ClientSession, pre-encoded bodies (the client's limit);
- ``floor``: the raw loop importing, first, the libraries every run imports besides aiohttp
  (pydantic, PyYAML, Jinja), and aiohttp as a run does (``evalgate._tls``: its CA bundle loaded
  on first use, which an http:// stub never makes): no run that keeps them goes under it;
- ``evalgate local``: ``python -m evalgate local CONFIG --no-cache``, as a user runs it;

and prints, per latency, the median whole-process time of each and their ratio (goal ≤ 1.3× at
0 ms, ≤ 1.1× at 20 ms), and the request phase at the stub (first request start → last end; the
raw loop's own perf_counter phase beside it), with what each side spends before its first request
(spawn → phase) and after its last reply (phase → the process gone), and what evalgate spends
beyond the floor beside the room the goal leaves above it. Then the CPU time (user +
sys) of each process, the figure other load on a shared machine disturbs least, and the CPU time
per rollout of each side: (a run of n's − a run of 1's) / (n − 1), so start-up cancels out.
Then a 1-item run, whole process, beside the raw loop sending 1 request, a bare aiohttp request
and ``python -c pass`` (goal: under 0.5 s on an idle 2-core machine). It never fails on a
figure: CI prints them (.ci/run); the load average is printed with them, since on a shared
machine ratios and CPU times are the figures to read.

Usage: python bench/overhead.py [--n 2000] [--repeats 3] [--latency-ms 0 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine_throughput as eng  # the stub, the raw loop and the CLI runner
from startup import BARE_REQUEST  # the 1-item floor: import aiohttp, one POST

ROOT = Path(__file__).resolve().parent.parent
GOALS = {0.0: 1.3, 20.0: 1.1}  # evalgate local / raw loop, whole process (issue #36)
RAW_ONE, OURS_ONE = "raw loop, 1 item", "evalgate local, 1 item"
Run = dict[str, float]


def _run(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall time, CPU time: the child's own user + sys) of one command."""
    wall, _, _, cpu = eng._spawn_usage(args, env)
    return wall, cpu


def _one_item(tmp: Path, base_url: str, env: dict[str, str], repeats: int) -> dict[str, Run]:
    """Medians (wall and CPU) of a 1-item `evalgate local` run, the raw loop sending 1 request,
    a bare aiohttp request and `python -c pass`."""
    folder = tmp / "one-item"
    folder.mkdir(exist_ok=True)
    config = eng._write_config(folder, base_url, 1, 1)
    url = base_url  # BARE_REQUEST posts to {url}/chat/completions
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "bare aiohttp request": [sys.executable, "-c", BARE_REQUEST, url],
        RAW_ONE: [
            sys.executable,
            eng.__file__,
            "--ceiling",
            f"{base_url}/chat/completions",
            "--n",
            "1",
            "--concurrency",
            "1",
        ],
        OURS_ONE: [
            sys.executable,
            "-m",
            "evalgate",
            "local",
            str(config),
            "--output",
            str(tmp / "one"),
            "--no-cache",
        ],
    }
    for argv in commands.values():  # warm-up: bytecode and compiled templates written once
        _run(argv, env)
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(repeats):
        for name, argv in commands.items():
            runs[name].append(_run(argv, env))
    return {
        name: {
            "wall_s": statistics.median(w for w, _ in values),
            "cpu_s": statistics.median(c for _, c in values),
        }
        for name, values in runs.items()
    }


def _per_rollout(n_cpu: float, one_cpu: float, n: int) -> float:
    """CPU time a rollout adds: (a run of n's − a run of 1's) / (n − 1), start-up cancelled."""
    return (n_cpu - one_cpu) / max(1, n - 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 20.0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the evalgate checkout to measure")
    args = parser.parse_args()
    load0 = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        env = eng._client_env(tmp, args.root.resolve())
        # Bytecode cached, as pip leaves an installed package (bench/startup.py does the same): a
        # PYTHONDONTWRITEBYTECODE environment would time the compiler on every run instead.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "evalgate-bench-pycache")
        one = None
        for latency in args.latency_ms:
            stub, base_url = eng._start_stub(latency, tmp)
            try:
                config = eng._write_config(tmp, base_url, args.n, args.concurrency)
                url = f"{base_url}/chat/completions"
                raw: list[dict[str, float]] = []
                floor: list[dict[str, float]] = []
                ours: list[dict[str, float]] = []
                eng._evalgate_cli(config, tmp, args.n, env)  # warm-up (bytecode, templates)
                for _ in range(args.repeats):  # interleaved
                    raw.append(eng._ceiling(url, args.n, args.concurrency, env))
                    floor.append(eng._ceiling(url, args.n, args.concurrency, env, libraries=True))
                    ours.append(eng._evalgate_cli(config, tmp, args.n, env))
                if one is None:  # against the 0 ms stub (any will do: one request)
                    one = _one_item(tmp, base_url, env, args.repeats)
            finally:
                stub.kill()
                stub.wait()
            fields = ("wall_s", "phase_s", "proc_cpu_s", "startup_s", "tail_s")
            med = {
                k: {f: statistics.median(r[f] for r in runs) for f in fields}
                for k, runs in (("raw", raw), ("floor", floor), ("ours", ours))
            }
            rows.append((latency, med))
    load1 = os.getloadavg()[0]
    print(
        f"evalgate overhead: {args.n} arith items, concurrency {args.concurrency}, no cache, "
        f"median of {args.repeats}; {os.cpu_count()} CPUs, load average {load0:.1f} → {load1:.1f}"
    )
    assert one is not None
    print(
        "| latency | raw loop | evalgate local | ratio (goal) | request phase: raw | evalgate "
        "| floor: raw loop + libraries |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for latency, med in rows:
        raw, floor, ours = med["raw"], med["floor"], med["ours"]
        goal = GOALS.get(latency)
        print(
            f"| {latency:g} ms | {raw['wall_s']:.2f} s | {ours['wall_s']:.2f} s | "
            f"{ours['wall_s'] / raw['wall_s']:.2f}×{f' (≤ {goal}×)' if goal else ''} | "
            f"{raw['phase_s']:.2f} s | {ours['phase_s']:.2f} s "
            f"({ours['phase_s'] / raw['phase_s']:.2f}×) | {floor['wall_s']:.2f} s "
            f"({floor['wall_s'] / raw['wall_s']:.2f}×) |"
        )
    # The floor: the raw loop importing the libraries every run imports besides aiohttp
    # (pydantic, PyYAML, Jinja: eng.LIBRARIES), and aiohttp as a run does. What evalgate spends
    # beyond it is its own work.
    print()
    print("| latency | evalgate beyond the floor: wall | CPU | goal's room beyond the floor |")
    print("|---:|---:|---:|---:|")
    for latency, med in rows:
        raw, floor, ours = med["raw"], med["floor"], med["ours"]
        goal = GOALS.get(latency)
        room = f"{(goal * raw['wall_s'] - floor['wall_s']) * 1000:.0f} ms" if goal else "–"
        print(
            f"| {latency:g} ms | {(ours['wall_s'] - floor['wall_s']) * 1000:.0f} ms | "
            f"{(ours['proc_cpu_s'] - floor['proc_cpu_s']) * 1000:.0f} ms | {room} |"
        )
    # Where each side's wall time goes: what the whole-process ratio holds beyond the request
    # phase is the fixed work before the first request and after the last reply.
    print()
    print(
        "| latency | before the first request: raw | evalgate | request phase: raw | evalgate "
        "| after the last reply: raw | evalgate |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for latency, med in rows:
        raw, ours = med["raw"], med["ours"]
        print(
            f"| {latency:g} ms | {raw['startup_s'] * 1000:.0f} ms | "
            f"{ours['startup_s'] * 1000:.0f} ms | {raw['phase_s'] * 1000:.0f} ms | "
            f"{ours['phase_s'] * 1000:.0f} ms | {raw['tail_s'] * 1000:.0f} ms | "
            f"{ours['tail_s'] * 1000:.0f} ms |"
        )
    # CPU time (user + sys, each process's own) is what other load on a shared machine disturbs
    # least: whole process, and per rollout with the 1-item run's start-up taken out.
    print()
    print(
        "| latency | CPU: raw loop | evalgate local | ratio "
        "| CPU per rollout: raw | evalgate | ratio |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    per_rollout = {}
    for latency, med in rows:
        raw, ours = med["raw"], med["ours"]
        raw_each = _per_rollout(raw["proc_cpu_s"], one[RAW_ONE]["cpu_s"], args.n)
        ours_each = _per_rollout(ours["proc_cpu_s"], one[OURS_ONE]["cpu_s"], args.n)
        per_rollout[latency] = {"raw_us": raw_each * 1e6, "ours_us": ours_each * 1e6}
        print(
            f"| {latency:g} ms | {raw['proc_cpu_s']:.2f} s | {ours['proc_cpu_s']:.2f} s | "
            f"{ours['proc_cpu_s'] / raw['proc_cpu_s']:.2f}× | {raw_each * 1e6:.0f} µs | "
            f"{ours_each * 1e6:.0f} µs | {ours_each / raw_each:.2f}× |"
        )
    bare = one["bare aiohttp request"]["wall_s"]
    print()
    for name, figures in one.items():
        seconds = figures["wall_s"]
        print(
            f"{name:<24} {seconds * 1000:6.0f} ms  ({seconds / bare:.2f}× a bare request), "
            f"CPU {figures['cpu_s'] * 1000:.0f} ms"
        )
    print(
        json.dumps(
            {"load": [load0, load1], "rows": rows, "one_item": one, "per_rollout": per_rollout}
        )
    )


if __name__ == "__main__":
    main()

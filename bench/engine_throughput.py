"""How fast is evalgate's engine against a free model, compared with a raw aiohttp loop?

One run measures, on the same workload (2,000 single-turn exact-match `arith` items, concurrency
64, no cache) against an OpenAI-compatible stub on loopback at 0 ms and 20 ms of added latency:

- ``ceiling``: a raw aiohttp loop (64 workers, one ClientSession, pre-encoded bodies, json.loads),
  in its own process: the best a Python client can do on this machine;
- ``evalgate engine``: ``run_suite`` + ``ChatClient`` in-process, request phase timed with
  perf_counter: the engine without interpreter start-up or report writing;
- ``evalgate local``: ``python -m evalgate local CONFIG --output DIR`` with ``CI=true`` and an
  ``openai`` backend pointing at the stub, as a user runs it. Its request phase is read from
  results.jsonl (first request start → last request end).

The stub is a separate process pinned to core 0 (``os.sched_setaffinity``), the clients to core 1,
so the two don't share a core. Printed per case: samples/s of the request phase and its ratio to
the ceiling, the client's CPU time per request (user + sys over the phase: the figure that other
load on a shared machine disturbs least), whole-process wall time, start-up (spawn → first
request: interpreter, imports, config, plan; no model server, the backend is an existing
endpoint) and peak RSS; then the import time of ``evalgate.cli`` and ``evalgate.pipeline``.

Goals (issue #8): request phase ≥ 50 % of the ceiling at 0 ms and ≥ 80 % at 20 ms; whole process
≤ 2 s at 0 ms; start-up < 1 s. Repeats are interleaved and summarised by the best run (``--stat
median`` for medians): on a shared machine other processes only ever slow a run down.

Usage: python bench/engine_throughput.py [--n 2000] [--concurrency 64] [--repeats 3]
       [--latency-ms 0 20] [--stat best|median] [--root CHECKOUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STUB_CORE, CLIENT_CORE = 0, 1


# --------------------------------------------------------------------------------------------
# The stub: a minimal HTTP/1.1 keep-alive server speaking just enough of the chat API.
# Raw asyncio protocol rather than aiohttp.web: the stub must never be the bottleneck.

_PROMPT = re.compile(rb"What is (-?\d+) ([-+*]) (-?\d+)\?")
_MODEL = re.compile(rb'"model":\s*"([^"]*)"')
# The reply names the model asked for, as a server serving it does: one naming another model is
# a fallback (evalgate.serve.served), which every record would note.
_RESPONSE = (
    '{"id":"cmpl-stub","object":"chat.completion","model":"%s","choices":[{"index":0,'
    '"message":{"role":"assistant","content":"%s"},"finish_reason":"stop"}],'
    '"usage":{"prompt_tokens":20,"completion_tokens":2,"total_tokens":22}}'
)


def _answer(body: bytes) -> bytes:
    m = _PROMPT.search(body)
    if m is None:
        text = "?"
    else:
        a, op, b = int(m[1]), m[2], int(m[3])
        text = str(a + b if op == b"+" else a - b if op == b"-" else a * b)
    model = _MODEL.search(body)
    payload = (_RESPONSE % (model[1].decode() if model else "stub", text)).encode()
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: keep-alive\r\n\r\n" % len(payload)
    )
    return head + payload


class _StubProtocol(asyncio.Protocol):
    latency_s = 0.0

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.buf = b""
        self.loop = asyncio.get_running_loop()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].lower()
            if head.startswith(b"get "):  # /v1/models and the like
                self.buf = self.buf[end + 4 :]
                payload = b'{"object":"list","data":[{"id":"stub"}]}'
                self.transport.write(
                    b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload)
                )
                continue
            i = head.find(b"content-length:")
            size = int(head[i + 15 : head.find(b"\r\n", i) if b"\r\n" in head[i:] else None])
            if len(self.buf) < end + 4 + size:
                return
            body = self.buf[end + 4 : end + 4 + size]
            self.buf = self.buf[end + 4 + size :]
            response = _answer(body)
            if self.latency_s:
                self.loop.call_later(self.latency_s, self._send, response)
            else:
                self.transport.write(response)

    def _send(self, response: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(response)


def serve(latency_ms: float, port_file: Path) -> None:
    _pin(STUB_CORE)
    _StubProtocol.latency_s = latency_ms / 1000

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_StubProtocol, "127.0.0.1", 0, backlog=1024)
        port_file.write_text(str(server.sockets[0].getsockname()[1]))
        await asyncio.Event().wait()

    asyncio.run(main())


# --------------------------------------------------------------------------------------------
# The ceiling: a raw aiohttp loop, as lean as a Python client gets.


# The libraries every `evalgate local` run imports besides aiohttp (its config's validation, its
# YAML, its scorecard's templates): the raw loop importing them too, and aiohttp as a run does
# (evalgate._tls), is the floor no run that keeps them can go under (bench/overhead.py's "floor"
# column).
LIBRARIES = ("pydantic:BaseModel", "yaml", "jinja2")


def ceiling(url: str, n: int, concurrency: int, libraries: bool = False) -> None:
    _pin(CLIENT_CORE)
    if libraries:
        import importlib

        for name in LIBRARIES:
            module, _, attr = name.partition(":")
            loaded = importlib.import_module(module)
            if attr:
                getattr(loaded, attr)  # pydantic's names load lazily, on first access
        # aiohttp as a run imports it: its default TLS contexts' CA loads held back (#36); a
        # checkout from before that (--root) imports it as the raw loop does.
        try:
            from evalgate._tls import aiohttp
        except ImportError:
            import aiohttp
    else:
        import aiohttp

    from evalgate.suites.datasets import arith_items

    items = arith_items(n, 0, 20, ["+", "-"])
    bodies = [
        json.dumps(
            {
                "model": "bench/stub",
                "messages": [
                    {"role": "system", "content": "You are a calculator."},
                    {"role": "user", "content": f"What is {it.prompt}?"},
                ],
                "temperature": 0.0,
                "top_p": 1.0,
                "max_tokens": 16,
                "seed": 0,
            }
        ).encode()
        for it in items
    ]

    async def main() -> tuple[float, int]:
        correct = 0
        work = iter(range(n))
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=concurrency),
            headers={"Content-Type": "application/json"},
        ) as session:

            async def worker() -> None:
                nonlocal correct
                for i in work:
                    async with session.post(url, data=bodies[i]) as resp:
                        data = json.loads(await resp.read())
                    correct += data["choices"][0]["message"]["content"] == items[i].answer

            nonlocal started, ended
            started, t0 = time.time(), time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            phase = time.perf_counter() - t0
            ended = started + phase
            return phase, correct

    started = ended = 0.0  # the request phase's start and end (the epoch's clock)
    cpu0 = time.process_time()
    phase, correct = asyncio.run(main())
    cpu = time.process_time() - cpu0
    print(
        json.dumps(
            {"phase_s": phase, "correct": correct, "cpu_s": cpu, "start": started, "end": ended}
        )
    )


# --------------------------------------------------------------------------------------------
# evalgate's engine in-process: the request phase without start-up or reports.


def engine(config: Path, n: int) -> None:
    _pin(CLIENT_CORE)
    from evalgate.config.load import load_config
    from evalgate.run.engine import run_suite
    from evalgate.serve.base import Endpoint
    from evalgate.serve.client import ChatClient
    from evalgate.suites import build_suite

    cfg = load_config(config, [])
    bench = cfg.benchmarks[0]
    model = cfg.models[0]
    suite = build_suite(bench)
    endpoint = Endpoint(base_url=model.base_url, model=model.model, model_id=model.model)
    ev = bench.eval

    async def main() -> tuple[float, list[dict[str, Any]]]:
        async with ChatClient(
            endpoint,
            bench.sampling,
            timeout_s=ev.request_timeout_s,
            max_retries=ev.max_retries,
            max_concurrent=ev.max_concurrent,
        ) as client:
            with tempfile.TemporaryFile("w+", encoding="utf-8") as journal:
                t0 = time.perf_counter()
                records = await run_suite(
                    suite,
                    client,
                    rollouts=1,
                    max_concurrent=ev.max_concurrent,
                    journal=journal,
                    on_result=lambda rec: None,
                )
                return time.perf_counter() - t0, records

    cpu0 = time.process_time()
    phase, records = asyncio.run(main())
    cpu = time.process_time() - cpu0
    correct = sum(r["reward"] == 1.0 for r in records)
    print(json.dumps({"phase_s": phase, "correct": correct, "cpu_s": cpu}))


# --------------------------------------------------------------------------------------------
# The orchestrator.


def _pin(core: int) -> None:
    # Stub and client on different cores; silently skipped where affinity is unsupported.
    try:
        if core < (os.cpu_count() or 1):
            os.sched_setaffinity(0, {core})
    except (AttributeError, OSError):
        pass


def _since(t0: float) -> float:
    return time.perf_counter() - t0


def _spawn_rss(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Like _spawn, but the child's own peak RSS via os.wait4."""
    wall, rss, stdout, _ = _spawn_usage(args, env)
    return wall, rss, stdout


def _spawn_usage(
    args: list[str], env: dict[str, str] | None = None
) -> tuple[float, float, str, float]:
    """(wall time, peak RSS in MB, stdout, CPU time: user + sys) of one child, via os.wait4: its
    own figures, not those of other processes on a shared machine."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(args, stdout=out, stderr=err, env=env, cwd=env.get("HOME"))
        _, status, usage = os.wait4(proc.pid, 0)
        wall = _since(t0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(args[:4])}… failed ({proc.returncode}):\n{stderr[-3000:]}")
    return wall, usage.ru_maxrss / 1024, stdout, usage.ru_utime + usage.ru_stime


def _write_config(folder: Path, base_url: str, n: int, concurrency: int) -> Path:
    path = folder / "evals.yaml"
    path.write_text(
        f"""
models:
  - name: stub
    backend: openai
    base_url: {base_url}
    model: bench/stub
benchmarks:
  - name: arith
    size: {n}
    scorer: {{type: exact}}
    eval: {{num_examples: {n}, max_concurrent: {concurrency}}}
""",
        encoding="utf-8",
    )
    return path


def _client_env(tmp: Path, root: Path) -> dict[str, str]:
    # PYTHONPATH picks the checkout under test (children run with cwd=tmp, so it comes first).
    # Without the test suite's side venvs (.ci/run exports them): with EVALGATE_LITELLM_PYTHON,
    # every run started that venv's Python to find LiteLLM's price list and read it (~40 ms
    # before its first request), which an install as the README says never does.
    side_venvs = ("EVALGATE_LITELLM_PYTHON", "EVALGATE_INSPECT_PYTHON")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "INPUT_")) and k not in side_venvs
    }
    env.update(CI="true", HOME=str(tmp), PYTHONPATH=str(root))
    return env


def _evalgate_cli(config: Path, tmp: Path, n: int, env: dict[str, str]) -> dict[str, float]:
    out = tmp / f"out-{time.monotonic_ns()}"
    args = [sys.executable, "-c", _PINNED_CLI, str(config), str(out)]
    spawned = time.time()
    wall, rss, _, cpu = _spawn_usage(args, env)
    (results,) = out.glob("evals/*/*/results.jsonl")
    starts, ends, correct = [], [], 0
    for line in results.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        t = rec["timing"]
        starts.append(t["start"])
        ends.append(t["start"] + t["latency_ms"] / 1000)
        correct += rec["reward"] == 1.0
    if len(starts) != n or correct != n:
        sys.exit(f"evalgate: {len(starts)} results, {correct} correct; expected {n}")
    phase = max(ends) - min(starts)
    return {
        "wall_s": wall,
        "phase_s": phase,
        "startup_s": min(starts) - spawned,
        "tail_s": spawned + wall - max(ends),  # last reply → the process gone
        "rss_mb": rss,
        "proc_cpu_s": cpu,  # the whole process's user + sys
    }


# `python -m evalgate local` with the client pinned to its core (runpy keeps it the real entry).
_PINNED_CLI = (
    "import os, runpy, sys\n"
    f"os.sched_setaffinity(0, {{{CLIENT_CORE}}}) if hasattr(os, 'sched_setaffinity') and "
    f"(os.cpu_count() or 1) > {CLIENT_CORE} else None\n"
    "sys.argv = ['evalgate', 'local', sys.argv[1], '--output', sys.argv[2], '--no-cache']\n"
    "runpy.run_module('evalgate', run_name='__main__', alter_sys=True)\n"
)


def _ceiling(
    url: str, n: int, concurrency: int, env: dict[str, str], *, libraries: bool = False
) -> dict[str, float]:
    args = [sys.executable, __file__, "--ceiling", url, "--n", str(n)]
    args += ["--concurrency", str(concurrency)] + (["--libraries"] if libraries else [])
    spawned = time.time()
    wall, rss, out, cpu = _spawn_usage(args, env)
    data = json.loads(out)
    if data["correct"] != n:
        sys.exit(f"ceiling: {data['correct']}/{n} correct")
    return {
        "wall_s": wall,
        "phase_s": data["phase_s"],
        "startup_s": data["start"] - spawned,  # spawn → the request phase
        "tail_s": spawned + wall - data["end"],  # the request phase's end → the process gone
        "cpu_s": data["cpu_s"],
        "rss_mb": rss,
        "proc_cpu_s": cpu,
    }


def _engine(config: Path, n: int, env: dict[str, str]) -> dict[str, float]:
    args = [sys.executable, __file__, "--engine", str(config), "--n", str(n)]
    wall, rss, out = _spawn_rss(args, env)
    data = json.loads(out)
    if data["correct"] != n:
        sys.exit(f"engine: {data['correct']}/{n} correct")
    return {"wall_s": wall, "phase_s": data["phase_s"], "cpu_s": data["cpu_s"], "rss_mb": rss}


def _import_time(module: str, env: dict[str, str], repeats: int) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    times = [float(_spawn_rss([sys.executable, "-c", code], env)[2]) for _ in range(repeats)]
    return min(times)


def _summary(runs: list[dict[str, float]], stat: str) -> dict[str, float]:
    # best: the fastest run per figure. Other processes only ever slow a run down, so on a shared
    # machine the minimum is the better estimate of what the code costs.
    pick = min if stat == "best" else statistics.median
    return {k: pick(r[k] for r in runs) for k in runs[0]}


def _start_stub(latency_ms: float, tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    port_file = tmp / f"port-{latency_ms}"
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(latency_ms), "--port-file", str(port_file)]
    )
    deadline = time.monotonic() + 20
    while not (port_file.exists() and port_file.read_text()):
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            sys.exit("the stub did not start")
        time.sleep(0.02)
    return proc, f"http://127.0.0.1:{port_file.read_text()}/v1"


def orchestrate(args: argparse.Namespace) -> None:
    root = args.root.resolve()
    print(
        f"engine throughput: {args.n} arith items, exact match, concurrency {args.concurrency}, "
        f"cache off, {os.cpu_count()} cores (stub on core {STUB_CORE}, clients on core "
        f"{CLIENT_CORE}), {args.stat} of {args.repeats} runs, evalgate from {root}"
    )
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        env = _client_env(tmp, root)
        imports = {
            m: _import_time(m, env, args.repeats) for m in ("evalgate.cli", "evalgate.pipeline")
        }
        rows = []
        for latency in args.latency_ms:
            stub, base_url = _start_stub(latency, tmp)
            try:
                config = _write_config(tmp, base_url, args.n, args.concurrency)
                url = f"{base_url}/chat/completions"
                runs: dict[str, list[dict[str, float]]] = {"ceiling": [], "engine": [], "cli": []}
                for _ in range(args.repeats):  # interleaved: a noisy spell hits all three alike
                    runs["ceiling"].append(_ceiling(url, args.n, args.concurrency, env))
                    runs["engine"].append(_engine(config, args.n, env))
                    runs["cli"].append(_evalgate_cli(config, tmp, args.n, env))
            finally:
                stub.kill()
                stub.wait()
            rows.append((latency, {k: _summary(v, args.stat) for k, v in runs.items()}))
    print()
    print(
        "| latency | run | samples/s | × ceiling | request phase | client CPU/request "
        "| whole process | start-up | peak RSS |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    names = {
        "ceiling": "ceiling (raw aiohttp)",
        "engine": "evalgate engine (in-process)",
        "cli": "evalgate local (CLI)",
    }
    for latency, figures in rows:
        ceiling_rate = args.n / figures["ceiling"]["phase_s"]
        for key, name in names.items():
            r = figures[key]
            rate = args.n / r["phase_s"]
            startup = f"{r['startup_s']:.2f} s" if "startup_s" in r else "–"
            cpu = f"{r['cpu_s'] / args.n * 1e6:.0f} µs" if "cpu_s" in r else "–"
            print(
                f"| {latency:g} ms | {name} | {rate:,.0f} | {rate / ceiling_rate:.0%} | "
                f"{r['phase_s']:.2f} s | {cpu} | {r['wall_s']:.2f} s | {startup} | "
                f"{r['rss_mb']:.0f} MB |"
            )
    print()
    for module, seconds in imports.items():
        print(f"import {module}: {seconds:.2f} s (fresh interpreter, {args.stat})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 20.0])
    parser.add_argument(
        "--stat", choices=["best", "median"], default="best", help="how repeats are summarised"
    )
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the evalgate checkout to measure (default: this)"
    )
    parser.add_argument("--serve", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--port-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--ceiling", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--engine", metavar="CONFIG", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--libraries", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, args.port_file)
    elif args.ceiling:
        ceiling(args.ceiling, args.n, args.concurrency, args.libraries)
    elif args.engine:
        engine(args.engine, args.n)
    else:
        orchestrate(args)


if __name__ == "__main__":
    main()

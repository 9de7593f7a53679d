"""The embedded model's server: llama.cpp's C++ server (xllamacpp wheel) against the server it
replaced (llama-cpp-python[server] 0.3.36, which compiles llama.cpp on install), in one run.

For each server: start-up (spawn to the first healthy ``/v1/models``), throughput at the
quickstart's concurrency (its ``eval.max_concurrent``, sampling and capitals prompts, through
evalgate's own client), and the quickstart itself pointed at that server (``backend: openai``,
no response cache), whose wall time plus the start-up is what ``evalgate local`` costs with that
server. Then the real quickstart CLI (``backend: local``, the new server), for reference.

The old server lives in a side venv, because it needs a C compiler and ~8+ minutes to build::

    python -m venv ~/.cache/evalgate/llama-cpp-python-0.3.36
    nice -n 19 ~/.cache/evalgate/llama-cpp-python-0.3.36/bin/pip install \\
        'llama-cpp-python[server]==0.3.36'

Without it (or with ``--old-python`` naming a Python that cannot import ``llama_cpp.server``),
only the new server is measured and the script says so. Everything shares this machine's cores:
read the ratios (old / new for times, new / old for rates), not the absolute figures.

Usage: python bench/embedded_server.py [--requests 64] [--repeats 3] [--old-python PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evalgate.run.client import ChatClient  # noqa: E402

from evalgate.config.spec.models import LocalModel  # noqa: E402
from evalgate.serve._process import stop_group  # noqa: E402
from evalgate.serve.base import Endpoint  # noqa: E402
from evalgate.serve.llama_cpp import LlamaCppServer, _free_port, find_gguf  # noqa: E402

QUICKSTART = ROOT / "examples" / "quickstart"
OLD_VENV = Path.home() / ".cache" / "evalgate" / "llama-cpp-python-0.3.36"
ALIAS = "smollm2"


def _quickstart() -> dict:
    return yaml.safe_load((QUICKSTART / "evals.yaml").read_text())


def new_command(gguf: Path, port: int, model: LocalModel) -> list[str]:
    server = LlamaCppServer(model, log_dir=Path(tempfile.gettempdir()), environ={})
    return server.command(gguf, port)


def old_command(python: str, gguf: Path, port: int, model: LocalModel) -> list[str]:
    return [
        python,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--model_alias",
        ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(model.n_ctx),
    ]


def start(cmd: list[str], log: Path) -> tuple[subprocess.Popen[bytes], str, float]:
    """Spawn a server; return it, its base URL and the seconds until /v1/models answered."""
    port = cmd[cmd.index("--port") + 1]
    base = f"http://127.0.0.1:{port}/v1"
    t0 = time.perf_counter()
    with log.open("ab") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    while True:  # the server's own readiness is what is measured: poll it
        if proc.poll() is not None:
            sys.exit(f"{cmd[:3]} exited with code {proc.returncode}; log: {log}")
        try:
            with urllib.request.urlopen(f"{base}/models", timeout=2) as resp:
                if resp.status == 200:
                    return proc, base, time.perf_counter() - t0
        except OSError:
            pass
        if time.perf_counter() - t0 > 300:
            stop_group(proc)
            sys.exit(f"{cmd[:3]} did not answer within 300 s; log: {log}")
        time.sleep(0.02)


async def throughput(base: str, concurrency: int, requests: int) -> dict[str, float]:
    """Quickstart-like requests (its sampling and capitals prompts) at its concurrency."""
    qs = _quickstart()
    sampling = SimpleNamespace(
        temperature=qs["sampling"]["temperature"],
        top_p=1.0,
        max_tokens=qs["sampling"]["max_tokens"],
        seed=None,
    )
    system = next(b for b in qs["benchmarks"] if b["name"] == "capitals")["system_prompt"]
    rows = [json.loads(line) for line in (QUICKSTART / "capitals.jsonl").read_text().splitlines()]
    prompts = [
        [
            {"role": "system", "content": system},
            {"role": "user", "content": f"What is the capital of {rows[i % len(rows)]['prompt']}?"},
        ]
        for i in range(requests)
    ]
    endpoint = Endpoint(base_url=base, model=ALIAS, model_id=ALIAS)
    async with ChatClient(
        endpoint, sampling, max_concurrent=concurrency, max_retries=0, timeout_s=120
    ) as client:
        await asyncio.gather(*(client.chat(p) for p in prompts[:concurrency]))  # warm-up
        t0 = time.perf_counter()
        replies = await asyncio.gather(*(client.chat(p) for p in prompts))
        elapsed = time.perf_counter() - t0
    tokens = sum(r.usage.get("completion_tokens", 0) for r in replies)
    return {
        "rps": len(replies) / elapsed,
        "tok_s": tokens / elapsed,
        "p50_ms": 1000 * statistics.median(r.latency_s for r in replies),
    }


def quickstart_against(base: str, tmp: Path) -> float:
    """Wall seconds of `evalgate local` on the quickstart, its model pointed at ``base``."""
    config = _quickstart()
    config["models"] = [{"name": ALIAS, "backend": "openai", "base_url": base, "model": ALIAS}]
    config.pop("$schema", None)
    work = tmp / f"qs-{time.monotonic_ns()}"
    work.mkdir()
    shutil.copy(QUICKSTART / "capitals.jsonl", work)
    (work / "evals.yaml").write_text(yaml.safe_dump(config))
    return _run_cli(work / "evals.yaml", work / "out")


def _run_cli(config: Path, out: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "evalgate", "local", str(config), "--output", str(out)]
    t0 = time.perf_counter()
    done = subprocess.run([*cmd, "--no-cache"], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"quickstart exited {done.returncode}: {done.stderr[-600:]}")
    return wall


def old_python(arg: str | None) -> str | None:
    python = arg or str(OLD_VENV / "bin" / "python")
    if not Path(python).exists():
        print(
            f"old server: {python} does not exist; measuring the new server only "
            f"(build it: see this script's docstring)"
        )
        return None
    probe = subprocess.run([python, "-c", "import llama_cpp.server"], capture_output=True)
    if probe.returncode != 0:
        print(
            f"old server: {python} cannot import llama_cpp.server (still building?); "
            "measuring the new server only"
        )
        return None
    return python


def measure(name: str, cmd_for, args, tmp: Path) -> dict[str, float]:
    conc = _quickstart()["eval"]["max_concurrent"]
    starts, rates, toks, qs_walls = [], [], [], []
    for _ in range(args.repeats):
        proc, base, startup = start(cmd_for(_free_port()), tmp / f"{name}.log")
        try:
            cell = asyncio.run(throughput(base, conc, args.requests))
            qs_walls.append(quickstart_against(base, tmp))
        finally:
            stop_group(proc)
        starts.append(startup)
        rates.append(cell["rps"])
        toks.append(cell["tok_s"])
    row = {
        "startup_s": statistics.median(starts),
        "rps": statistics.median(rates),
        "tok_s": statistics.median(toks),
        "quickstart_s": statistics.median(qs_walls) + statistics.median(starts),
    }
    print(
        f"  {name:<26} start-up {row['startup_s']:6.2f} s   {row['rps']:6.2f} req/s   "
        f"{row['tok_s']:7.1f} tok/s   quickstart {row['quickstart_s']:6.2f} s",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=64, help="per throughput cell")
    parser.add_argument("--repeats", type=int, default=3, help="medians of this many runs")
    parser.add_argument("--old-python", help=f"default: {OLD_VENV}/bin/python")
    args = parser.parse_args()
    model = LocalModel()
    gguf = find_gguf()
    conc = _quickstart()["eval"]["max_concurrent"]
    print(
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; concurrency {conc} "
        f"(the quickstart's), {args.requests} requests per cell, medians of {args.repeats}"
    )
    old = old_python(args.old_python)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        new = measure("new: xllamacpp", lambda p: new_command(gguf, p, model), args, tmp)
        if old is not None:
            ref = measure(
                "old: llama-cpp-python 0.3.36",
                lambda p: old_command(old, gguf, p, model),
                args,
                tmp,
            )
            print(
                f"  ratios: start-up old/new {ref['startup_s'] / new['startup_s']:.2f}x, "
                f"throughput new/old {new['rps'] / ref['rps']:.2f}x req/s "
                f"({new['tok_s'] / ref['tok_s']:.2f}x tok/s), "
                f"quickstart old/new {ref['quickstart_s'] / new['quickstart_s']:.2f}x"
            )
        walls = [_run_cli(QUICKSTART / "evals.yaml", tmp / f"cli-{i}") for i in range(args.repeats)]
        print(
            f"  quickstart CLI as users run it (backend: local, new server, no cache): "
            f"{statistics.median(walls):.2f} s"
        )


if __name__ == "__main__":
    main()

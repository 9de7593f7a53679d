"""What does a rollout cost through verifiers, next to a plain QA benchmark on the same items?

Runs the example environment (``examples/verifiers``: the v1 taskset, and the legacy
``load_environment`` where this verifiers still has it) and a ``jsonl`` benchmark holding the
same problems, system prompt and exact-match scoring, through evalgate's engine against a
scripted OpenAI-compatible server on loopback that answers at once — so what is measured is the
harness, not a model. Prints, per path: one-time set-up (import + environment build), wall time
per rollout at concurrency 1 (latency) and at concurrency 8 (throughput), and the ratio to QA.

Usage: python bench/verifiers_overhead.py [--rollouts 25] [--repeats 3]
Needs: pip install verifiers==0.4.0 -e examples/verifiers
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evalgate.config.load import load_config  # noqa: E402
from evalgate.run.engine import run_suite  # noqa: E402
from evalgate.serve.base import Endpoint  # noqa: E402
from evalgate.serve.client import ChatClient  # noqa: E402
from evalgate.suites import build_suite  # noqa: E402


def _answer(text: str) -> str:
    a, op, b = text.removeprefix("What is ").rstrip("?").split()
    return str({"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op])


def start_server() -> str:
    """A chat-completions server on loopback, answering every question correctly at once."""

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response(
            {
                "id": "cmpl",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": _answer(body["messages"][-1]["content"]),
                        },
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
            }
        )

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()

    async def boot() -> int:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    port = asyncio.run_coroutine_threadsafe(boot(), loop).result(10)
    return f"http://127.0.0.1:{port}/v1"


def write_config(folder: Path, base_url: str, legacy: bool) -> Path:
    from evalgate_vf_example import PROBLEMS, SYSTEM_PROMPT

    rows = [{"id": i, "prompt": q, "answer": a} for i, q, a in PROBLEMS]
    (folder / "arith.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    legacy_bench = (
        "  - {name: vf-legacy, kind: verifiers, env_id: evalgate-arith-legacy, api: legacy}\n"
        if legacy
        else ""
    )
    path = folder / "evals.yaml"
    path.write_text(
        f"""
models: [{{name: scripted, backend: openai, base_url: "{base_url}", model: scripted}}]
benchmarks:
  - name: qa
    kind: jsonl
    path: arith.jsonl
    system_prompt: {json.dumps(SYSTEM_PROMPT)}
    scorer: {{type: numeric}}
  - {{name: vf-v1, kind: verifiers, env_id: evalgate-arith, api: v1}}
{legacy_bench}"""
    )
    return path


async def timed(suite: Any, bench: Any, base_url: str, rollouts: int, concurrency: int) -> float:
    endpoint = Endpoint(base_url=base_url, model="scripted")
    async with ChatClient(endpoint, bench.sampling, max_concurrent=concurrency) as client:
        t0 = time.perf_counter()
        records = await run_suite(suite, client, rollouts=rollouts, max_concurrent=concurrency)
        elapsed = time.perf_counter() - t0
    errors = [r["error"] for r in records if r["error"]]
    if errors:
        sys.exit(f"{bench.name}: {len(errors)} errored rollouts, e.g. {errors[0]}")
    if any(r["reward"] != 1.0 for r in records):
        sys.exit(f"{bench.name}: a rollout was not scored 1.0 against the perfect server")
    return elapsed / len(records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=25, help="rollouts per item (8 items)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    legacy = importlib.util.find_spec("verifiers.legacy") is not None
    base_url = start_server()
    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(write_config(Path(tmp), base_url, legacy), [])
        suites, setup = [], {}
        for bench in config.benchmarks:
            t0 = time.perf_counter()
            suites.append((bench, build_suite(bench)))
            setup[bench.name] = time.perf_counter() - t0
        n = len(suites[0][1].items) * args.rollouts
        print(
            f"{n} rollouts per run (8 items × {args.rollouts}), scripted server on loopback, "
            f"median of {args.repeats} runs; set-up = imports + environment build, once"
        )
        rows = {}
        for bench, suite in suites:
            per = {}
            for conc in (1, 8):
                runs = [
                    asyncio.run(timed(suite, bench, base_url, args.rollouts, conc))
                    for _ in range(args.repeats)
                ]
                per[conc] = statistics.median(runs)
            rows[bench.name] = per
        qa = rows["qa"]
        print(f"  {'path':<10} {'set-up s':>9} {'ms/rollout c=1':>15} {'ratio':>6} "
              f"{'ms/rollout c=8':>15} {'ratio':>6}")  # fmt: skip
        for name, per in rows.items():
            print(
                f"  {name:<10} {setup[name]:9.2f} {per[1] * 1e3:15.2f} {per[1] / qa[1]:6.1f} "
                f"{per[8] * 1e3:15.2f} {per[8] / qa[8]:6.1f}"
            )


if __name__ == "__main__":
    main()

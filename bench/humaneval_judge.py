"""What does judging HumanEval apart from the completion cost? Per-item seconds, in one run.

Each of the 164 canonical solutions is scored in a fresh sandbox at concurrency 8, two ways,
interleaved so that the host's load hits both alike:

- ``one process`` (the reference, the harness before issue 23): the completion and the tests run
  in one interpreter, which writes the nonce when ``check`` returns;
- ``judge + worker`` (what ``evalgate.suites.humaneval`` runs): a non-dumpable judge runs
  ``check`` against a proxy; a second interpreter runs the completion; literals cross as JSON.

Prints the median and p90 per item (sandbox creation, exec and destroy) and the ratio of the
medians. Every item must pass both ways (the script says so otherwise).

Usage: python bench/humaneval_judge.py [--items 164] [--concurrency 8] [--backend local]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evalgate.sandbox import SandboxConfig, open_backend  # noqa: E402
from evalgate.score.humaneval import TEST_RUNNER, runner_argv, verdict  # noqa: E402
from evalgate.suites import humaneval  # noqa: E402

# The single-process harness evalgate ran before the judge was split off (the reference).
_ONE_PROCESS = """\
import os, sys
nonce, _, program = sys.stdin.buffer.read().partition(b"\\n")
verdict = os.dup(1)
os.dup2(2, 1)
exec(compile(program, "<humaneval>", "exec"), {"__name__": "__main__"})
sys.stdout.flush()
os.write(verdict, b"EVALGATE-PASS " + nonce + b"\\n")
"""


async def _one_process(box, problem) -> bool:
    nonce = secrets.token_hex(16)
    program = humaneval.build_program(problem, problem["canonical_solution"])
    r = await box.exec(["python3", "-I", "-c", _ONE_PROCESS], stdin=f"{nonce}\n{program}")
    return r.exit_code == 0 and f"EVALGATE-PASS {nonce}" in r.stdout


async def _judged(box, problem) -> bool:
    nonce = secrets.token_hex(16)
    job = {
        "nonce": nonce,
        "solution": humaneval.build_solution(problem, problem["canonical_solution"]),
        "exam": f"{problem['prompt']}\n\n{problem['test']}\n",
        "entry": problem["entry_point"],
        "source": TEST_RUNNER,
    }
    r = await box.exec(runner_argv(), stdin=json.dumps(job))
    return verdict(r, nonce, 60)[0] == 1.0


async def main(args: argparse.Namespace) -> None:
    problems = humaneval.load_problems()[: args.items]
    backend = open_backend(args.backend)
    config = SandboxConfig(network="none", timeout_s=60)
    sem = asyncio.Semaphore(args.concurrency)
    times: dict[str, list[float]] = {"one process": [], "judge + worker": []}
    failed: dict[str, list[str]] = {k: [] for k in times}
    runners = {"one process": _one_process, "judge + worker": _judged}

    async def one(way: str, problem) -> None:
        async with sem:
            t0 = time.perf_counter()
            async with await backend.create(config) as box:
                ok = await runners[way](box, problem)
            times[way].append(time.perf_counter() - t0)
            if not ok:
                failed[way].append(problem["task_id"])

    await asyncio.gather(*(one(way, p) for p in problems for way in runners))
    for way, ts in times.items():
        ts.sort()
        p90 = ts[int(0.9 * (len(ts) - 1))]
        print(
            f"{way:15s} median {statistics.median(ts):.3f} s  p90 {p90:.3f} s  "
            f"failed {len(failed[way])}/{len(ts)} {failed[way][:5]}"
        )
    ratio = statistics.median(times["judge + worker"]) / statistics.median(times["one process"])
    print(f"judge + worker / one process (median): {ratio:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=164)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--backend", default="local")
    asyncio.run(main(parser.parse_args()))

"""Memory per rollout of the engine: does a run's memory stay flat in the number of rollouts?

Engine-level harness (no HTTP: a client that answers at once, so a million rollouts take
seconds, not an hour): ``run_suite`` over 1,000 items × k rollouts with a journal on disk, as
``evalgate local`` runs it. Each case runs in a fresh interpreter and prints its peak RSS
(``ru_maxrss``) and the growth per rollout, from the difference between a small and a large run
(start-up, imports and the items cancel out):

- ``full``: every record kept in memory (``run_suite(slim=False)``), the reference: what a run
  held before (a dict per rollout with its prompt messages, completion, timing...);
- ``slim``: what ``evalgate local`` does now (``slim=True``): the journal on disk holds the
  records, memory a :class:`~evalgate.run.rollouts.RolloutTable` (typed columns of what
  summaries read).

Both then summarise the run (``summarize``), whose peak is included.

Not measured here: what reads the run's journal back afterwards (the gate step, `compare`,
`resume`, sequential looks): bench/gate_memory.py.

Usage: python bench/rollout_memory.py [--small 100000] [--large 1000000] [--items 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HARNESS = textwrap.dedent(
    """
    import asyncio, json, resource, sys, tempfile, time
    from evalgate.run.engine import run_suite
    from evalgate.run.summary import summarize
    from evalgate.serve.client import Reply
    from evalgate.suites.base import Item, Outcome

    n_items, rollouts, slim = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "slim"
    PROMPT = "What is 123 + 456? Answer with the number only. " * 8  # ~400 characters
    COMPLETION = "The answer is 579. " * 12  # ~230 characters

    class Suite:
        name = "mem"
        items = [Item(id=f"item-{i:06d}", prompt=f"{PROMPT}{i}", answer="579")
                 for i in range(n_items)]

        async def rollout(self, item, index, client):
            msgs = [{"role": "user", "content": item.prompt}]
            reward = float(index % 2)
            usage = {"prompt_tokens": 120, "completion_tokens": 60}
            return Outcome(msgs, COMPLETION, reward, {"accuracy": reward}, usage)

    async def main():
        with tempfile.TemporaryDirectory() as tmp, open(f"{tmp}/results.jsonl", "a") as fh:
            t0 = time.perf_counter()
            records = await run_suite(Suite(), None, rollouts=rollouts, max_concurrent=64,
                                      journal=fh, slim=slim)
            summary = summarize(records, benchmark="mem", model="m", model_id="m", run_dir="",
                                n_items=n_items, rollouts=rollouts, time_s=0.0)
            assert summary.n_rollouts == n_items * rollouts
            return len(records), time.perf_counter() - t0

    n, wall = asyncio.run(main())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"rollouts": n, "peak_rss": rss, "wall_s": wall}))
    """
)


def run(items: int, rollouts: int, mode: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", HARNESS, str(items), str(rollouts), mode],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=100_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--items", type=int, default=1000)
    args = parser.parse_args()
    k_small, k_large = args.small // args.items, args.large // args.items
    per: dict[str, float] = {}
    for mode in ("full", "slim"):
        small = run(args.items, k_small, mode)
        large = run(args.items, k_large, mode)
        grow = (large["peak_rss"] - small["peak_rss"]) / (large["rollouts"] - small["rollouts"])
        per[mode] = grow
        print(
            f"{mode:>4}: peak RSS {small['peak_rss'] / 2**20:7.1f} MiB at {small['rollouts']:,} "
            f"rollouts, {large['peak_rss'] / 2**20:7.1f} MiB at {large['rollouts']:,} "
            f"({large['wall_s']:.1f} s); growth {grow:,.0f} bytes/rollout"
        )
    print(f"slim / full growth per rollout: {per['slim'] / per['full']:.3f}")


if __name__ == "__main__":
    main()

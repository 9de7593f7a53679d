"""How much of `evalgate local` is evalgate, and how much is the model?

Runs `python -m evalgate local` on the bundled example (embedded model) as a user would, then
reads the run's own records: the time some request was in flight (the union of request
intervals, so concurrency is not double-counted), the model server's start-up, and the first
request's start. Prints:

- wall time of the whole command;
- model-server busy time and start-up time;
- evalgate overhead = wall − busy − server start-up, as % of wall;
- start-up to first request, excluding the model load (interpreter, imports, config, datasets).

Usage: python bench/local_overhead.py [--repeats 3] [--config examples/quickstart/evals.yaml]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _busy_seconds(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def one_run(config: Path) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        t0 = time.time()
        proc = subprocess.run(
            [sys.executable, "-m", "evalgate", "local", str(config), "--output", str(out)],
            capture_output=True,
            text=True,
            env={"CI": "true", "PATH": "/usr/bin:/bin", "HOME": tmp},
        )
        wall = time.time() - t0
        if proc.returncode not in (0, 1):
            sys.exit(f"evalgate local failed ({proc.returncode}):\n{proc.stderr}")
        intervals, first, startup = [], float("inf"), 0.0
        for meta_path in out.glob("evals/*/*/metadata.json"):
            meta = json.loads(meta_path.read_text())
            startup = meta["server_startup_ms"] / 1000
            for line in (meta_path.parent / "results.jsonl").read_text().splitlines():
                timing = json.loads(line)["timing"]
                intervals.append((timing["start"], timing["start"] + timing["latency_ms"] / 1000))
                first = min(first, timing["start"])
    busy = _busy_seconds(intervals)
    return {
        "wall_s": wall,
        "model_busy_s": busy,
        "server_startup_s": startup,
        "overhead_s": wall - busy - startup,
        "overhead_pct": 100 * (wall - busy - startup) / wall,
        "startup_to_first_request_s": (first - t0) - startup,
        "rollouts": len(intervals),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--config", type=Path, default=ROOT / "examples/quickstart/evals.yaml")
    args = parser.parse_args()
    runs = [one_run(args.config) for _ in range(args.repeats)]
    print(
        f"evalgate local on {args.config.relative_to(ROOT)}: {runs[0]['rollouts']} rollouts, "
        f"median of {args.repeats} runs"
    )
    for key in ("wall_s", "model_busy_s", "server_startup_s", "overhead_s", "overhead_pct",
                "startup_to_first_request_s"):  # fmt: skip
        values = [r[key] for r in runs]
        print(f"  {key:<28} {statistics.median(values):8.3f}   (runs: "
              f"{', '.join(f'{v:.3f}' for v in values)})")  # fmt: skip


if __name__ == "__main__":
    main()

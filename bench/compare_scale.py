"""How `evalgate compare` scales with the benchmark's size: the WHOLE command (reading both run
folders and checking every record, pairing, the tests and their bounds, the MDE, the report
files), run as a child process and measured as ``/usr/bin/time -v`` sees it: its CPU time
(user + system) and its peak RSS (``getrusage(RUSAGE_CHILDREN)`` of a wrapper that runs only
that command, which is what ``/usr/bin/time`` prints).

    nice -n 10 python bench/compare_scale.py [--n 1000000] [--fixtures DIR] [--stats]

Cases (``--n`` items, default 1,000,000): ``0/1``: n items × 1 rollout; ``k = 4``: n/4 items ×
4 rollouts (the same number of rollouts). The run folders are written as the engine writes
them (bench/gate_memory.py's runs: ~1 KB a record, 70 % right, the PR 1 item in 50 worse), once
per size under ``--fixtures`` (default: a temporary folder) and reused when there. ``--stats``
also times the statistics alone (:func:`evalgate.compare.paired.compare_metric` on in-memory
arrays, in a fresh process: the figure this bench printed before it measured the command).
Small sizes (``--n 20000``) run in seconds, for CI.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.gate_memory import write_run  # noqa: E402  (the same runs as that bench)

# Runs the command as its only child and prints that child's CPU time and peak RSS.
WRAPPER = textwrap.dedent(
    """
    import json, resource, subprocess, sys, time
    start = time.perf_counter()
    code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
    wall = time.perf_counter() - start
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({"code": code, "wall_s": wall, "cpu_s": use.ru_utime + use.ru_stime,
                      "peak_rss": use.ru_maxrss * 1024}))
    """
)


def run_pair(root: Path, items: int, k: int) -> tuple[Path, Path]:
    """(base, head) run folders of ``items`` × ``k`` under ``root``, written once."""
    pair = root / f"{items}x{k}"
    done = pair / "done"
    if not done.exists():
        base = write_run(pair / "base", items, k, head=False)
        head = write_run(pair / "head", items, k, head=True)
        done.write_text(json.dumps({"base": str(base), "head": str(head)}))
    paths = json.loads(done.read_text())
    return Path(paths["base"]), Path(paths["head"])


def measure_command(args: list[str]) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", WRAPPER, *args], capture_output=True, text=True, env=env
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if got["code"] not in (0, 1):  # PASS or FAIL: a verdict was reached
        raise SystemExit(f"{' '.join(args)} exited {got['code']}:\n{out.stderr[-3000:]}")
    return got


STATS = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    from scipy import special  # imported before timing
    from evalgate.compare.paired import compare_metric
    n, k = int(sys.argv[1]), int(sys.argv[2])
    rng = np.random.default_rng(0)
    if k == 1:
        base = (rng.random(n) < 0.7).astype(float)
        head = np.where((base == 1.0) & (rng.random(n) < 0.01), 0.0, base)
    else:
        p = rng.beta(2.0, 1.0, n)
        base, head = rng.binomial(k, p) / k, rng.binomial(k, np.clip(p - 0.02, 0, 1)) / k
    cpu = time.process_time()
    compare_metric("m", base, head, clusters=None, margin=0.03, alpha=0.05)
    print(json.dumps({"cpu_s": time.process_time() - cpu}))
    """
)


def measure_stats(n: int, k: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", STATS, str(n), str(k)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1])["cpu_s"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="rollouts per run")
    parser.add_argument("--fixtures", type=Path, help="where the run folders are kept")
    parser.add_argument("--stats", action="store_true", help="also the statistics alone")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        fixtures = args.fixtures or Path(tmp)
        for label, items, k in (("0/1", args.n, 1), ("k = 4", args.n // 4, 4)):
            base, head = run_pair(fixtures, items, k)
            out = Path(tmp) / f"out-{k}"
            cmd = [sys.executable, "-m", "evalgate", "compare", str(base), str(head)]
            got = measure_command([*cmd, "--output", str(out)])
            line = (
                f"compare, {label}, {items:,} items x {k}: {got['cpu_s']:6.1f} s CPU "
                f"({got['wall_s']:.1f} s wall), peak RSS {got['peak_rss'] / 2**20:6.1f} MiB"
            )
            if args.stats:
                line += f"; the statistics alone {measure_stats(items, k):.1f} s CPU"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

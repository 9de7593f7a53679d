"""Peak RSS and CPU of the whole `evalgate local` and `evalgate resume` commands at size.

Against the free OpenAI-compatible stub bench/engine_throughput.py starts (its own process; it
answers every arith item right at once), each command runs as the only child of a wrapper and is
measured as ``/usr/bin/time -v`` sees it (``getrusage(RUSAGE_CHILDREN)``: user + system CPU, peak
RSS; the stub is not counted):

- ``local``: ``evalgate local CONFIG --no-cache`` of ``--items`` arith items × ``--k`` rollouts,
  with ``--baseline`` a first run of the same config (so the gate step compares, as in CI);
- ``resume``: the same run with its metadata.json removed (an interrupted run whose journal holds
  every rollout): ``evalgate resume RUN_ID`` reads the journal back, runs nothing, summarises and
  gates it against the baseline and writes the report.

    nice -n 10 python bench/command_memory.py [--items 100000] [--k 10] [--concurrency 256]

arith has at most 100,000 items: a million rollouts are 100,000 × 10, a million requests to the
stub for each of the two `local` runs (~5 min of CPU each on this 2-core machine).
``--items 2000 --k 1`` runs in seconds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine_throughput as eng  # the stub and its config

ROOT = Path(__file__).resolve().parent.parent

# Runs the command as its only child and prints that child's CPU time and peak RSS.
WRAPPER = textwrap.dedent(
    """
    import json, resource, subprocess, sys, time
    start = time.perf_counter()
    done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({"code": done.returncode, "wall_s": wall, "err": done.stderr[-2000:].decode(),
                      "cpu_s": use.ru_utime + use.ru_stime, "peak_rss": use.ru_maxrss * 1024}))
    """
)


def measure(args: list[str], env: dict[str, str], cwd: Path) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", WRAPPER, sys.executable, "-m", "evalgate", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
    )
    got: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    if got["code"] not in (0, 1):  # PASS or FAIL: a verdict was reached
        raise SystemExit(f"evalgate {' '.join(args[:2])} exited {got['code']}:\n{got['err']}")
    return got


def _line(what: str, got: dict[str, object]) -> str:
    cpu, wall, rss = (float(got[k]) for k in ("cpu_s", "wall_s", "peak_rss"))  # type: ignore[arg-type]
    return f"{what}: {cpu:6.1f} s CPU ({wall:.1f} s wall), peak RSS {rss / 2**20:6.1f} MiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--root", type=Path, default=ROOT, help="the evalgate checkout to measure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        env = eng._client_env(tmp, args.root.resolve())
        stub, base_url = eng._start_stub(0.0, tmp)
        try:
            config = eng._write_config(tmp, base_url, args.items, args.concurrency)
            text = config.read_text(encoding="utf-8")
            config.write_text(text.replace("eval: {", f"eval: {{rollouts: {args.k}, "))
            base, head = tmp / "base", tmp / "head"
            size = f"{args.items:,} items x {args.k}"
            run = ["local", str(config), "--no-cache"]
            print(_line(f"local,   {size}", measure([*run, "--output", str(base)], env, tmp)))
            gated = [*run, "--output", str(head), "--baseline", str(base)]
            print(_line(f"local + gate, {size}", measure(gated, env, tmp)), flush=True)
            (journal,) = head.glob("evals/*/*/results.jsonl")
            (journal.parent / "metadata.json").unlink()  # interrupted after its last rollout
            again = ["resume", journal.parent.name, "--output", str(head), "--no-cache"]
            print(_line(f"resume + gate, {size}", measure(again, env, tmp)), flush=True)
        finally:
            stub.kill()
            stub.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())

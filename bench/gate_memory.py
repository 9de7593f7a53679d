"""Memory per rollout after the run: does reading a run back stay flat in its rollouts?

bench/rollout_memory.py measures the engine. This measures what reads a finished (or
interrupted) run's journal back, on synthetic runs written in the engine's journal format
(results.jsonl lines with every key the engine writes, a prompt of ~400 characters and a
completion of ~230) through :class:`~evalgate.run.rundir.RunDir`:

- ``parse``: the reference, a bare ``json.loads`` of every line kept in a list (what a reader
  that holds the records costs);
- ``compare``: the WHOLE command ``python -m evalgate compare BASE HEAD`` (two runs of N
  rollouts each), report files included (report.html lists every changed or errored item and
  the first 2,000 unchanged ones, written as it is rendered), as a child process measured as
  ``/usr/bin/time -v`` sees it (``getrusage(RUSAGE_CHILDREN)`` of a wrapper running only it:
  peak RSS and user + system CPU);
- ``pair``: the decision alone: both runs loaded, summarised and compared (no report files);
- ``gate``: the gate step of ``evalgate local --baseline`` (``pipeline._gate``: the PR run and
  its baseline loaded, paired and tested; the summaries the engine made are given);
- ``resume``: what ``evalgate resume`` reads of a run's journal before it runs the rest
  (:func:`~evalgate.run.journal.resume_journal`, over the suite's items);
- ``look``: a sequential look of a resumed run (the baseline's plan, then the paired decision
  on the journal's kept rollouts).

The other cases run their step in a fresh interpreter (the whole process: start-up, imports and
the step). Each case runs at ``--small`` and ``--large`` rollouts (items × k) and prints its
peak RSS, its CPU and wall time and the growth per rollout (the difference of the two sizes
over the difference of their rollouts: start-up, imports and the items' own objects cancel
out), and that growth as a fraction of the bare parse's. ``--fixtures DIR`` keeps the runs
written there and reuses them (a million rollouts take ~30 s to write).

Usage: python bench/gate_memory.py [--small 100000] [--large 1000000] [--k 4]
       [--cases parse,compare,pair,gate,resume,look] [--fixtures DIR]
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

PROMPT = "What is 123 + 456? Answer with the number only. " * 8  # ~400 characters
COMPLETION = "The answer is 579. " * 12  # ~230 characters
BENCH = "mem"


def _item(i: int) -> tuple[str, str, str]:
    return f"item-{i:07d}", f"{PROMPT}{i}", str(i)


def write_run(root: Path, items: int, k: int, *, head: bool) -> Path:
    """A finished run of ``items`` × ``k`` rollouts under ``root``, as the engine writes one."""
    from evalgate.run.fingerprint import item_hash
    from evalgate.run.rundir import RunDir

    run = RunDir.create(root, BENCH, "org/m", "20260101-000000-000abc")
    run.write_config(
        {
            "model": {"name": "m"},
            "benchmark": {"name": BENCH, "eval": {"rollouts": k, "max_error_rate": 0.05}},
            "model_id": "org/m",
            "config_path": "evals.yaml",
            "gate": {"margin": 0.05},
            "fingerprint": {
                "measurement": {"dataset": "d", "scorer": {"type": "exact"}},
                "subject": {"model": "m"},
            },
        }
    )
    with run.open_journal() as fh:
        for i in range(items):
            example_id, prompt, answer = _item(i)
            ihash = item_hash(prompt, answer, "")
            for r in range(k):
                # 70 % right, the PR 1 item in 50 worse: a few flips, a paired test to run.
                reward = float((i * 7 + r * 3) % 10 < 7 and not (head and i % 50 == 0))
                rec = {
                    "example_id": example_id,
                    "item_hash": ihash,
                    "rollout": r,
                    "group": None,
                    "prompt": [{"role": "user", "content": prompt}],
                    "completion": COMPLETION,
                    "answer": answer,
                    "reward": reward,
                    "metrics": {"accuracy": reward},
                    "usage": {"prompt_tokens": 120, "completion_tokens": 60},
                    "timing": {"start": 1.0, "total_ms": 12.5},
                    "error": None,
                }
                fh.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
    run.write_metadata({"complete": True, "rollouts_per_example": k, "time_ms": 1000.0})
    return run.path


HARNESS = textwrap.dedent(
    """
    import json, resource, sys, time
    from pathlib import Path
    case, base, head = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    items, k = int(sys.argv[4]), int(sys.argv[5])
    sys.path.insert(0, sys.argv[6])
    from bench.gate_memory import _item
    t0 = time.perf_counter()
    if case == "parse":
        with (head / "results.jsonl").open(encoding="utf-8") as fh:
            records = [json.loads(line) for line in fh]
        assert len(records) == items * k
    elif case == "pair":
        from evalgate.compare.paired import compare_runs, summary_of
        from evalgate.run.rundir import load_run
        b, h = load_run(base), load_run(head)
        summaries = summary_of(b), summary_of(h)
        compare_runs(b, h, margin=0.05, alpha=0.05)
    elif case == "gate":
        import tempfile
        from evalgate.compare.paired import summary_of
        from evalgate.config.spec import GateSettings
        from evalgate.pipeline import gate_runs, load_baselines
        from evalgate.run.rundir import load_run
        baselines = load_baselines(base)
        # The engine's summary of the PR run (made from its RolloutTable before the gate).
        summaries = [summary_of(load_run(head))]
        t0 = time.perf_counter()  # the gate step alone, as pipeline._gate runs it
        with tempfile.TemporaryDirectory() as out:
            heads = [load_run(Path(s.run_dir)) for s in summaries]
            gate_runs(heads, baselines, GateSettings(margin=0.05), summaries=summaries,
                      decisions={}, output_root=Path(out))
    elif case in ("resume", "look"):
        from evalgate.run.journal import resume_journal
        from evalgate.suites.base import Item
        suite = [Item(id=i, prompt=p, answer=a) for i, p, a in map(_item, range(items))]
        state = resume_journal(head / "results.jsonl", suite, k)
        assert len(state.done) == items * k
        if case == "look":
            import numpy as np
            from evalgate import stats
            from evalgate.run.rundir import load_run
            from evalgate.run.sequential import plan_order
            from evalgate.run.summary import item_metrics
            key = stats.OrderKey.legacy(0)
            order, _, base_scores = plan_order(suite, load_run(base), "accuracy", key)
            scores = item_metrics(state.records, k)["accuracy"]
            seen = [it.id for it in order if it.id in scores]
            stats.sequential_decision(
                np.array([base_scores[i] for i in seen]), np.array([scores[i] for i in seen]),
                stats.Design(alpha=0.05, margin=0.05, looks=3, horizon=len(order), seed=0),
                look=1, clusters=None)
    wall = time.perf_counter() - t0
    use = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"peak_rss": use.ru_maxrss * 1024, "wall_s": wall,
                      "cpu_s": use.ru_utime + use.ru_stime}), flush=True)
    """
)


# Runs one command as its only child and prints that child's CPU time and peak RSS.
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


def measure(case: str, base: Path, head: Path, items: int, k: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if case == "compare":  # the whole command, as /usr/bin/time -v sees it
        with tempfile.TemporaryDirectory() as out:
            cmd = [sys.executable, "-m", "evalgate", "compare", str(base), str(head)]
            done = subprocess.run(
                [sys.executable, "-c", WRAPPER, *cmd, "--output", out],
                capture_output=True,
                text=True,
                env=env,
            )
        got = json.loads(done.stdout.strip().splitlines()[-1])
        if got["code"] not in (0, 1):
            raise SystemExit(f"compare at {items * k:,} rollouts exited {got['code']}")
        return dict(got)
    args = [case, str(base), str(head), str(items), str(k), str(ROOT)]
    out = subprocess.run(
        [sys.executable, "-c", HARNESS, *args], capture_output=True, text=True, env=env
    )
    if out.returncode != 0:
        raise SystemExit(f"{case} at {items * k:,} rollouts failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _runs(root: Path, n: int, items: int, k: int) -> tuple[Path, Path]:
    """(base, head) of ``items`` × ``k`` under ``root``, written once and reused."""
    done = root / f"mem{n}x{k}.json"
    if not done.exists():
        base = write_run(root / f"base{n}x{k}", items, k, head=False)
        head = write_run(root / f"head{n}x{k}", items, k, head=True)
        done.write_text(json.dumps([str(base), str(head)]))
    base_s, head_s = json.loads(done.read_text())
    return Path(base_s), Path(head_s)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=100_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--cases", default="parse,compare,pair,gate,resume,look")
    parser.add_argument("--fixtures", type=Path, help="keep the runs here and reuse them")
    args = parser.parse_args()
    cases = args.cases.split(",")
    growth: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        sizes = {}
        for n in (args.small, args.large):
            items = n // args.k
            sizes[n] = (items, *_runs(args.fixtures or Path(tmp), n, items, args.k))
        journal = (sizes[args.large][2] / "results.jsonl").stat().st_size
        print(f"journal: {journal / (args.large):,.0f} bytes/rollout on disk", flush=True)
        for case in cases:
            got = {n: measure(case, b, h, items, args.k) for n, (items, b, h) in sizes.items()}
            small, large = got[args.small], got[args.large]
            n_small = sizes[args.small][0] * args.k
            n_large = sizes[args.large][0] * args.k
            grow = (large["peak_rss"] - small["peak_rss"]) / (n_large - n_small)
            growth[case] = grow
            ratio = f"; {grow / growth['parse']:.3f} × parse" if "parse" in growth else ""
            print(
                f"{case:>7}: peak RSS {small['peak_rss'] / 2**20:7.1f} MiB at {n_small:,}, "
                f"{large['peak_rss'] / 2**20:7.1f} MiB at {n_large:,} rollouts "
                f"({small['cpu_s']:.1f} s, {large['cpu_s']:.1f} s CPU; "
                f"{small['wall_s']:.1f} s, {large['wall_s']:.1f} s wall); "
                f"growth {grow:,.0f} bytes/rollout{ratio}",
                flush=True,
            )


if __name__ == "__main__":
    main()

"""What hashing everything that decides an item's score costs (``Item.exam``).

Two figures, each against a reference measured in the same run:

- a jsonl benchmark whose rows carry an extra column (``choices``): loading its items with the
  exam digest vs the same rows without the column (no digest: the reference), per 1,000 rows;
- agent task folders (the bundled agent-basics and Terminal-Bench examples): loading the tasks
  and computing each ``Task.exam`` (which reads and hashes the task's files) vs loading alone.

Usage: python bench/item_identity.py [--rows 50000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from evalgate.config.spec.benchmarks import FileBenchmark
from evalgate.run.fingerprint import identity
from evalgate.suites.agent.tasks import load_tasks
from evalgate.suites.datasets import file_items

ROOT = Path(__file__).resolve().parent.parent
TASKS = [ROOT / "benchmarks" / "agent-basics", ROOT / "examples" / "terminal-bench" / "tasks"]


def _spec(path: Path) -> FileBenchmark:
    return FileBenchmark.model_validate({"name": "b", "kind": "jsonl", "path": str(path)})


def _best(fn: object, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plain, extra = Path(tmp) / "plain.jsonl", Path(tmp) / "extra.jsonl"
        with plain.open("w") as a, extra.open("w") as b:
            for i in range(args.rows):
                row = {"id": f"q{i}", "prompt": f"What is {i} + 1?", "answer": str(i + 1)}
                a.write(json.dumps(row) + "\n")
                b.write(json.dumps({**row, "choices": [str(i), str(i + 1), str(i + 2)]}) + "\n")

        def load(path: Path) -> None:
            for item in file_items(_spec(path)):
                identity(item)

        ref = _best(lambda: load(plain), args.repeats)
        new = _best(lambda: load(extra), args.repeats)
    per_k = 1000 / args.rows
    print(f"jsonl, {args.rows} rows, load + identity (best of {args.repeats}):")
    print(f"  no extra column (reference): {ref * per_k * 1e3:.2f} ms / 1,000 rows")
    print(f"  with a column, exam digest:  {new * per_k * 1e3:.2f} ms / 1,000 rows")
    print(f"  ratio: {new / ref:.2f}x")

    def tasks_only() -> None:
        for folder in TASKS:
            load_tasks(folder)

    def tasks_exam() -> None:
        for folder in TASKS:
            for task in load_tasks(folder):
                task.exam  # noqa: B018 (the digest is the work measured)

    n = sum(len(load_tasks(f)) for f in TASKS)
    ref = _best(tasks_only, args.repeats)
    new = _best(tasks_exam, args.repeats)
    print(f"agent tasks, {n} folders, load (+ exam digests), best of {args.repeats}:")
    print(f"  load alone (reference): {ref * 1e3:.1f} ms; with Task.exam: {new * 1e3:.1f} ms")
    print(f"  ratio: {new / ref:.2f}x")


if __name__ == "__main__":
    main()

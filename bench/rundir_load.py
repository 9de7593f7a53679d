"""Reading a run directory back: the checked loader against a bare parse, in the same run.

`compare`, `local --baseline` and the Action read every line of results.jsonl through
:func:`evalgate.run.rundir.load_run`, which checks each record (an object, ``example_id``,
``rollout``, one content per id, no duplicate) so a damaged run is refused in one line. This
prints, for a synthetic run of ``--records`` rollouts written as the engine writes them:

- a bare parse: ``json.loads`` of every line (the floor for any reader of the file);
- ``load_run``: the checked loader;

as the median of ``--repeats`` CPU times, and their ratio (a loaded machine moves both sides).

Usage: python bench/rundir_load.py [--records 100000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from evalgate.run.layout import METADATA, RESULTS, RUN_CONFIG
from evalgate.run.rundir import load_run


def _write_run(root: Path, n: int) -> Path:
    run = root / "evals" / "qa--org--m" / "20260101-000000-000abc"
    run.mkdir(parents=True)
    (run / RUN_CONFIG).write_text(json.dumps({"model": {"name": "m"}, "benchmark": {"name": "qa"}}))
    (run / METADATA).write_text(json.dumps({"complete": True}))
    with (run / RESULTS).open("w", encoding="utf-8") as fh:
        for i in range(n):
            rec = {
                "example_id": f"q{i // 4:06d}",
                "item_hash": f"{i // 4:016x}",
                "rollout": i % 4,
                "group": None,
                "prompt": [{"role": "user", "content": f"What is {i} + 1?"}],
                "completion": str(i + 1),
                "answer": str(i + 1),
                "reward": 1.0,
                "metrics": {"accuracy": 1.0},
                "usage": {"prompt_tokens": 12, "completion_tokens": 3},
                "timing": {"total_ms": 120.5},
                "error": None,
            }
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
    return run


def _cpu(fn: object, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()  # type: ignore[operator]
        times.append(time.process_time() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = _write_run(Path(tmp), args.records)

        def bare() -> None:
            text = (run / RESULTS).read_text(encoding="utf-8")
            [json.loads(line) for line in text.splitlines() if line]

        base = _cpu(bare, args.repeats)
        checked = _cpu(lambda: load_run(run), args.repeats)
    per = 1e6 / args.records
    print(f"records            {args.records:,}")
    print(f"bare json.loads    {base:.3f} s CPU ({base * per:.2f} µs/record)")
    print(f"load_run (checked) {checked:.3f} s CPU ({checked * per:.2f} µs/record)")
    print(f"ratio              {checked / base:.2f}x the bare parse")


if __name__ == "__main__":
    main()

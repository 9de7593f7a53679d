"""What a judge costs a run: wall time per judged rollout, and what the cache saves on a re-run.

Against scripted OpenAI-compatible servers on loopback (a candidate and a judge answering at
once, so the figures are evalgate's own overhead, not a model's), `evalgate local` runs N items:

- scored by `exact` (the reference: no judge);
- scored by a `judge` (reference mode), cold cache: one judge call per rollout;
- the same again, warm cache: every judgement (and completion) comes from the SQLite cache.

Prints wall times, the judged/exact ratio, the judge's added milliseconds per rollout, and the
judge's calls and cache hits on each run (the re-run should send the judge nothing).

Usage: python bench/judge_overhead.py [--items 400] [--judge-samples 1]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evalgate.cli import main as evalgate  # noqa: E402
from tests.conftest import answer_arith, scripted_servers  # noqa: E402


def _judge(body: dict[str, Any], n: int) -> str:
    return "Matches the reference.\nVERDICT: PASS"


def _config(folder: Path, model_url: str, judge_url: str, items: int, scorer: str) -> Path:
    path = folder / "evals.yaml"
    path.write_text(
        f"""
models:
  - {{name: bench, backend: openai, base_url: {model_url}, model: bench/candidate}}
benchmarks:
  - name: arith
    size: {items}
    eval: {{num_examples: {items}}}
    scorer: {scorer.replace("JUDGE", judge_url)}
eval: {{max_concurrent: 32}}
"""
    )
    return path


def _run(config: Path, out: Path, cache: Path) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    with contextlib.redirect_stderr(io.StringIO()):  # the progress lines
        code = evalgate(
            ["local", str(config), "--output", str(out), "--cache-dir", str(cache)],
            environ={"CI": "true"},
            out=io.StringIO(),
        )
    wall = time.perf_counter() - t0
    if code != 0:
        sys.exit(f"evalgate local exited {code}")
    (meta,) = out.glob("evals/*/*/metadata.json")
    return wall, json.loads(meta.read_text())


RUNS = ("exact", "judge, cold", "judge, re-run")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=400)
    parser.add_argument("--judge-samples", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    judged = (
        f"{{type: judge, mode: reference, judge_samples: {args.judge_samples}, model: {{name: "
        "judge, backend: openai, base_url: JUDGE, model: bench/judge}}"
    )
    scorers = {"exact": "{type: exact}", "judge, cold": judged, "judge, re-run": judged}
    walls: dict[str, list[float]] = {name: [] for name in RUNS}
    sent: dict[str, list[int]] = {name: [] for name in RUNS}
    hits: dict[str, list[int]] = {name: [] for name in RUNS}
    with (
        tempfile.TemporaryDirectory() as tmp,
        contextlib.contextmanager(scripted_servers)() as start,
    ):
        root = Path(tmp)
        model, judge = start(answer_arith), start(_judge)
        n = 0

        def once(name: str, cache: Path) -> tuple[float, int, int]:
            nonlocal n
            n += 1
            folder = root / f"run-{n}"
            folder.mkdir()
            config = _config(folder, model.base_url, judge.base_url, args.items, scorers[name])
            before = len(judge.requests)
            wall, meta = _run(config, folder / "out", cache)
            stats = (meta.get("judge") or {}).get("requests") or {}
            return wall, len(judge.requests) - before, int(stats.get("cache_hits", 0))

        once("exact", root / "cache-warmup")  # imports and first connections, not measured
        for r in range(args.repeats):
            for name in RUNS:  # the re-run reuses the cold run's cache
                cache = root / f"cache-{r}-{'exact' if name == 'exact' else 'judge'}"
                wall, s, h = once(name, cache)
                walls[name].append(wall)
                sent[name].append(s)
                hits[name].append(h)
    med = {name: statistics.median(walls[name]) for name in RUNS}
    print(
        f"judge overhead: {args.items} items, judge_samples {args.judge_samples}, loopback "
        f"servers, median of {args.repeats}"
    )
    print(f"{'run':<16}{'wall s':>9}{'× exact':>9}{'judge calls sent':>18}{'judge cache hits':>18}")
    for name in RUNS:
        print(
            f"{name:<16}{med[name]:>9.2f}{med[name] / med['exact']:>9.2f}"
            f"{sent[name][-1]:>18}{hits[name][-1]:>18}"
        )
    added = (med["judge, cold"] - med["exact"]) / args.items * 1000
    print(
        f"the judge adds {added:.2f} ms per rollout on a cold cache "
        f"({sent['judge, cold'][-1] + hits['judge, cold'][-1]} judgements, repeated items from "
        f"the cache); a re-run sends the judge {sent['judge, re-run'][-1]} requests"
    )


if __name__ == "__main__":
    main()

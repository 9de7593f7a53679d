"""`evalgate judge-check`: run each benchmark's judge on its labelled set and say how far it
agrees with the labels (accuracy, Cohen's κ), with itself (k samples), and how often it gave no
verdict. The judge is served and called exactly as in a run (same server, sampling, cache), so
the figures describe the judge that grades the gate's benchmarks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from evalgate._json import integer, number
from evalgate.compare.position import CONSISTENCY_FLOOR
from evalgate.errors import ConfigError, InfraError

if TYPE_CHECKING:
    from evalgate.config.load import Config
    from evalgate.config.spec import Benchmark
    from evalgate.run.cache import ResponseCache
    from evalgate.serve.base import Endpoint
    from evalgate.serve.registry import ServerFactory

__all__ = ["judge_check", "render_agreement", "run"]


def _fmt(value: float | None, pct: bool = True) -> str:
    if value is None:
        return "n/a"
    return f"{100 * value:.1f}%" if pct else f"{value:.2f}"


def _rate(value: object) -> float | None:
    return None if value is None else number(value)


def render_agreement(name: str, result: Mapping[str, object]) -> str:
    """One line per benchmark: the judge's measured agreement."""
    self_agree = (
        _fmt(_rate(result["self_agreement"]))
        if integer(result["samples"]) > 1
        else "n/a (needs --samples ≥ 2)"
    )
    line = (
        f"{name}: {result['judged']}/{result['n']} labelled examples judged "
        f"({result['errors']} without a verdict); accuracy {_fmt(_rate(result['accuracy']))}, "
        f"Cohen's κ {_fmt(_rate(result['kappa']), pct=False)}, self-agreement over "
        f"{result['samples']} samples {self_agree}"
    )
    if "position_consistency" in result:
        rate = _rate(result["position_consistency"])
        line += f", position-swap consistency {_fmt(rate)}"
        if rate is not None and rate < CONSISTENCY_FLOOR:  # compare/position.py
            line += f" (below {100 * CONSISTENCY_FLOOR:.0f}%: a comparison it judges cannot PASS)"
    return line


async def _measure(
    judge: Any,  # a suites Judge: typed where it is defined, which moves this round
    endpoint: Endpoint,
    rows: list[dict[str, object]],
    bench: Benchmark,
    cache: ResponseCache | None,
) -> dict[str, object]:
    from evalgate.run.judging import judge_client
    from evalgate.suites.judge_labels import measure

    async with judge_client(judge.spec, endpoint, bench.eval, cache) as client:
        judge.client = client
        result = await measure(judge, rows)
    result["calls"], result["cache_hits"] = judge.stats["calls"], judge.stats["cache_hits"]
    return result


def judge_check(
    config: Config,
    *,
    environ: dict[str, str],
    out: IO[str],
    server_factory: ServerFactory,
    benchmark: str | None = None,
    labels: str | None = None,
    samples: int | None = None,
    cache_dir: Path | None = None,
    output: Path | None = None,
) -> int:
    """Measure every judged benchmark's judge on its labelled set; 0 when measured (the figures
    are for a person to weigh: there is no pass mark), 2 when there is nothing to measure, 3
    when a judge gave no verdict on any example (nothing was measured)."""
    from evalgate.config.spec.benchmarks import BenchmarkBase
    from evalgate.config.spec.judge import JudgeScorer
    from evalgate.run.cache import ResponseCache
    from evalgate.serve import ServeContext
    from evalgate.suites.judge import Judge
    from evalgate.suites.judge_labels import labels_path, load_labels

    names = [b.name for b in config.benchmarks]
    if benchmark is not None and benchmark not in names:
        raise ConfigError(
            f"{config.path}: no benchmark {benchmark!r} in the config (have: {', '.join(names)})"
        )
    judged = [
        b
        for b in config.benchmarks
        if isinstance(b, BenchmarkBase)
        and isinstance(b.scorer, JudgeScorer)
        and benchmark in (None, b.name)
    ]
    if not judged:
        what = f"benchmark {benchmark!r} is not" if benchmark else "no benchmark is"
        raise ConfigError(f"{config.path}: {what} scored by a judge (scorer: {{type: judge}})")
    plans = []
    for bench in judged:
        path = Path(labels).resolve() if labels else labels_path(config, bench)
        if path is None:
            print(f"{bench.name}: no labelled set (scorer.labels): not measured", file=out)
            continue
        spec = bench.scorer
        if samples is not None:
            spec = spec.model_copy(update={"judge_samples": samples})
        plans.append((bench, Judge.from_spec(spec), load_labels(path, spec)))
    if not plans:
        raise ConfigError(
            f"{config.path}: no judged benchmark has a labelled set; set scorer.labels to a "
            "JSONL file of question, completion, reference, label (or pass --labels)"
        )
    cache = ResponseCache.in_dir(cache_dir) if cache_dir is not None else None
    results: dict[str, dict[str, object]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="evalgate-judge-check-") as logs:
            ctx = ServeContext(log_dir=Path(logs), environ=environ, config_dir=config.path.parent)
            for bench, judge, rows in plans:
                model = judge.spec.model
                labelled = model.model_copy(update={"name": f"judge-{model.name}"})
                with server_factory(labelled, ctx) as endpoint:
                    result = asyncio.run(_measure(judge, endpoint, rows, bench, cache))
                results[bench.name] = result
                print(render_agreement(bench.name, result), file=out)
    finally:
        if cache is not None:
            cache.close()
    if output is not None:
        output.mkdir(parents=True, exist_ok=True)
        (output / "judge-check.json").write_text(
            json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    unmeasured = [(name, r) for name, r in results.items() if not r["judged"]]
    if unmeasured:  # figures over nothing are no measurement: say so, and not with exit 0
        name, result = unmeasured[0]
        raise InfraError(
            f"{name}: the judge gave no verdict on any of the {result['n']} labelled examples, "
            "so nothing was measured (its replies: --output DIR, judge-check.json)"
        )
    return 0


def run(
    args: argparse.Namespace, overrides: list[str], environ: dict[str, str], out: IO[str]
) -> int:
    """``evalgate judge-check``: the command line's options, then :func:`judge_check`."""
    from evalgate.commands._options import cache_dir, output_dir
    from evalgate.config.load import load_config
    from evalgate.errors import UsageError
    from evalgate.serve import open_server

    if args.samples is not None and not 1 <= args.samples <= 32:
        raise UsageError("--samples: give a number from 1 to 32")
    return judge_check(
        load_config(Path(args.config), overrides),
        environ=environ,
        out=out,
        server_factory=open_server,
        benchmark=args.benchmark,
        labels=args.labels,
        samples=args.samples,
        cache_dir=cache_dir(args, environ),
        output=output_dir(args.output) if args.output else None,
    )

"""The registry entries meant for GPU-served models validate with the current schema."""

from __future__ import annotations

import io
from pathlib import Path

from evalgate.cli import main
from evalgate.config.load import load_config
from evalgate.score.scorers import make_scorer

NAMES = ["math500", "aime2025", "ifeval", "livecodebench"]


def test_validate_prints_ok_for_the_new_benchmarks(tmp_path: Path) -> None:
    config = tmp_path / "evals.yaml"
    config.write_text(f"benchmarks: [{', '.join(NAMES)}]\n", encoding="utf-8")
    out = io.StringIO()
    assert main(["validate", str(config)], environ={}, out=out) == 0
    text = out.getvalue()
    assert text.startswith(f"{config}: OK")
    for name in NAMES:
        assert f"benchmark {name} (hf)" in text


def test_boxed_answer_scorers(tmp_path: Path) -> None:
    config = tmp_path / "evals.yaml"
    config.write_text("benchmarks: [math500, aime2025]\n", encoding="utf-8")
    math500, aime = load_config(config).benchmarks
    assert aime.eval.rollouts == 8 and aime.sampling.temperature == 0.6
    score = make_scorer(math500.scorer)
    assert score(r"so the answer is \boxed{\frac{14}{3}}.", r"\frac{14}{3}") == 1.0
    assert score(r"\boxed{\frac{14}{4}}", r"\frac{14}{3}") == 0.0
    score = make_scorer(aime.scorer)
    assert score(r"\boxed{070}", "70") == 1.0
    assert score(r"\boxed{170}", "70") == 0.0

"""The scorecard's Runs table names each run's folder relative to the scorecard (the outputs
folder), not as the absolute path of the machine or container that wrote it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalgate.cli import main
from tests.conftest import answer_arith, write_config


def test_runs_table_paths_are_relative_to_the_scorecard(
    tmp_path: Path, scripted_server: Any
) -> None:
    server = scripted_server(answer_arith)
    config = write_config(
        tmp_path,
        f"""
models: [{{name: m, backend: openai, base_url: "{server.base_url}", model: org/m}}]
benchmarks: [{{name: arith, kind: arith, size: 4}}]
""",
    )
    out = tmp_path / "out"
    assert main(["local", str(config), "--output", str(out)], environ={"CI": "1"}) == 0
    scorecard = (out / "scorecard.md").read_text()
    assert str(tmp_path) not in scorecard
    (run_dir,) = (out / "evals").glob("*/*")
    rel = run_dir.relative_to(out).as_posix()
    assert f"`{rel}`" in scorecard and (out / rel / "results.jsonl").is_file()

"""Bad input only a run reveals: each says so in one clear line, never a silent or empty report.

Real runs (`evalgate local`) against scripted OpenAI-compatible servers on loopback."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from tests.conftest import answer_arith, write_config

ENV = {"CI": "true", "PATH": "/usr/bin"}


def _local(config: Path, out: Path, *more: str) -> tuple[int, str]:
    log = io.StringIO()
    code = main(["local", str(config), "--output", str(out), *more], out=log, environ=ENV)
    return code, log.getvalue()


@pytest.mark.parametrize(
    ("gate", "status"),
    [
        ("{scales: {accuracy: [0, 0.5]}}", "UNGATED"),
        ("{scales: {accuracy: [0, 0.5]}, thresholds: {a: {accuracy: 0.4}}}", "PASS"),
    ],
)
def test_a_declared_range_the_data_exceed_is_said_without_a_baseline(
    tmp_path: Path, scripted_server: Any, gate: str, status: str
) -> None:
    server = scripted_server(answer_arith)  # every answer right: accuracy 1 on every item
    config = write_config(
        tmp_path,
        f"models: [{{name: m, backend: openai, base_url: '{server.base_url}', model: org/m}}]\n"
        f"benchmarks: [{{name: a, kind: arith, size: 5}}]\ngate: {gate}\n",
    )
    code, log = _local(config, tmp_path / "o", "--no-cache")
    assert code == 0, log
    line = (
        "m / a / accuracy: values outside the declared range gate.scales.accuracy = [0, 0.5] "
        "(seen: 1); fix the range, or name the metric it is meant for"
    )
    verdict = json.loads((tmp_path / "o" / "verdict.json").read_text())
    assert verdict["status"] == status and line in verdict["reasons"]
    assert f"- {line}" in log and f"- {line}" in (tmp_path / "o" / "scorecard.md").read_text()


def test_a_range_the_data_keep_to_says_nothing(tmp_path: Path, scripted_server: Any) -> None:
    server = scripted_server(answer_arith)
    config = write_config(
        tmp_path,
        f"models: [{{name: m, backend: openai, base_url: '{server.base_url}', model: org/m}}]\n"
        "benchmarks: [{name: a, kind: arith, size: 5}]\ngate: {scales: {accuracy: [0, 1]}}\n",
    )
    code, log = _local(config, tmp_path / "o", "--no-cache")
    assert code == 0 and "declared range" not in log


def test_every_rollout_errored_is_said_not_an_empty_table(
    tmp_path: Path, scripted_server: Any
) -> None:
    server = scripted_server(lambda body, n: (400, "bad request", {}))
    models = ", ".join(
        f"{{name: {m}, backend: openai, base_url: '{server.base_url}', model: org/{m}}}"
        for m in ("m", "n")
    )
    config = write_config(
        tmp_path,
        f"models: [{models}]\n"
        "benchmarks: [{name: a, kind: arith, size: 5, eval: {max_retries: 0}}]\n",
    )
    code, log = _local(config, tmp_path / "o", "--no-cache")
    assert code == 3, log
    card = (tmp_path / "o" / "scorecard.md").read_text()
    side = card.split("### Models side by side", 1)[1].split("###", 1)[0]
    assert "every rollout of both models errored" in side
    assert "|---|" not in side  # no table without a row


def test_a_missing_labelled_set_names_the_evals_yaml_line(
    tmp_path: Path, scripted_server: Any
) -> None:
    server = scripted_server(answer_arith)
    (tmp_path / "qa.jsonl").write_text('{"id": "a", "prompt": "Q", "answer": "A"}\n')
    config = write_config(
        tmp_path,
        f"""models: [{{name: m, backend: openai, base_url: '{server.base_url}', model: org/m}}]
benchmarks:
  - name: qa
    kind: jsonl
    path: qa.jsonl
    scorer:
      type: judge
      model: {{name: j, backend: openai, base_url: '{server.base_url}', model: org/j}}
      labels: no-such.jsonl
""",
    )
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code, _ = _local(config, tmp_path / "o", "--no-cache")
    assert code == 2
    (line,) = [ln for ln in err.getvalue().splitlines() if ln.startswith("evalgate: error:")]
    assert line.startswith(f"evalgate: error: {config}:9: benchmarks[0].scorer.labels: "), line
    assert "no-such.jsonl: cannot read the judge's labelled set" in line
    assert server.requests == []  # before any request

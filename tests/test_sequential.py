"""Sequential early stopping in the pipeline: fewer model calls, same kind of verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalgate.cli import main
from tests.conftest import write_config

N = 400


def _setup(tmp_path: Path, url: str) -> Path:
    rows = [{"id": f"q{i:03d}", "prompt": f"Q{i}", "answer": f"A{i}"} for i in range(N)]
    (tmp_path / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return write_config(
        tmp_path,
        f"""
models: [{{name: m, backend: openai, base_url: "{url}", model: org/m}}]
benchmarks: [{{name: qa, kind: jsonl, path: qa.jsonl}}]
eval: {{max_concurrent: 16}}
""",
    )


def _answers(wrong_every: int | None):
    def script(body: dict[str, Any], n: int) -> str:
        i = int(body["messages"][-1]["content"].removeprefix("Q"))
        if i % 10 == 0:  # both arms miss these: the baseline is 90 %
            return "wrong"
        return "wrong" if wrong_every and i % wrong_every == 1 else f"A{i}"

    return script


def _run(tmp_path: Path, config: Path, out: str, *extra: str) -> tuple[int, dict]:
    code = main(
        ["local", str(config), "--output", str(tmp_path / out), *extra], environ={"CI": "1"}
    )
    return code, json.loads((tmp_path / out / "verdict.json").read_text())


def test_clear_regression_stops_after_the_first_look(tmp_path: Path, scripted_server: Any) -> None:
    base = scripted_server(_answers(None))
    config = _setup(tmp_path, base.base_url)
    _run(tmp_path, config, "base")
    head = scripted_server(_answers(3))  # loses a third of the items
    config = _setup(tmp_path, head.base_url)
    code, verdict = _run(
        tmp_path, config, "head", "--baseline", str(tmp_path / "base"), "--eval.sequential=true"
    )
    assert (verdict["status"], code) == ("FAIL", 1)
    seq = verdict["runs"][0]["extra"]["sequential"]
    assert seq["look"] == 1 and seq["stopped_early"] and seq["items_used"] == N // 4
    assert len(head.requests) == N // 4  # three quarters of the model calls never made
    scorecard = (tmp_path / "head" / "scorecard.md").read_text()
    assert "sequential: FAIL on accuracy at look 1/4 after 100/400 paired items (25%)" in scorecard


def test_unchanged_model_is_not_failed_and_uses_at_most_all_items(
    tmp_path: Path, scripted_server: Any
) -> None:
    server = scripted_server(_answers(None))
    config = _setup(tmp_path, server.base_url)
    _run(tmp_path, config, "base")
    calls_before = len(server.requests)
    code, verdict = _run(
        tmp_path, config, "head", "--baseline", str(tmp_path / "base"), "--eval.sequential=true"
    )
    assert verdict["status"] == "PASS" and code == 0
    assert len(server.requests) - calls_before <= N


def test_sequential_without_baseline_runs_everything(tmp_path: Path, scripted_server: Any) -> None:
    server = scripted_server(_answers(None))
    config = _setup(tmp_path, server.base_url)
    code, verdict = _run(tmp_path, config, "only", "--eval.sequential=true")
    assert code == 0 and len(server.requests) == N
    assert "sequential" not in verdict["runs"][0]["extra"]


def _record(item_id: str, score: float) -> dict[str, Any]:
    return {"example_id": item_id, "error": None, "metrics": {"accuracy": score}, "reward": score}


def test_resumed_looks_count_the_journal_rollouts() -> None:
    # A run interrupted after its first look kept 100 rollouts in its journal, all regressions.
    # On resume the first look must see them (and FAIL at once), not an empty head.
    import asyncio
    from types import SimpleNamespace

    from evalgate.run.fingerprint import item_hash
    from evalgate.run.sequential import plan_order, run_sequential
    from evalgate.suites.base import Item

    items = [Item(f"q{i:03d}", f"Q{i}", f"A{i}") for i in range(N)]
    baseline = SimpleNamespace(
        records=[
            {**_record(it.id, 1.0), "item_hash": item_hash(it.prompt, it.answer)} for it in items
        ],
        rollouts=1,
    )
    order, _, _ = plan_order(items, baseline, "accuracy", seed=0)
    kept = [_record(it.id, 0.0) for it in order[: N // 4]]  # the journal: look 1, all broken
    calls: list[list[str]] = []

    async def run_items(subset: Any) -> list[dict[str, Any]]:
        todo = [it for it in subset.items if it.id not in {r["example_id"] for r in kept}]
        calls.append([it.id for it in todo])
        return [_record(it.id, 1.0) for it in todo]

    suite = SimpleNamespace(items=items, name="qa")
    records, result = asyncio.run(
        run_sequential(
            suite,
            baseline,
            metric="accuracy",
            rollouts=1,
            looks=4,
            margin=0.03,
            alpha=0.05,
            seed=0,
            run_items=run_items,
            prior=kept,
        )
    )
    assert result is not None and (result.decision, result.look) == ("FAIL", 1)
    assert calls == [[]] and records == []  # nothing re-run, nothing run beyond look 1

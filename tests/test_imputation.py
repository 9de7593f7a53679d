"""Missing outcomes never help a PASS: a PR rollout that errored counts as the worst score on
its scale for the PASS decision (the FAIL side reads the scores it has, as before).

The attack (issue 35): a PR model that returns HTTP 500 on exactly the items it would get
wrong, within the 5 % error budget, dropped those items from the pairs and PASSed at Δ = 0,
where answering them wrongly FAILs. Scripted models over real HTTP, real statistics.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalgate.cli import main
from tests.conftest import write_config

N = 200
BASE = set(range(140))  # the base answers items 0..139 right
HIDDEN = set(range(9))  # the 9 items the PR would get wrong (4.5 % of 200: within 5 %)


def _dataset(tmp_path: Path) -> None:
    rows = [{"id": f"q{i:03d}", "prompt": f"Q{i}", "answer": f"A{i}"} for i in range(N)]
    (tmp_path / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def _model(correct: set[int], fail_on: set[int] = frozenset()):  # type: ignore[assignment]
    def script(body: dict[str, Any], n: int) -> Any:
        i = int(body["messages"][-1]["content"].removeprefix("Q"))
        if i in fail_on:
            return (500, "internal error", {})
        return f"A{i}" if i in correct else "wrong"

    return script


def _local(tmp_path: Path, server: Any, out: str, *extra: str) -> tuple[int, dict]:
    _dataset(tmp_path)
    # No retries: a 500 is the rollout's error at once (the test needs no backoff waits).
    config = write_config(
        tmp_path,
        f"""
models:
  - {{name: m, backend: openai, base_url: "{server.base_url}", model: org/m}}
benchmarks:
  - {{name: qa, kind: jsonl, path: qa.jsonl, scorer: {{type: exact}}}}
eval: {{max_concurrent: 16, max_retries: 0}}
gate: {{margin: 0.05}}
""",
    )
    code = main(
        ["local", str(config), "--output", str(tmp_path / out), *extra], environ={"CI": "1"}
    )
    return code, json.loads((tmp_path / out / "verdict.json").read_text())


def _baseline_check(verdict: dict) -> dict:
    (check,) = [c for c in verdict["checks"] if c["kind"] == "baseline"]
    return check


def test_erroring_on_the_items_it_would_get_wrong_does_not_pass(
    tmp_path: Path, scripted_server: Any
) -> None:
    base = scripted_server(_model(BASE))
    assert _local(tmp_path, base, "base")[0] == 0
    baseline = ["--baseline", str(tmp_path / "base")]

    # Answering the 9 items wrongly is a regression the gate catches.
    honest = scripted_server(_model(BASE - HIDDEN))
    code, verdict = _local(tmp_path, honest, "honest", *baseline)
    assert (verdict["status"], code) == ("FAIL", 1)

    # Returning 500 on exactly those items (4.5 % errors, under the 5 % budget) must not PASS.
    sly = scripted_server(_model(BASE, fail_on=HIDDEN))
    code, verdict = _local(tmp_path, sly, "sly", *baseline)
    check = _baseline_check(verdict)
    assert verdict["runs"][0]["errors"] == len(HIDDEN)
    assert check["status"] != "PASS" and verdict["status"] != "PASS"
    comparison = check["comparison"]
    # The FAIL side is unchanged: the 191 answered items, Δ = 0, no regression shown.
    assert comparison["result"]["n"] == N - len(HIDDEN)
    assert comparison["result"]["delta"] == 0.0 and comparison["result"]["hi"] >= 0.0
    # The PASS side counted the 9 errored rollouts as wrong answers: its bound is the honest
    # run's (the same 9 items lost), below the margin.
    assert comparison["imputed"] == len(HIDDEN)
    honest_lo = _baseline_check(json.loads((tmp_path / "honest" / "verdict.json").read_text()))
    assert comparison["result"]["lo"] == honest_lo["comparison"]["result"]["lo"]
    assert comparison["result"]["lo"] < -0.05
    scorecard = (tmp_path / "sly" / "scorecard.md").read_text()
    assert "9 PR rollouts errored, scored 0 for PASS" in scorecard
    report = (tmp_path / "sly" / "report.html").read_text()
    assert "9 PR rollouts errored, scored 0 for PASS" in report

    # `evalgate compare` on the saved runs reproduces the verdict, check for check.
    compared = main(["compare", str(tmp_path / "base"), str(tmp_path / "sly"), "--output",
                     str(tmp_path / "cmp")])  # fmt: skip
    saved = json.loads((tmp_path / "cmp" / "verdict.json").read_text())
    assert compared == code and saved["status"] == verdict["status"]
    assert _baseline_check(saved)["comparison"] == comparison


def _run(where: Path, records: list[dict[str, Any]], k: int) -> Any:
    """A saved run (its journal written to ``where``) as compare reads it."""
    from evalgate.run.rollouts import RolloutTable
    from evalgate.run.rundir import LoadedRun
    from evalgate.run.runfiles import RunConfig, RunMetadata

    where.mkdir(parents=True, exist_ok=True)
    (where / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    table = RolloutTable()
    table.extend(records)
    config = {
        "benchmark": {"name": "qa", "eval": {"rollouts": k}},
        "model": {"name": "m"},
        "fingerprint": {"measurement": {"scorer": {"type": "judge"}}},
    }
    return LoadedRun(where, RunConfig.model_validate(config), table, RunMetadata())


def _rec(item: int, rollout: int, score: float | None, error: str | None = None) -> dict:
    return {
        "example_id": f"q{item:03d}",
        "item_hash": f"h{item}",
        "rollout": rollout,
        "group": None,
        "prompt": "p",
        "completion": "c",
        "reward": score,
        "metrics": {} if score is None else {"score": score},
        "usage": {},
        "error": error,
    }


def test_a_graded_scale_imputes_its_minimum_rollout_by_rollout(tmp_path: Path) -> None:
    # A 1–5 judge score (gate.scales: [1, 5]), k = 4: the PR errors on the one rollout in four
    # of 20 items where it would score 1 instead of the base's 5 (2.5 % of rollouts). Dropped,
    # those items average 5 and the PR looks as good as the base; on the PASS side each errored
    # rollout scores 1, the scale's minimum, as answering it would have.
    from evalgate.compare.paired import compare_runs

    n, k = 200, 4
    base = [_rec(i, r, 5.0 if i % 2 else 3.0) for i in range(n) for r in range(k)]
    hidden = {i for i in range(n) if i % 10 == 1}  # 20 items the base scored 5: Δ = −δ
    head = [
        _rec(i, r, None, "http_500: internal error")
        if i in hidden and r == 0
        else _rec(i, r, 5.0 if i % 2 else 3.0)
        for i in range(n)
        for r in range(k)
    ]
    answered = [_rec(i, r, 1.0 if i in hidden and r == 0 else 5.0 if i % 2 else 3.0)
                for i in range(n) for r in range(k)]  # fmt: skip
    common = {"margin": 0.1, "alpha": 0.05, "scales": {"score": [1, 5]}}
    base_run = _run(tmp_path / "base", base, k)
    (sly,) = compare_runs(base_run, _run(tmp_path / "sly", head, k), **common).metrics
    (honest,) = compare_runs(base_run, _run(tmp_path / "honest", answered, k), **common).metrics
    assert sly.result is not None and honest.result is not None
    assert (sly.imputed, sly.imputed_as) == (len(hidden), 1.0)
    assert sly.result.delta == 0.0 and sly.result.n == n  # the FAIL side: the scores it has
    # The PASS side is the honest run's: the same values, the same items, the same order.
    assert sly.result.lo == honest.result.lo
    assert sly.result.p_noninferiority == honest.result.p_noninferiority
    assert sly.status != "PASS" and honest.status != "PASS"
    # Without the errored rollouts (the gate before), the same PR PASSes on Δ = 0.
    dropped = [r for r in head if r["error"] is None]
    (before,) = compare_runs(base_run, _run(tmp_path / "dropped", dropped, k), **common).metrics
    assert before.status == "PASS" and before.imputed == 0
    assert (honest.imputed, honest.imputed_as) == (0, None)

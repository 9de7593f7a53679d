"""Sequential early stopping in the pipeline: fewer model calls, same kind of verdict."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
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
    # The items the looks never ran are not "dropped" by the PR: the scorecard and verdict.json
    # tell the two apart.
    assert "dropped" not in scorecard and "300 not run (the looks stopped)" in scorecard
    compared = verdict["comparisons"][0]
    assert (compared["n_base_only"], compared["n_not_run"]) == (0, 300)


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


def order_key_of(seed: int) -> Any:
    """A fixed order key for a seeded test (a run's key is drawn by the gate: stats.OrderKey)."""
    import hashlib

    from evalgate import stats

    return stats.OrderKey(hashlib.sha256(f"test order {seed}".encode()).digest())


def looks_metadata(result: Any, seed: int) -> dict[str, Any]:
    """The metadata.json a sequential run of ``order_key_of(seed)`` writes about its order."""
    import dataclasses

    return {"sequential": dataclasses.asdict(result), "order_key": order_key_of(seed).record()}


def run_looks(
    items: list[Any],
    baseline: Any,
    head: dict[str, float],
    seed: int,
    errored: set[str],
    *,
    record: Callable[[Any], dict[str, Any]] | None = None,
    scale: Any = None,
    looks: int = 4,
) -> tuple[Any, Any, list[list[str]]]:
    """`run_sequential` over ``items`` with a scripted PR: each item scores ``head[id]`` (as
    ``record(item)`` writes it) and the ``errored`` ones fail, in the order of
    ``order_key_of(seed)``. (records, result, ids per look)."""
    import asyncio

    from evalgate.run.sequential import run_sequential

    write = record or (lambda it: _record(it.id, head[it.id]))
    ran: list[list[str]] = []

    async def run_items(subset: Any) -> list[dict[str, Any]]:
        ran.append([it.id for it in subset.items])
        return [{**write(it), "error": "boom" if it.id in errored else None} for it in subset.items]

    records, result = asyncio.run(
        run_sequential(
            SimpleNamespace(items=items, name="qa"),
            baseline,
            metric="accuracy",
            rollouts=1,
            looks=looks,
            margin=0.05,
            alpha=0.05,
            key=order_key_of(seed),
            run_items=run_items,
            scale=scale,
        )
    )
    return records, result, ran


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
    order, _, _ = plan_order(items, baseline, "accuracy", order_key_of(0))
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
            key=order_key_of(0),
            run_items=run_items,
            prior=kept,
        )
    )
    assert result is not None and (result.decision, result.look) == ("FAIL", 1)
    assert calls == [[]] and list(records) == []  # nothing re-run, nothing run beyond look 1


def _run_dir(out: Path) -> Path:
    (run,) = out.glob("evals/*/*")
    return run


def _resume(out: Path, run: Path, *args: str) -> int:
    argv = ["resume", run.name, "--output", str(out), "--no-cache", *args]
    return main(argv, environ={"CI": "1"})


def test_resume_after_the_first_look_decides_as_an_uninterrupted_run(
    tmp_path: Path, scripted_server: Any, monkeypatch: Any
) -> None:
    # A PR that breaks 16 of 400 items: not yet clear at look 1 (100 items), so the decision
    # comes at a later look. Interrupted after look 1 (a token cap: 10 tokens a request), then
    # resumed, the run must look again with the journal's 100 rollouts counted and reach the
    # same decision at the same look, with the same model calls in all. The gate draws each
    # run's order key: here the whole run and the cut one draw the same key (after the base's
    # own), and any later draw (a resume that did not read the key in its plan) another.
    from evalgate import stats

    drawn = iter([order_key_of(0), order_key_of(1), order_key_of(1)] + [order_key_of(2)] * 9)
    monkeypatch.setattr(stats.OrderKey, "draw", classmethod(lambda cls: next(drawn)))

    def breaks(body: dict[str, Any], n: int) -> str:
        i = int(body["messages"][-1]["content"].removeprefix("Q"))
        return _answers(None)(body, n) if i % 25 != 1 else "wrong"

    base = scripted_server(_answers(None))
    _run(tmp_path, _setup(tmp_path, base.base_url), "base")
    baseline = ["--baseline", str(tmp_path / "base"), "--eval.sequential=true", "--no-cache"]

    whole = scripted_server(breaks)
    code, expected = _run(tmp_path, _setup(tmp_path, whole.base_url), "whole", *baseline)
    seq = expected["runs"][0]["extra"]["sequential"]
    assert (expected["status"], code) == ("FAIL", 1) and seq["look"] > 1, seq
    assert len(whole.requests) == seq["items_used"] < N

    cut = scripted_server(breaks)
    config = _setup(tmp_path, cut.base_url)
    code, _ = _run(tmp_path, config, "cut", *baseline, f"--budget.tokens={10 * N // 4}")
    assert code == 3 and len(cut.requests) == N // 4  # stopped after the first look
    run = _run_dir(tmp_path / "cut")

    code = _resume(tmp_path / "cut", run, "--budget.tokens=1000000")
    resumed = json.loads((tmp_path / "cut" / "verdict.json").read_text())
    assert (resumed["status"], code) == ("FAIL", 1)
    got = resumed["runs"][0]["extra"]["sequential"]
    assert {k: got[k] for k in ("decision", "look", "items_used", "history")} == {
        k: seq[k] for k in ("decision", "look", "items_used", "history")
    }
    assert len(cut.requests) == len(whole.requests)  # the first look's calls were not repeated
    # Compared with the same baseline, the scorecard's row is the one the whole run showed.
    (comp,) = resumed["comparisons"]
    (whole_comp,) = expected["comparisons"]
    assert comp["metrics"] == whole_comp["metrics"] and comp["metrics"][0]["status"] == "FAIL"
    # What made that possible: the run's manifest names its baseline (and the look plan).
    cfg = json.loads((run / "run_config.json").read_text())
    assert cfg["baseline"]["run_id"] == _run_dir(tmp_path / "base").name
    plan = {"metric": "accuracy", "looks": 4, "order_key": order_key_of(1).record()}
    assert cfg["sequential"] == plan
    meta = json.loads((run / "metadata.json").read_text())
    assert meta["order_key"] == plan["order_key"]  # compare reads the order the looks ran in


def _cut_after_the_first_look(tmp_path: Path, scripted_server: Any, prefix: str) -> Any:
    """A baseline at PREFIXbase and a sequential run at PREFIXcut stopped by its token budget
    after the first look; returns the server."""
    server = scripted_server(_answers(None))
    config = _setup(tmp_path, server.base_url)
    _run(tmp_path, config, f"{prefix}base")
    args = ["--baseline", str(tmp_path / f"{prefix}base"), "--eval.sequential=true", "--no-cache"]
    code, _ = _run(tmp_path, config, f"{prefix}cut", *args, f"--budget.tokens={10 * N // 4}")
    assert code == 3
    return server


def test_resume_of_a_sequential_run_whose_baseline_is_gone_says_so(
    tmp_path: Path, scripted_server: Any, capsys: Any
) -> None:
    import shutil

    server = _cut_after_the_first_look(tmp_path, scripted_server, "")
    shutil.rmtree(tmp_path / "base")
    run = _run_dir(tmp_path / "cut")
    code = _resume(tmp_path / "cut", run)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(server.requests) == N + N // 4  # nothing more was sent
    assert "run_config.json: baseline.path" in err[-1] and "is gone" in err[-1], err


def test_resume_without_looks_whose_baseline_is_gone_finishes_with_a_warning(
    tmp_path: Path, scripted_server: Any, capsys: Any
) -> None:
    # Without sequential looks nothing depends on the baseline while running: the run is
    # finished (and gated without the comparison), and the log says why.
    import shutil

    server = scripted_server(_answers(None))
    config = _setup(tmp_path, server.base_url)
    _run(tmp_path, config, "base")
    args = ["--baseline", str(tmp_path / "base"), "--no-cache", f"--budget.tokens={10 * N // 4}"]
    assert _run(tmp_path, config, "cut", *args)[0] == 3
    shutil.rmtree(tmp_path / "base")
    run = _run_dir(tmp_path / "cut")
    code = _resume(tmp_path / "cut", run, "--budget.tokens=1000000")
    assert code == 0 and len(server.requests) == 2 * N
    assert "is gone" in capsys.readouterr().err
    assert json.loads((tmp_path / "cut" / "verdict.json").read_text())["comparisons"] == []


def test_recorded_baseline_is_checked_by_its_digest(tmp_path: Path) -> None:
    import pytest

    from evalgate.compare.paired import load_run
    from evalgate.errors import UsageError
    from evalgate.run.baseline import baseline_reference, load_recorded_baseline

    base = tmp_path / "base"
    base.mkdir()
    (base / "run_config.json").write_text(
        json.dumps({"model": {"name": "m"}, "benchmark": {"name": "qa"}})
    )
    (base / "results.jsonl").write_text(json.dumps(_record("q000", 1.0)) + "\n")
    (base / "metadata.json").write_text(json.dumps({"complete": True}))  # a finished run
    ref = baseline_reference(load_run(base, origin={"commit": "abc"}))
    loaded = load_recorded_baseline(tmp_path, ref)
    assert list(loaded.full_records()) == [_record("q000", 1.0)] and loaded.origin == {
        "commit": "abc"
    }
    # Re-run since (other results): resuming against it would pair with other outcomes.
    (base / "results.jsonl").write_text(json.dumps(_record("q000", 0.0)) + "\n")
    with pytest.raises(UsageError, match=r"changed since this run started"):
        load_recorded_baseline(tmp_path, ref)


def test_resume_finds_the_baseline_when_the_output_tree_moved(
    tmp_path: Path, scripted_server: Any
) -> None:
    # Runs are folders users copy around (CI artifacts, a laptop): a sequential run and its
    # baseline moved together keep resuming; the digest still checks it is the same baseline.
    import shutil

    _cut_after_the_first_look(tmp_path, scripted_server, "old/")
    shutil.move(tmp_path / "old", tmp_path / "new")
    run = _run_dir(tmp_path / "new/cut")
    code = _resume(tmp_path / "new/cut", run, "--budget.tokens=1000000")
    resumed = json.loads((tmp_path / "new/cut" / "verdict.json").read_text())
    assert (resumed["status"], code) == ("PASS", 0)
    assert resumed["comparisons"][0]["base_path"].startswith(str(tmp_path / "new/base"))


def _graded_pr(seed: int, n: int, drop: float = 0.03) -> tuple[list[Any], dict, dict, Any]:
    """(items, base scores, head scores, baseline) of a seeded graded PR."""
    import random
    from types import SimpleNamespace

    from evalgate.run.fingerprint import item_hash
    from evalgate.suites.base import Item

    rng = random.Random(seed)
    items = [Item(f"q{i:03d}", f"Q{i}", f"A{i}") for i in range(n)]
    base = {it.id: rng.betavariate(2, 2) for it in items}
    head = {k: min(1.0, max(0.0, v - drop + rng.gauss(0, 0.15))) for k, v in base.items()}
    baseline = SimpleNamespace(
        records=[
            {**_record(it.id, base[it.id]), "item_hash": item_hash(it.prompt, it.answer)}
            for it in items
        ],
        rollouts=1,
    )
    return items, base, head, baseline


def _loaded(where: Path, records: list[dict[str, Any]], metadata: dict[str, Any]) -> Any:
    """A run in memory (its table of rollouts) whose journal, which compare reads again for
    the flipped items' texts, is written to ``where``."""
    from evalgate.run.rollouts import RolloutTable
    from evalgate.run.rundir import LoadedRun
    from evalgate.run.runfiles import RunConfig, RunMetadata

    where.mkdir(parents=True, exist_ok=True)
    (where / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    table = RolloutTable()
    for rec in records:
        table.append(rec)
    config = {
        "benchmark": {"name": "qa", "eval": {"rollouts": 1}},
        "model": {"name": "m"},
        "fingerprint": {"measurement": {"scorer": {"type": "exact"}}},
    }
    return LoadedRun(
        where, RunConfig.model_validate(config), table, RunMetadata.model_validate(metadata)
    )


def test_a_looks_verdict_is_the_one_compare_reads_from_the_results(tmp_path: Path) -> None:
    # Graded scores: the PASS bound (betting) and the sign-flips depend on the items' order. The
    # looks run the items in one data-independent order (a keyed hash of the id) and `compare`
    # reads the finished run's results back in it, with the same horizon: the scorecard's
    # verdict is the one the last look reached, errored items or not. (Reading the looks' items
    # in another order than compare's gave 3 of 60 seeded PRs another verdict, PASS↔FAIL.)

    import numpy as np

    from evalgate import stats
    from evalgate.compare.paired import compare_runs
    from evalgate.run.sequential import plan_order

    decisions = set()
    for seed in (11, 25, 47, 3, 8):
        items, base, head, baseline = _graded_pr(seed, 200, drop=0.03 if seed % 2 else -0.02)
        errored = {it.id for it in items[seed::17]}  # the PR errors on some items
        records, result, _ = run_looks(items, baseline, head, seed, errored)
        assert result is not None
        decisions.add(result.decision)
        hashes = {r["example_id"]: r["item_hash"] for r in baseline.records}
        head_records = [{**rec, "item_hash": hashes[rec["example_id"]]} for rec in records]
        meta = looks_metadata(result, seed)
        comparison = compare_runs(
            _loaded(tmp_path / f"base{seed}", baseline.records, {}),
            _loaded(tmp_path / f"head{seed}", head_records[::-1], meta),  # finished in any order
            margin=0.05,
            alpha=0.05,
        )
        (mc,) = [m for m in comparison.metrics if m.metric == "accuracy"]
        assert mc.status == result.decision, seed
        # The very numbers the last look computed: its items in the order they ran (errored ones
        # dropped), bets tuned to the items planned, not to those compare finds.
        order, _, _ = plan_order(items, baseline, "accuracy", order_key_of(seed))
        ran = {r["example_id"] for r in head_records if r["error"] is None}
        seen = [it.id for it in order[: result.items_used] if it.id in ran]
        look = stats.sequential_compare(
            np.array([base[i] for i in seen]),
            np.array([head[i] for i in seen]),
            stats.Design(looks=4, margin=0.05, alpha=0.05, horizon=len(order)),
            look=result.look,
        )
        assert mc.result is not None and mc.result.n == len(seen) < len(order)
        assert (mc.result.hi, mc.result.p_regression) == (look.hi, look.p_regression)
        # The PASS side reads the errored items too, scored 0 (evalgate.run.imputed), in the
        # same order, with the same horizon.
        tried = [it.id for it in order[: result.items_used]]
        worst = stats.sequential_compare(
            np.array([base[i] for i in tried]),
            np.array([0.0 if i in errored else head[i] for i in tried]),
            stats.Design(looks=4, margin=0.05, alpha=0.05, horizon=len(order)),
            look=result.look,
        )
        assert mc.imputed == len(errored & set(tried)) > 0
        assert (mc.result.lo, mc.result.p_noninferiority) == (worst.lo, worst.p_noninferiority)
    assert decisions >= {"PASS", "FAIL"}  # both sides were exercised


def test_the_looks_run_the_items_in_the_order_compare_reads_them() -> None:
    # The items a look has seen are a prefix of the one order (so the betting capital at a look
    # is one process's value at that time), and dropping items never reorders the others.
    from evalgate import stats
    from evalgate.run.sequential import plan_order

    items, _base, _head, baseline = _graded_pr(5, 120)
    for seed in (0, 9):
        key = order_key_of(seed)
        order, unpaired, _ = plan_order(items, baseline, "accuracy", key)
        ids = [it.id for it in order]
        assert not unpaired and ids == stats.item_order([it.id for it in items], key)
        assert ids != sorted(ids)  # a hash order, not the ids' order
        kept = [i for i in ids if int(i[1:]) % 7]  # errored or missing items dropped
        assert stats.item_order(reversed(kept), key) == kept
    assert stats.item_order(ids, order_key_of(0)) != stats.item_order(ids, order_key_of(9))


def test_compare_reads_a_runs_items_in_one_order_whatever_order_they_finished_in(
    tmp_path: Path, scripted_server: Any
) -> None:
    # results.jsonl is appended as rollouts finish (concurrency decides the order). Graded
    # scores' bounds depend on the items' order, so compare must put them in one order of its
    # own, or two readings of the same data could differ (and a look's verdict not reproduce).
    import random

    server = scripted_server(_answers(None))
    config = _setup(tmp_path, server.base_url)
    _run(tmp_path, config, "base")
    _run(tmp_path, config, "head", "--baseline", str(tmp_path / "base"))
    rng = random.Random(7)
    graded: dict[str, float] = {}
    for side, shift in (("base", 0.0), ("head", -0.03)):
        (results,) = (tmp_path / side).glob("evals/*/*/results.jsonl")
        recs = [json.loads(line) for line in results.read_text().splitlines()]
        for rec in recs:
            if side == "base":
                graded[rec["example_id"]] = rng.betavariate(2, 2)
            value = graded[rec["example_id"]] + shift + (rng.gauss(0, 0.15) if shift else 0.0)
            rec["metrics"]["accuracy"] = rec["reward"] = min(1.0, max(0.0, value))
        results.write_text("".join(json.dumps(r) + "\n" for r in recs))
    (results,) = (tmp_path / "head").glob("evals/*/*/results.jsonl")
    lines = results.read_text().splitlines(keepends=True)
    seen = []
    for attempt in range(4):
        main(
            [
                "compare",
                str(tmp_path / "base"),
                str(tmp_path / "head"),
                "--output",
                str(tmp_path / f"cmp{attempt}"),
            ],
            environ={"CI": "1"},
        )
        verdict = json.loads((tmp_path / f"cmp{attempt}" / "verdict.json").read_text())
        metric = verdict["comparisons"][0]["metrics"][0]
        seen.append({k: v for k, v in metric.items() if k != "reason"})
        random.Random(attempt).shuffle(lines)  # another finishing order, the same data
        results.write_text("".join(lines))
    assert all(s == seen[0] for s in seen), seen

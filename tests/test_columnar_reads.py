"""The run-folder reader (orjson lines into a RolloutTable) and the table's column reads (per-item
means, pass@k, the summary's counts with numpy) give what a pass over every record as a dict gave:
the same values to the bit, in the same order, and the same comparison of a run pair."""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

import evalgate.compare.runs as runs
import evalgate.run.summary as summary_module
from evalgate.compare.paired import compare_runs, summary_of
from evalgate.run.fingerprint import item_hash
from evalgate.run.rundir import LoadedRun, RunDir, load_run
from evalgate.run.summary import item_metrics, summarize

K = 4


def _hash(i: int, changed: bool) -> str:
    """The engine's content hash (16 hex digits) for most items, a hand-made one for some."""
    if i % 5 == 4:
        return f"h{i}{'x' if changed else ''}"
    return item_hash(f"question {i}", "changed" if changed else "a")


@pytest.fixture(autouse=True)
def _columns_at_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    # A table is read from its columns from COLUMNAR_ROWS rows on (smaller ones row by row, not
    # to import numpy for them): here every table is, so that the two paths are compared.
    monkeypatch.setattr(summary_module, "COLUMNAR_ROWS", 0)


def _records(n: int, seed: int, *, worse: float = 0.0, changed: int = 0) -> list[dict[str, Any]]:
    """k = 4 rollouts of n items with what real journals hold: judge scores that are not
    dyadic (0.7, 1/3), a metric some rollouts lack, int rewards, errors, NaN scores, usage names
    some rollouts lack, interleaved items (as concurrent rollouts finish)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        for r in range(K):
            p = rng.random()
            reward: Any = float(p < 0.6 - worse)
            rec: dict[str, Any] = {
                "example_id": f"item-{i}",
                "item_hash": _hash(i, changed > 0 and i % changed == 0),
                "rollout": r,
                "group": None,
                "prompt": [{"role": "user", "content": f"question {i}"}],
                "completion": "" if p > 0.97 else f"answer {i}.{r}",
                "reward": reward,
                "metrics": {"accuracy": reward, "judge": rng.choice([0.7, 1 / 3, 0.1, 0.9])},
                "usage": {"prompt_tokens": 10 + i, "completion_tokens": r},
                "error": None,
            }
            if i % 7 == 3:
                rec["metrics"]["style"] = rng.random()  # a metric only some items have
                rec["usage"]["reasoning_tokens"] = 5
            if i % 11 == 5 and r == 2:
                rec.update(reward=None, metrics={}, error="timeout: no answer", completion=None)
            if i % 13 == 6 and r == 1:
                rec["metrics"]["judge"] = float("nan")  # unusable: an error of its own kind
            if i % 17 == 8:
                rec["reward"] = int(reward)  # an int reward, as a hand-made journal has
                rec["metrics"]["accuracy"] = int(reward)
            out.append(rec)
    # Rollouts finish out of order: a window of neighbours shuffled.
    for at in range(0, len(out), 10):
        window = out[at : at + 10]
        rng.shuffle(window)
        out[at : at + 10] = window
    return out


def _write(root: Path, records: list[dict[str, Any]]) -> Path:
    run = RunDir.create(root, "b", "org/m", "20260101-000000-000abc")
    run.write_config(
        {
            "model": {"name": "m"},
            "benchmark": {"name": "b", "eval": {"rollouts": K}},
            "gate": {},
            "fingerprint": {"measurement": {"d": 1}, "subject": {"m": 1}},
        }
    )
    # As the engine writes: json.dumps (NaN written as NaN, which orjson refuses to parse).
    run.results_path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    run.write_metadata({"complete": True, "rollouts_per_example": K})
    return run.path


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def test_the_columns_give_the_per_item_values_of_the_records(tmp_path: Path) -> None:
    records = _records(300, seed=1)
    run = load_run(_write(tmp_path, records))
    parsed = [json.loads(json.dumps(r)) for r in records]
    expected = item_metrics(parsed, K)
    got = item_metrics(run.records, K)
    assert list(got) == list(expected) == ["accuracy", "judge", "pass@4", "pass^4", "style"]
    for name in expected:  # the same items, in the same order, to the bit
        assert list(got[name].items()) == list(expected[name].items()), name
    # And the table's own rows, iterated as dicts, through the records' pass.
    assert _same(item_metrics(list(run.records), K), got)


def test_a_run_without_errors_reads_its_columns_as_the_records(tmp_path: Path) -> None:
    """No errored rollout: the columns are read in place (views), items in their own order."""
    records = [
        r
        for r in _records(300, seed=8)
        if r["error"] is None and all(v == v for v in r["metrics"].values())
    ]
    run = load_run(_write(tmp_path, records))
    assert not run.records.errored
    parsed = [json.loads(json.dumps(r)) for r in records]
    for derived in (True, False):
        expected = item_metrics(parsed, K, derived=derived)
        got = item_metrics(run.records, K, derived=derived)
        assert list(got) == list(expected)
        for name in expected:
            assert list(got[name].items()) == list(expected[name].items()), name


def test_the_columns_give_the_summary_of_the_records(tmp_path: Path) -> None:
    records = _records(200, seed=2)
    run = load_run(_write(tmp_path, records))
    parsed = [json.loads(json.dumps(r)) for r in records]
    args: dict[str, Any] = {"benchmark": "b", "model": "m", "model_id": "", "rollouts": K}
    expected = summarize(parsed, run_dir=str(run.path), n_items=200, time_s=0.0, **args)
    got = summary_of(run)
    assert _same(asdict(got), asdict(expected))
    assert got.errors > 0 and got.empty_replies > 0 and "reasoning_tokens" in got.usage


@pytest.mark.parametrize("seed", [3, 4])
def test_a_run_pair_compares_as_through_the_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    base = load_run(_write(tmp_path / "base", _records(400, seed)))
    head = load_run(_write(tmp_path / "head", _records(400, seed + 100, worse=0.08, changed=9)))
    with monkeypatch.context() as patch:  # the flips' texts: only their lines are parsed
        patch.setattr(LoadedRun, "full_records", lambda *a, **k: pytest.fail("journal re-read"))
        got = compare_runs(base, head, margin=0.05, alpha=0.05)
    # Items whose content changed are not paired: counted, from the records themselves.
    assert got.n_changed == len(range(0, 400, 9)) and got.n_base_only == got.n_head_only == 0

    def through_rows(records: Any, rollouts: int, **kw: Any) -> dict[str, dict[str, float]]:
        return item_metrics(list(records), rollouts, **kw)  # a dict per row: the records' pass

    monkeypatch.setattr(runs, "item_metrics", through_rows)
    expected = compare_runs(base, head, margin=0.05, alpha=0.05)
    assert got.comparable and got.n_paired > 300 and got.flips
    assert [m.metric for m in got.metrics] == ["accuracy", "judge", "style"]
    assert _same(asdict(got), asdict(expected))


def test_a_run_pair_with_ids_on_one_code_and_items_on_one_side_compares_as_the_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The join of the two tables (compare/join.py) matches ids by an 8-byte code first: with
    every id on one of 5 codes, items only the baseline has, only the PR has, changed items,
    k = 4 and errored rollouts, the pairs, the counts and every figure are those of the
    records' pass (dicts keyed by the ids themselves), and each id finds its own item."""
    import evalgate.run.item_ids as item_ids

    monkeypatch.setattr(item_ids, "_code", lambda item_id: hash(item_id) % 5)
    base_records = [r for r in _records(300, 11) if not r["example_id"].endswith("3")]
    head_records = [
        r for r in _records(330, 12, worse=0.08, changed=7) if not r["example_id"].endswith("5")
    ]
    base = load_run(_write(tmp_path / "base", base_records))
    head = load_run(_write(tmp_path / "head", head_records))
    for run, records in ((base, base_records), (head, head_records)):
        ids = list(dict.fromkeys(r["example_id"] for r in records))
        assert [run.records.index_of(i) for i in ids] == list(range(len(ids)))
        assert run.records.item_ids() == ids and run.records.index_of("item-x") is None
    got = compare_runs(base, head, margin=0.05, alpha=0.05)
    base_ids = {r["example_id"] for r in base_records}
    head_ids = {r["example_id"] for r in head_records}
    assert got.n_base_only == len(base_ids - head_ids) > 0
    assert got.n_head_only == len(head_ids - base_ids) > 0
    changed = {r["example_id"] for r in head_records if not r["item_hash"].startswith("h")}
    assert (
        got.n_changed
        == sum(
            1
            for i in base_ids & head_ids
            if next(r["item_hash"] for r in base_records if r["example_id"] == i)
            != next(r["item_hash"] for r in head_records if r["example_id"] == i)
        )
        > 0
        and changed
    )

    def through_rows(records: Any, rollouts: int, **kw: Any) -> dict[str, dict[str, float]]:
        return item_metrics(list(records), rollouts, **kw)

    monkeypatch.setattr(runs, "item_metrics", through_rows)
    expected = compare_runs(base, head, margin=0.05, alpha=0.05)
    assert got.comparable and got.n_paired > 200 and got.flips
    assert any(m.imputed for m in got.metrics)  # errored PR rollouts scored on the PASS side
    assert _same(asdict(got), asdict(expected))


def test_the_report_page_lists_from_the_held_runs_what_the_journals_give(
    tmp_path: Path,
) -> None:
    """The report step reads the runs a comparison holds (their tables; only the shown lines of
    the journals are parsed): the page is the one read from the journals alone, byte for byte,
    with the row caps binding (unchanged and changed rows left out)."""
    import gc

    import evalgate.report.html as html
    from evalgate.config.spec import GateSettings
    from evalgate.pipeline import gate_runs
    from evalgate.run.rundir import loaded_run

    base = load_run(_write(tmp_path / "base", _records(500, 5)))
    head = load_run(_write(tmp_path / "head", _records(500, 6, worse=0.1)))
    verdict = gate_runs(
        [head], {head.key: base}, GateSettings(margin=0.05), output_root=tmp_path / "out"
    )
    assert loaded_run(head.path) is head and loaded_run(base.path) is base

    def whole_journal(path: Path) -> Any:
        raise AssertionError(f"{path} parsed whole again while its run is held")

    with pytest.MonkeyPatch.context() as patch:  # the held runs' tables, not the journals
        patch.setattr(html, "iter_records", whole_journal)
        held = html.render_html(verdict, unchanged_rows=7)
    paths = head.path, base.path
    del base, head
    gc.collect()
    assert loaded_run(paths[0]) is None and loaded_run(paths[1]) is None
    read = html.render_html(verdict, unchanged_rows=7)
    assert held == read
    assert '"status":"errored"' in held and '"status":"regressed"' in held
    assert '"status":"unchanged","n":' in held  # the cap bound: rows left out, and said


def test_a_run_changed_since_it_was_read_is_read_again(tmp_path: Path) -> None:
    from evalgate.run.rundir import loaded_run

    run = load_run(_write(tmp_path, _records(20, 7)))
    assert loaded_run(run.path) is run
    with (run.path / "results.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(_records(21, 7)[-1]) + "\n")  # appended by a resume
    assert loaded_run(run.path) is None


def test_the_item_order_is_the_sorted_keys_order() -> None:
    """stats.item_order sorts a million ids' keys in one buffer (numpy): the order is the one
    sorting (key, id) pairs gives, for the legacy public order and a drawn key."""
    from evalgate.stats import OrderKey, item_order

    ids = [f"item-{i}" for i in range(3000)] + ["", "a\x00", "é", "a"]
    random.Random(0).shuffle(ids)
    for key in (OrderKey.legacy(0), OrderKey.legacy(7), OrderKey.draw()):
        assert item_order(ids, key) == sorted(ids, key=lambda i: (key.item(i), i))
    assert item_order([], OrderKey.legacy(0)) == []


def test_the_first_records_are_the_ones_a_scan_finds(tmp_path: Path) -> None:
    """The texts shown (flips, report rows) are read from where each item's first line starts:
    the records a scan of the whole journal finds, blank lines and errored first rollouts
    included."""
    records = _records(120, seed=9)
    for rec in records[::7]:  # some items' first rollout errored
        rec.update(error="timeout: no answer", reward=None, metrics={})
    path = _write(tmp_path, records)
    journal = path / "results.jsonl"
    lines = journal.read_text(encoding="utf-8").splitlines(keepends=True)
    journal.write_text("".join(line + ("\n" if i % 13 == 0 else "") for i, line in
                               enumerate(lines)), encoding="utf-8")  # fmt: skip
    run = load_run(path)
    wanted = {f"item-{i}" for i in range(0, 120, 3)} | {"not-there"}
    for answered in (False, True):
        expected: dict[str, dict[str, Any]] = {}
        for rec in run.full_records(wanted):
            if rec["example_id"] not in expected and (not answered or rec["error"] is None):
                expected[rec["example_id"]] = rec
        got = list(run.first_records(wanted, answered=answered))
        assert [i for i, _ in got] == list(expected)  # journal order
        assert all(_same(rec, expected[i]) for i, rec in got)


@pytest.mark.parametrize("codes", ["own", "ten to a code", "one shared"])
def test_the_join_of_long_runs_finds_each_id_its_own_item(
    monkeypatch: pytest.MonkeyPatch, codes: str
) -> None:
    """Blocks of 4,096 ids that both runs list alike are checked at once (compare/join.py);
    a block with one id moved, one missing or one new (also a new id on an old id's code,
    where the codes alone would pair it) is still joined id by id: every PR item meets the
    baseline item of its own id."""
    import evalgate.run.item_ids as item_ids
    from evalgate.compare.join import join_ids
    from evalgate.run.rollouts import RolloutTable

    if codes == "ten to a code":
        monkeypatch.setattr(item_ids, "_code", lambda item_id: hash(item_id[:-1]))
    elif codes == "one shared":
        monkeypatch.setattr(item_ids, "_code", lambda i: hash("q100" if i == "q10x" else i))
    base_ids = [f"q{i}" for i in range(10_000)]
    head_ids = list(base_ids)
    head_ids[5000], head_ids[5001] = head_ids[5001], head_ids[5000]  # block 1: two swapped
    head_ids[9000] = "new"  # the last, open block: one new id
    head_ids[100] = "q10x"  # block 0: a new id
    del head_ids[4096]  # the rest of block 1 onwards shifted by one
    tables = []
    for ids in (base_ids, head_ids):
        table = RolloutTable()
        for item_id in ids:
            table.append({"example_id": item_id, "error": None, "reward": 1.0, "metrics": {}})
        tables.append(table)
    at = join_ids(tables[0], tables[1])
    where = {item_id: i for i, item_id in enumerate(base_ids)}
    assert at.tolist() == [where.get(item_id, -1) for item_id in head_ids]

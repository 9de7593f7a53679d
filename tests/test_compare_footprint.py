"""What `evalgate compare` costs beyond its statistics (bench/compare_scale.py measures it at a
million rollouts): the modules it loads, and the readers' cheaper paths, each checked to give
what the plain computation gives."""

from __future__ import annotations

import json
import math
import random
from array import array
from pathlib import Path

import numpy as np
import pytest

from bench.gate_memory import write_run
from evalgate.run import item_ids
from evalgate.run.rollouts import RolloutTable
from evalgate.run.rundir import load_run
from evalgate.stats._scale import _plain_range
from tests.conftest import modules_loaded

# A compare reads saved runs: it starts no model server, sandbox or suite, and finds its MDE
# without scipy.optimize (~23 MiB resident, for one root; stats._brent).
_NEVER_IN_COMPARE = [
    "aiohttp",
    "scipy.optimize",
    "evalgate.pipeline",
    "evalgate.serve",
    "evalgate.sandbox",
    "evalgate.suites",
    "evalgate.run.session",
    "evalgate.run.engine",
]


def test_compare_loads_no_run_machinery_and_no_scipy_optimize(tmp_path: Path) -> None:
    base = write_run(tmp_path / "base", 300, 1, head=False)
    head = write_run(tmp_path / "head", 300, 1, head=True)
    args = ["compare", str(base), str(head), "--output", str(tmp_path / "out")]
    loaded, proc = modules_loaded(args, tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    verdict = json.loads((tmp_path / "out" / "verdict.json").read_text())
    (comparison,) = verdict["comparisons"]
    # The exact test's MDE ran (its root found by stats._brent): a finite drop.
    assert comparison["metrics"][0]["mde"] > 0.0
    assert not loaded & set(_NEVER_IN_COMPARE)
    assert "evalgate.stats._brent" in loaded


def _first_rows_by_scan(table: RolloutTable, answered: bool) -> list[int]:
    """Per item, its first row (``answered``: without a recorded error), −1 where none."""
    first = [-1] * table.n_items
    for row, rec in enumerate(table):
        index = table.index_of(rec["example_id"])
        assert index is not None
        recorded_error = row in table._errors and row not in table._unusable
        if first[index] < 0 and not (answered and recorded_error):
            first[index] = row
    return first


@pytest.mark.parametrize("seed", range(6))
def test_first_rows_are_each_items_first_row(seed: int) -> None:
    rng = random.Random(seed)
    records = []
    for i in range(rng.randint(1, 40)):
        for r in range(rng.randint(1, 4)):
            error = "boom" if rng.random() < 0.25 * (seed % 3) else None
            reward = None if error else rng.choice([0.0, 1.0, math.nan])  # NaN: unusable
            records.append(
                {"example_id": f"i{i}", "rollout": r, "reward": reward, "metrics": {},
                 "error": error}
            )  # fmt: skip
    if seed % 2:
        rng.shuffle(records)  # finishing order: an item's rollouts apart
    table = RolloutTable()
    table.extend(records)
    for answered in (False, True):
        got = table.first_rows(answered=answered)
        assert got.dtype == np.int64
        assert got.tolist() == _first_rows_by_scan(table, answered)


def test_item_offsets_widen_past_what_their_column_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A journal's item offsets are 4 bytes until one does not fit (past 4 GiB), then 8: here a
    1-byte column stands in for the 4-byte one, so a small journal crosses its limit."""
    run = write_run(tmp_path, 40, 2, head=False)
    init = RolloutTable.__init__

    def narrow(self: RolloutTable) -> None:
        init(self)
        self.item_offsets = array("B")

    monkeypatch.setattr(RolloutTable, "__init__", narrow)
    table = load_run(run).records
    assert table.item_offsets.typecode == "q"
    lines = (run / "results.jsonl").read_bytes().splitlines(keepends=True)
    starts = [sum(map(len, lines[: 2 * i])) for i in range(40)]  # 2 rollouts an item, in order
    assert table.item_offsets.tolist() == starts
    # Texts are read back from those offsets: each item's own first record.
    got = dict(load_run(run).first_records(["item-0000000", "item-0000039"]))
    assert got["item-0000039"]["example_id"] == "item-0000039"
    assert got["item-0000000"]["rollout"] == 0


@pytest.mark.parametrize(
    "values",
    [[], [0.5], [1.0, 0.0, 3.0], [0.0, -0.0], [-0.0, 0.0], [2.0, math.nan, 1.0],
     [math.nan, 1.0], [1.5, 2.0], [3.0, 2.0, 2.0]],
)  # fmt: skip
def test_a_scale_streams_its_values_as_min_and_max_of_a_list_read_them(
    values: list[float],
) -> None:
    lo, hi, integral = _plain_range(iter(values))
    # repr: NaN equals nothing, and the sign of a zero (which of 0.0 and -0.0 comes first) shows
    assert repr(lo) == repr(min(values, default=0.0))
    assert repr(hi) == repr(max(values, default=1.0))
    assert integral == all(v >= 0.0 and v == math.floor(v) for v in values)


@pytest.mark.parametrize(("n", "codes"), [(40_000, None), (600, 0x7)])
def test_the_id_index_keeps_a_code_per_item_and_finds_every_id(
    n: int, codes: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An id's code is kept per item (not per slot): every id is found again at its index,
    through the numpy re-placement past 2^15 items and through ids that share a code."""
    if codes is not None:  # a few codes for every id: long probes, ids compared
        monkeypatch.setattr(item_ids, "_code", lambda s: hash(s) & codes)
    rng = random.Random(n)
    names = [f"item-{rng.randrange(10**9)}" for _ in range(n)]
    ids, first = item_ids.ItemIds(), {}
    for name in names:
        assert ids.add(name) == first.setdefault(name, len(first))
    assert [ids.find(name) for name in names] == [first[name] for name in names]
    assert ids.find("item-absent") == -1
    assert list(ids) == list(first)
    assert ids.codes().tolist() == [item_ids._code(name) for name in first]


@pytest.mark.parametrize(("n", "codes"), [(40_000, None), (3_000, 0x7)])
def test_ids_added_a_batch_at_a_time_are_the_ids_added_one_by_one(
    n: int, codes: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A journal is read a batch of lines at a time: looking a batch of ids up (repeats, ids
    already there, ids sharing a code) and adding its new ones gives every id the index, block
    and code that adding each in turn gives, and every id is found again."""
    if codes is not None:  # a few codes for every id: long probes, ids compared
        monkeypatch.setattr(item_ids, "_code", lambda s: hash(s) & codes)
    rng = random.Random(n)
    names = [f"item-{rng.randrange(n // 2)}" for _ in range(n)]  # about half repeats
    one, batched, first = item_ids.ItemIds(), item_ids.ItemIds(), {}
    for at in range(0, n, 257):
        batch = names[at : at + 257]
        want = [one.add(name) for name in batch]
        looked = batched.lookup(batch)
        assert looked.found.tolist() == want
        new = [batch[p] for p in looked.new]
        assert new == [x for x in dict.fromkeys(batch) if x not in first]
        # Where the probes ended when the table is as looked in (else placed afresh).
        batched.extend(new, looked if at % 2 else None)
        first.update(dict.fromkeys(batch))
        assert len(batched) == len(one)
    assert list(batched) == list(one)
    assert batched.codes().tolist() == one.codes().tolist()
    assert batched._blocks == one._blocks
    assert [batched.find(name) for name in names] == [one.find(name) for name in names]
    assert batched.find("item-absent") == -1


def test_the_ids_at_an_index_are_the_tables_in_any_order() -> None:
    """The ids the run's order is drawn from: an ascending index is read block by block of ids,
    any other id by id; both give the table's ids."""
    from evalgate.compare.runs import _IdsAt

    table = RolloutTable()
    n = 3 * item_ids.BLOCK + 5  # past a few blocks of ids, the last one still open
    table.extend(
        {"example_id": f"id{i * 7 % n}-{i}", "rollout": 0, "reward": 1.0, "metrics": {},
         "error": None}
        for i in range(n)
    )  # fmt: skip
    rng = np.random.default_rng(0)
    for index in (
        np.arange(n),
        np.sort(rng.choice(n, 3000, replace=False)),
        rng.permutation(n)[:500],
        np.array([item_ids.BLOCK - 1, item_ids.BLOCK, item_ids.BLOCK, n - 1]),
        np.zeros(0, dtype=np.intp),
    ):
        assert list(_IdsAt(table, index)) == [table.item_id(int(i)) for i in index]


def test_the_reader_keeps_each_items_group_and_hash_as_its_first_record_gave(
    tmp_path: Path,
) -> None:
    """The common record's new item is added inline (the engine's 16 lowercase hex digits, no
    group); any other group or hash the general way: each item reads back as written."""
    run = write_run(tmp_path, 6, 2, head=False)
    journal = run / "results.jsonl"
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    odd = {1: "ABCDEF0123456789", 2: "ab cd ef 01 23 4", 3: None, 4: "not-hex-at-all!!"}
    for rec in records:
        i = int(rec["example_id"].rsplit("-", 1)[1])
        if i in odd:
            rec["item_hash"] = odd[i]
        if i == 5:
            rec["group"] = "g5"
    journal.write_text("".join(json.dumps(rec) + "\n" for rec in records))
    table = load_run(run).records
    want = {r["example_id"]: (r["example_id"], r["group"], r["item_hash"]) for r in records}
    assert table.items() == list(want.values())

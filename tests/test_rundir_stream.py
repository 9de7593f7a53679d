"""load_run reads a journal line by line into columns (bench/gate_memory.py): what it refuses,
the lines it names and what is summarised and compared from it stay what they were when every
record was held as a dict."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from evalgate.compare.paired import compare_runs, summary_of
from evalgate.errors import UsageError
from evalgate.run import records as records_module
from evalgate.run.rollouts import RolloutTable
from evalgate.run.rundir import RunDir, load_run
from evalgate.run.summary import summarize
from tests.conftest import python_child


def _rec(i: int, r: int, reward: float | None = 1.0, **extra: Any) -> dict[str, Any]:
    return {
        "example_id": f"q{i}",
        "item_hash": f"h{i}",
        "rollout": r,
        "group": f"g{i % 3}" if i % 2 else None,
        "prompt": [{"role": "user", "content": f"question {i}"}],
        "completion": f"answer {i}.{r}",
        "answer": "a",
        "reward": reward,
        "metrics": {} if reward is None else {"accuracy": reward},
        "usage": {"prompt_tokens": 10 + i, "completion_tokens": r},
        "timing": {"total_ms": 1.0},
        "error": None,
        **extra,
    }


def _run(root: Path, name: str, lines: list[str], *, meta: bool = True) -> Path:
    run = RunDir.create(root / name, "b", "org/m", "20260101-000000-000abc")
    run.write_config(
        {
            "model": {"name": "m"},
            "benchmark": {"name": "b", "eval": {"rollouts": 2}},
            "gate": {},
            "fingerprint": {"measurement": {"d": 1}, "subject": {"m": 1}},
        }
    )
    run.results_path.write_text("".join(lines), encoding="utf-8")
    if meta:
        run.write_metadata({"complete": True, "rollouts_per_example": 2})
    return run.path


def _lines(records: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(r) + "\n" for r in records]


def _records(n: int = 6, *, worse: bool = False) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        for r in range(2):
            if i == 4 and r == 1:
                out.append(_rec(i, r, None, error="timeout: no answer", completion=None))
            elif i == 5 and r == 0:
                out.append(_rec(i, r, float("nan")))  # an unusable score: an error of its kind
            else:
                out.append(_rec(i, r, 0.0 if worse and i < 2 else float((i + r) % 3 != 0)))
    return out


def test_a_journal_read_back_in_a_fresh_process_loads_numpy_only_when_long(
    tmp_path: Path,
) -> None:
    """Reading in batches needs numpy: a journal shorter than records._BATCH_FROM lines is read
    a line at a time without loading it (a small run's start-up), a longer one batches."""
    script = (
        "import sys; from pathlib import Path; from evalgate.run.rundir import load_run; "
        "run = load_run(Path(sys.argv[1])); print(run.records.n_items, 'numpy' in sys.modules)"
    )
    short = _run(tmp_path, "short", _lines(_long_records(600)))
    long = _run(tmp_path, "long", _lines(_long_records(1100)))
    assert python_child(script, str(short)).stdout.split() == ["600", "False"]
    assert python_child(script, str(long)).stdout.split() == ["1100", "True"]


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda ls: [*ls, ls[2]], "results.jsonl:13: duplicate record of item 'q1' rollout 0 "
         "(first on line 3;"),
        (lambda ls: [ls[0], "\n", "  \n", *ls[1:], ls[0]], "results.jsonl:15: duplicate record "
         "of item 'q0' rollout 0 (first on line 1;"),  # blank lines keep their numbers
        (lambda ls: [*ls, json.dumps({**_rec(0, 5), "item_hash": "other"}) + "\n"],
         "results.jsonl:13: item_hash: item 'q0' has other content than on line 1"),
        (lambda ls: [*ls[:3], "{not json\n", *ls[3:]], "results.jsonl:4: not JSON ("),
        (lambda ls: [*ls[:-1], ls[-1][:20]], "results.jsonl:12: cut off mid-line"),
        (lambda ls: [*ls, "[1, 2]\n"], "results.jsonl:13: not a JSON object (a list)"),
        (lambda ls: [*ls, json.dumps({"rollout": 0}) + "\n"], "results.jsonl:13: example_id"),
        (lambda ls: [*ls, json.dumps(_rec(9, -1)) + "\n"], "results.jsonl:13: rollout"),
    ],
)  # fmt: skip
def test_a_damaged_journal_names_the_same_line_as_before(
    tmp_path: Path, damage: Any, expected: str
) -> None:
    path = _run(tmp_path, "r", damage(_lines(_records())))
    with pytest.raises(UsageError) as err:
        load_run(path)
    assert expected in str(err.value), str(err.value)
    assert len(str(err.value).splitlines()) == 1


def _long_records(n: int = 700) -> list[dict[str, Any]]:
    """n items x 2 rollouts as the engine writes them (its 16-digit hashes, no group): the
    reader checks and adds these a batch of lines at a time (records._BATCH). Items 0-99's
    second rollouts come last (a resumed run's order): their items are batches back."""

    def rec(i: int, r: int) -> dict[str, Any]:
        return {**_rec(i, r, float((i * 7 + r) % 3 == 0)), "item_hash": f"{i * 977:016x}",
                "group": None}  # fmt: skip

    first = [rec(i, r) for i in range(n) for r in range(2) if i >= 100 or r == 0]
    return first + [rec(i, 1) for i in range(100)]


def test_a_long_journal_read_a_batch_at_a_time_loads_as_it_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of common records are checked and added at once; a batch holding any other
    record (an error, a NaN, an int or no reward, a group, a hand-made hash, a cost) is read a
    line at a time: the table is the one appending each record builds, item offsets included."""
    records = _long_records(1000)  # 2,000 lines: the batches of lines 1-512 and 1537-2000 plain
    for at in (1030, 1100, 1201, 1399, 1535):  # the third batch has one of each odd record
        records[at] = {**records[at], "completion": "  " if at % 2 else None}
    records[1050] = {**records[1050], "reward": None, "metrics": {}, "error": "timeout"}
    records[1151] = {**records[1151], "reward": float("nan")}
    records[1220] = {**records[1220], "reward": 1, "metrics": {"accuracy": 1}}
    records[1270] = {**records[1270], "reward": None}
    records[1310] = {**records[1310], "group": "g"}  # a first rollout: its item's group
    for at in (1340, 1341):  # both rollouts of an item
        records[at] = {**records[at], "item_hash": "hand-made"}
    records[1440] = {**records[1440], "cost_usd": 0.5}
    records[1480] = {**records[1480], "completion": ""}
    lines = _lines(records)
    expected = RolloutTable()
    for rec in records:
        expected.add_checked(json.loads(json.dumps(rec)))
    import numpy  # noqa: F401  (loaded: the reader batches from the second batch on)

    batches = []
    add_batch = RolloutTable.add_batch
    monkeypatch.setattr(
        RolloutTable,
        "add_batch",
        lambda self, b: (batches.append(len(b.index)), add_batch(self, b)),
    )
    run = load_run(_run(tmp_path, "r", lines))
    size = records_module._BATCH  # the first batch makes the columns: read line by line
    assert batches == [size, len(lines) - 3 * size]
    assert json.dumps(list(run.records)) == json.dumps(list(expected))
    assert run.records.items() == expected.items()
    assert run.records.tally() == expected.tally()
    got, want = run.records.item_metrics(2, 1.0), expected.item_metrics(2, 1.0)
    assert {k: dict(v) for k, v in got.items()} == {k: dict(v) for k, v in want.items()}
    offsets, at, seen = [], 0, set()
    for rec, line in zip(records, lines, strict=True):
        if rec["example_id"] not in seen:
            seen.add(rec["example_id"])
            offsets.append(at)
        at += len(line.encode())
    assert run.records.item_offsets.tolist() == offsets


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda ls: [*ls, ls[2]],
         ":1401: duplicate record of item 'q2' rollout 0 (first on line 3;"),
        (lambda ls: [*ls[:1000], ls[999], *ls[1000:]],
         ":1001: duplicate record of item 'q549' rollout 1 (first on line 1000;"),
        (lambda ls: [*ls[:1300], ls[1300], *ls[1300:]],
         ":1302: duplicate record of item 'q0' rollout 1 (first on line 1301;"),
        (lambda ls: [*ls[:901], ls[901].replace("q500", "q10"), *ls[902:]],
         ":902: item_hash: item 'q10' has other content than on line 11"),
        (lambda ls: [*ls[:700], ls[700].replace('"rollout": 0', '"rollout": 2'), *ls[701:]],
         ":701: rollout: 2 is out of range"),
        (lambda ls: [*ls[:700], ls[700].replace('"rollout": 0', '"rollout": 64'), *ls[701:]],
         ":701: rollout: 64 is out of range"),
        (lambda ls: [*ls[:800], ls[800].replace('"reward": 1.0', '"reward": "1"'), *ls[801:]],
         ":801: reward"),
        (lambda ls: [*ls[:-1], ls[-1][:20]], ":1400: cut off mid-line"),
    ],
)  # fmt: skip
def test_a_long_journal_damaged_past_its_first_batch_names_the_line(
    tmp_path: Path, damage: Any, expected: str
) -> None:
    path = _run(tmp_path, "r", damage(_lines(_long_records())))
    with pytest.raises(UsageError) as err:
        load_run(path)
    assert f"results.jsonl{expected}" in str(err.value), str(err.value)
    assert len(str(err.value).splitlines()) == 1


def test_a_journal_that_is_not_utf8_is_refused_in_one_line(tmp_path: Path) -> None:
    path = _run(tmp_path, "r", _lines(_records()))
    with (path / "results.jsonl").open("ab") as fh:
        fh.write(b'{"example_id": "\xff"}\n')
    line = len(_lines(_records())) + 1  # the line is named, as for every other damage
    with pytest.raises(UsageError, match=rf"results.jsonl:{line}: not UTF-8 text \(invalid start"):
        load_run(path)


def test_the_loaded_run_summarises_as_its_records_do(tmp_path: Path) -> None:
    records = _records()
    run = load_run(_run(tmp_path, "r", _lines(records)))
    parsed = [json.loads(line) for line in _lines(records)]
    expected = summarize(
        parsed,
        benchmark="b",
        model="m",
        model_id="",
        run_dir=str(run.path),
        n_items=6,
        rollouts=2,
        time_s=0.0,
    )
    got = summary_of(run)
    assert asdict(got) == asdict(expected) | {"metrics": asdict(got)["metrics"]}
    for name, est in expected.metrics.items():  # NaN-safe comparison of the estimates
        for key, value in asdict(est).items():
            other = asdict(got.metrics[name])[key]
            assert other == value or (math.isnan(other) and math.isnan(value)), (name, key)
    assert got.error_kinds == {"timeout": 1, "non-finite score": 1}
    assert got.n_items == 6 and got.n_rollouts == 12 and got.usage["prompt_tokens"] == 12 * 10 + 30
    # The texts nothing summarises are read back from the journal, as written.
    assert [r["completion"] for r in run.full_records({"q3"})] == ["answer 3.0", "answer 3.1"]


def test_flips_show_the_texts_of_the_first_scored_rollout(tmp_path: Path) -> None:
    base = load_run(_run(tmp_path, "base", _lines(_records())))
    head = load_run(_run(tmp_path, "head", _lines(_records(worse=True))))
    comp = compare_runs(base, head, margin=0.05, alpha=0.05)
    assert comp.comparable and comp.n_paired == 6
    # Largest change first: q1 went from 1.0 to 0.0, q0 from 0.5 to 0.0.
    assert [(f.item_id, f.base_score) for f in comp.flips] == [("q1", 1.0), ("q0", 0.5)]
    flip = comp.flips[0]
    assert (flip.direction, flip.base_score, flip.head_score) == ("regressed", 1.0, 0.0)
    assert (flip.prompt, flip.base_completion, flip.head_completion) == (
        "question 1",
        "answer 1.0",
        "answer 1.0",
    )


def test_a_record_without_the_summary_keys_still_loads(tmp_path: Path) -> None:
    """An older or hand-made journal (only the keys load_run checks) is listed and pushed."""
    lines = [json.dumps({"example_id": "q0", "rollout": r}) + "\n" for r in range(2)]
    run = load_run(_run(tmp_path, "r", lines))
    assert run.rollouts == 2 and [r["rollout"] for r in run.full_records()] == [0, 1]


def test_records_of_every_shape_load_as_they_append(tmp_path: Path) -> None:
    """The reader's one-call path for the common record and its general path build the same
    table as appending the records one by one: odd shapes in between (an int reward, a metric
    or a token count first met mid-way or missing, counts past 32 bits or given as floats, a
    cost, a judge, a fallback, an error) change nothing that is read back."""
    records = _records()
    records[3] = {**records[3], "reward": 1, "metrics": {"accuracy": 1}}
    records[4] = {**records[4], "metrics": {"accuracy": 0.0, "style": 0.5}}
    records[5] = {**records[5], "usage": {"prompt_tokens": 2**40}}
    records[6] = {**records[6], "usage": {"prompt_tokens": 3.0, "completion_tokens": 2, "x": 1}}
    records[7] = {**records[7], "cost_usd": 0.25, "judge": {"usage": {"t": 1}, "why": "w"}}
    records[10] = {**records[10], "served_by": ["other"], "completion": "   "}
    records[2], records[8] = {**records[2], "completion": ""}, {**records[8], "completion": "\n "}
    expected = RolloutTable()
    for rec in records:
        expected.add_checked(json.loads(json.dumps(rec)))
    run = load_run(_run(tmp_path, "r", _lines(records)))
    assert json.dumps(list(run.records)) == json.dumps(list(expected))
    assert run.records.tally() == expected.tally()
    got, want = run.records.item_metrics(2, 1.0), expected.item_metrics(2, 1.0)
    assert {k: dict(v) for k, v in got.items()} == {k: dict(v) for k, v in want.items()}

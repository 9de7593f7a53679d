"""One definition of the exam: ``config.split.FIELDS`` decides what a run's fingerprint records
as its measurement, and the docs' table of the candidate and the exam is generated from it.

Before, ``run/fingerprint.py`` listed the measured fields a second time, by hand: a field could be
the exam for the PR-mode merge and missing from the measurement (or the other way round) without
any test noticing. Baselines stored before must stay comparable: their measurements are pinned.
"""

from __future__ import annotations

import hashlib
import json
import textwrap
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from evalgate.config import split
from evalgate.config.spec import Benchmark
from evalgate.run.fingerprint import measurement

ROOT = Path(__file__).resolve().parent.parent
_GRADER = {"model": {"name": "j", "backend": "openai", "base_url": "http://127.0.0.1:9/v1",
                     "model": "org/j"}}  # fmt: skip
_JUDGE = {"type": "judge", "labels": "labels.jsonl", "mode": "reference"}

# One benchmark of each kind, with the optional measured fields both set and not.
BENCHES: dict[str, Benchmark] = {
    name: TypeAdapter[Benchmark](Benchmark).validate_python(entry)
    for name, entry in {
        "arith": {"name": "a", "kind": "arith", "size": 5, "eval": {"rollouts": 2}},
        "jsonl-judge": {"name": "j", "kind": "jsonl", "path": "/x/d.jsonl", "scorer": _JUDGE},
        "hf": {"name": "h", "kind": "hf", "dataset": "org/ds", "scorer": {"type": "numeric"}},
        "agent": {"name": "g", "kind": "agent", "tasks": "/x/tasks",
                  "sandbox": {"timeout_s": 120}, "agent": {"max_turns": 5}},
        "humaneval": {"name": "he", "kind": "humaneval"},
        "verifiers": {"name": "v", "kind": "verifiers", "env_id": "gsm8k", "env_args": {"n": 1}},
        "verifiers-judge": {"name": "v", "kind": "verifiers", "env_id": "gsm8k",
                            "judge": _GRADER},
        "inspect": {"name": "i", "kind": "inspect", "task": "/abs/tasks/t.py@t",
                    "task_args": {"k": 1}},
        "inspect-set": {"name": "i", "kind": "inspect", "task": "inspect_evals/gsm8k",
                        "score_key": "u", "grader": {}},
    }.items()
}  # fmt: skip

# The measurements evalgate recorded for BENCHES before FIELDS drove them (sha256 of the sorted
# JSON, the installed verifiers version left out): a stored baseline's must stay equal, or every
# baseline stored before becomes "not comparable".
PINNED = {
    "agent": "cf081e166b54db6f",
    "arith": "213c5bdc36fd4939",
    "hf": "61a6b61baa53415f",
    "humaneval": "3db940b1475fff4d",
    "inspect": "795d3cc12d9d8424",
    "inspect-set": "cec8d8c51139d81f",
    "jsonl-judge": "8efbdc6f9fee7830",
    "verifiers": "b4bc3878ed090364",
    "verifiers-judge": "0da36457f4693046",
}


def _pin(measured: dict[str, object]) -> str:
    data = json.loads(json.dumps(measured))
    if isinstance(env := data.get("environment"), dict):
        env["verifiers"] = "<installed>"  # this machine's verifiers, not the definition's
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@pytest.mark.parametrize("name", sorted(BENCHES))
def test_measurements_recorded_before_stay_the_same(name: str) -> None:
    assert _pin(measurement(BENCHES[name])) == PINNED[name], measurement(BENCHES[name])


def test_the_measurement_is_what_fields_marks_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """Marking a field measured in FIELDS (and nowhere else) records it; marking it a plain
    exam field drops it: the fingerprint has no list of its own."""
    bench = BENCHES["arith"]
    monkeypatch.setitem(
        split.FIELDS, "benchmarks[].eval.max_error_rate", split.Measured("eval.max_error_rate")
    )
    assert measurement(bench)["eval"] == {"max_error_rate": bench.eval.max_error_rate}
    monkeypatch.setitem(split.FIELDS, "benchmarks[].eval.rollouts", "exam")
    assert "rollouts" not in measurement(bench)


def test_what_fields_classifies_otherwise_is_left_out_of_a_measured_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under a measured section, a field classified otherwise (a judge's labelled set: the exam,
    but it decides no score) is not recorded; so would a candidate field be."""
    scorer = measurement(BENCHES["jsonl-judge"])["scorer"]
    assert isinstance(scorer, dict) and "labels" not in scorer and scorer["type"] == "judge"
    sandbox = measurement(BENCHES["agent"])["sandbox"]
    assert isinstance(sandbox, dict) and "timeout_s" in sandbox
    monkeypatch.setitem(split.FIELDS, "benchmarks[].sandbox.timeout_s", "candidate")
    sandbox = measurement(BENCHES["agent"])["sandbox"]
    assert isinstance(sandbox, dict) and "timeout_s" not in sandbox


def _paths(value: object, prefix: str = "") -> list[str]:
    if not isinstance(value, dict):
        return [prefix]
    return [p for k, v in value.items() for p in [f"{prefix}{k}", *_paths(v, f"{prefix}{k}.")]]


def test_every_part_of_a_measurement_is_declared_in_split() -> None:
    """Each value a fingerprint records is an exam field FIELDS marks measured, or a derived
    value split.DERIVED declares (evalgate's scoring version, ...)."""
    declared = {m.at for m in split.FIELDS.values() if isinstance(m, split.Measured)}
    declared |= split.DERIVED.keys()
    for name, bench in BENCHES.items():
        for path in _paths(measurement(bench)):
            parts = path.split(".")
            assert any(".".join(parts[:cut]) in declared for cut in range(1, len(parts) + 1)) or (
                any(d.startswith(path + ".") for d in declared)
            ), (name, path)
    for path, entry in split.FIELDS.items():
        if isinstance(entry, split.Measured):
            assert split.field_role(path) == "exam", path


def test_every_derived_value_is_computed() -> None:
    from evalgate.run.fingerprint import _DERIVE

    assert _DERIVE.keys() == split.DERIVED.keys()


def test_the_docs_table_is_generated_from_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    page = ROOT / "docs" / "threat-model.md"
    text = page.read_text(encoding="utf-8")
    assert split.TABLE_BEGIN in text and split.TABLE_END in text, f"{page} lost its table markers"
    start = text.rindex("\n", 0, text.index(split.TABLE_BEGIN)) + 1  # the table is in a list item
    shown = textwrap.dedent(text[start : text.index(split.TABLE_END) + len(split.TABLE_END)])
    assert shown == split.docs_table(), (
        "docs/threat-model.md's candidate/exam table is stale: paste "
        "`python -m evalgate.config.split` into it"
    )
    monkeypatch.setitem(split.FIELDS, "benchmarks[].sandbox.pids", "candidate")
    assert split.docs_table() != shown  # a reclassified field shows in the table

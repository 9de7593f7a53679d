"""Item sources: arith is deterministic, files report bad rows with their line, hf loads offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalgate.config.load import load_config
from evalgate.errors import ConfigError
from evalgate.suites.datasets import arith_items, load_items
from evalgate.suites.qa import QASuite
from tests.conftest import write_config


def _bench(tmp_path: Path, entry: str):
    path = write_config(tmp_path, f"benchmarks:\n  - {entry}\n")
    return load_config(path).benchmarks[0]


def test_arith_is_a_pure_function_of_its_seed() -> None:
    a = arith_items(50, 3, 20, ["+", "-", "*"])
    assert a == arith_items(50, 3, 20, ["+", "-", "*"])
    assert a != arith_items(50, 4, 20, ["+", "-", "*"])
    for item in a:
        x, op, y = item.prompt.split()
        assert str(eval(f"{x}{op}{y}")) == item.answer
    assert len({i.id for i in a}) == 50


def _drawn_by_randint(
    size: int, seed: int, max_operand: int, ops: list[str]
) -> list[tuple[str, str]]:
    """arith's items as randint and choice draw them (the definition baselines were made with)."""
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(size):
        a, b = rng.randint(0, max_operand), rng.randint(0, max_operand)
        op = rng.choice(ops)
        out.append((f"{a} {op} {b}", str({"+": a + b, "-": a - b, "*": a * b}[op])))
    return out


@pytest.mark.parametrize(
    ("seed", "max_operand", "ops"),
    [(0, 20, ["+", "-"]), (7, 1, ["*"]), (3, 1000, ["+", "-", "*"]), (11, 2**40, ["-", "+"])],
)
def test_arith_draws_the_items_randint_and_choice_draw(
    seed: int, max_operand: int, ops: list[str]
) -> None:
    """The generator draws a, b and then the operator, each by randint and choice, in that order:
    the items baselines were made with, so a baseline stays comparable."""
    items = arith_items(300, seed, max_operand, ops)
    assert [(i.prompt, i.answer) for i in items] == _drawn_by_randint(300, seed, max_operand, ops)
    assert [i.id for i in items] == [f"arith-{seed}-{n}" for n in range(300)]


def test_jsonl_with_ids_and_groups(tmp_path: Path) -> None:
    rows = [{"id": f"q{i}", "question": f"Q{i}", "gold": str(i), "topic": "t"} for i in range(3)]
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    spec = _bench(
        tmp_path,
        "{name: d, kind: jsonl, path: d.jsonl, prompt_field: question, answer_field: gold, "
        "group_field: topic}",
    )
    items = load_items(spec)
    assert [i.id for i in items] == ["q0", "q1", "q2"]
    assert items[1].prompt == "Q1" and items[1].answer == "1" and items[1].group == "t"


def test_csv_without_ids_uses_row_index(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text('prompt,answer\n1+1,2\n"a, b",c\n')
    items = load_items(_bench(tmp_path, "{name: d, kind: jsonl, path: d.csv}"))
    assert [(i.id, i.prompt, i.answer) for i in items] == [("0", "1+1", "2"), ("1", "a, b", "c")]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"prompt": "a", "answer": "b"}\n{"prompt": "c"\n', "d.jsonl:2: invalid JSON"),
        (
            '{"prompt": "a", "answer": "b"}\n\n{"prompt": "c"}\n',
            "d.jsonl:3: missing field 'answer'",
        ),
        ('["prompt", "answer"]\n', "d.jsonl:1: each line must be a JSON object"),
        (
            '{"id": 1, "prompt": "a", "answer": "b"}\n{"id": 1, "prompt": "c", "answer": "d"}\n',
            "duplicate item id '1'",
        ),
        ("", "the dataset has no rows"),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "d.jsonl").write_text(content)
    with pytest.raises(ConfigError, match=r"d\.jsonl") as info:
        load_items(_bench(tmp_path, "{name: d, kind: jsonl, path: d.jsonl}"))
    assert message in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="dataset file not found"):
        load_items(_bench(tmp_path, "{name: d, kind: jsonl, path: nope.jsonl}"))


def test_template_error_is_caught_before_any_model_call(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text('{"prompt": "a", "answer": "b"}\n')
    spec = _bench(
        tmp_path, "{name: d, kind: jsonl, path: d.jsonl, prompt_template: '{{ question }}'}"
    )
    with pytest.raises(ConfigError, match="'question' is undefined") as info:
        QASuite.from_spec(spec)
    assert info.value.field == "prompt_template"  # validate points at the evals.yaml line
    assert "names the template can use: answer, id, prompt" in str(info.value)


def test_csv_with_bom_and_crlf_keeps_its_id_column(tmp_path: Path) -> None:
    """Excel writes a BOM: without utf-8-sig the first column is named '\ufeffid', the ids
    become row numbers and every baseline reads as not comparable."""
    (tmp_path / "d.csv").write_bytes(b"\xef\xbb\xbfid,prompt,answer\r\nq1,a,b\r\nq2,c,d\r\n")
    items = load_items(_bench(tmp_path, "{name: d, kind: jsonl, path: d.csv}"))
    assert [(i.id, i.prompt, i.answer) for i in items] == [("q1", "a", "b"), ("q2", "c", "d")]


def test_jsonl_with_bom_and_crlf(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_bytes(
        b'\xef\xbb\xbf{"id": "x", "prompt": "a", "answer": 1}\r\n\r\n{"id": "y", "prompt": "b", '
        b'"answer": 2}\r\n'
    )
    items = load_items(_bench(tmp_path, "{name: d, kind: jsonl, path: d.jsonl}"))
    assert [(i.id, i.answer) for i in items] == [("x", "1"), ("y", "2")]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"prompt": "a", "answer": null}\n', "d.jsonl:1: field 'answer' is null"),
        (b'{"prompt": ["a"], "answer": "b"}\n', "field 'prompt' must be text or a number"),
        (
            b'{"prompt": "a", "answer": "b"}\n{"prompt": "\xe9", "answer": "b"}\n',
            "d.jsonl:2: not UTF-8",
        ),
    ],
)
def test_bad_values_name_the_line(tmp_path: Path, content: bytes, message: str) -> None:
    (tmp_path / "d.jsonl").write_bytes(content)
    with pytest.raises(ConfigError) as info:
        load_items(_bench(tmp_path, "{name: d, kind: jsonl, path: d.jsonl}"))
    assert message in str(info.value)
    assert "have:" not in str(info.value)  # a null answer is not a missing column


def test_a_directory_is_not_a_dataset(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(ConfigError, match="is a directory"):
        load_items(_bench(tmp_path, "{name: d, kind: jsonl, path: d}"))


def test_more_items_asked_for_than_exist_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text('{"prompt": "a", "answer": "b"}\n')
    spec = _bench(tmp_path, "{name: d, kind: jsonl, path: d.jsonl, eval: {num_examples: 5}}")
    with pytest.raises(ConfigError, match="5 items asked for, but benchmark 'd' has 1") as info:
        QASuite.from_spec(spec)
    assert info.value.field == "eval.num_examples"


def test_hf_loader_on_a_local_file_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    rows = [{"question": f"What is {i} + 1?", "answer": f"step\n#### {i + 1}"} for i in range(5)]
    data = tmp_path / "gsm.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows))
    spec = _bench(
        tmp_path,
        f"{{name: gsm, kind: hf, dataset: json, data_files: '{data}', split: train, "
        "prompt_field: question, id_field: null, scorer: {type: numeric}}",
    )
    suite = QASuite.from_spec(spec)
    assert len(suite.items) == 5
    assert suite.items[2].answer.endswith("#### 3")
    assert suite.scorer("so 3", suite.items[2].answer) == 1.0


@pytest.mark.slow
def test_hf_loader_error_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    spec = _bench(tmp_path, "{name: gsm, kind: hf, dataset: no-such-org/no-such-dataset}")
    with pytest.raises(
        Exception, match="could not load dataset 'no-such-org/no-such-dataset'"
    ) as info:
        load_items(spec)
    assert "\n" not in str(info.value)

"""Item sources for QA benchmarks: generated arithmetic, local JSONL/CSV, Hugging Face datasets."""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalgate.errors import ConfigError, InfraError
from evalgate.suites.base import Item

__all__ = ["arith_items", "file_items", "hf_items", "load_items"]


def arith_items(size: int, seed: int, max_operand: int, ops: list[str]) -> list[Item]:
    """A pure function of its arguments: the same seed gives the same items on every machine."""
    rng = random.Random(seed)
    items = []
    for i in range(size):
        a, b = rng.randint(0, max_operand), rng.randint(0, max_operand)
        op = rng.choice(ops)
        value = {"+": a + b, "-": a - b, "*": a * b}[op]
        expr = f"{a} {op} {b}"
        items.append(Item(id=f"arith-{seed}-{i}", prompt=expr, answer=str(value)))
    return items


def _rows_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}:{lineno}: invalid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise ConfigError(f"{path}:{lineno}: each line must be a JSON object")
            yield lineno, row


def _rows_csv(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        for row in reader:
            yield reader.line_num, row


def _to_item(row: dict[str, Any], index: int, where: str, spec: Any) -> Item:
    for need in (spec.prompt_field, spec.answer_field):
        if row.get(need) is None:
            have = ", ".join(sorted(map(str, row))) or "none"
            raise ConfigError(
                f"{where}: missing field {need!r} (have: {have}); set prompt_field/answer_field"
            )
    item_id = row.get(spec.id_field) if spec.id_field else None
    group = row.get(spec.group_field) if spec.group_field else None
    return Item(
        id=str(item_id) if item_id is not None else str(index),
        prompt=str(row[spec.prompt_field]),
        answer=str(row[spec.answer_field]),
        group=str(group) if group is not None else None,
        fields=row,
    )


def file_items(spec: Any) -> list[Item]:
    path = Path(spec.path)
    if not path.is_file():
        raise ConfigError(f"{path}: dataset file not found (benchmark {spec.name!r}, field path)")
    fmt = spec.format
    if fmt == "auto":
        fmt = "csv" if path.suffix.lower() == ".csv" else "jsonl"
    rows = _rows_csv(path) if fmt == "csv" else _rows_jsonl(path)
    try:
        items = [_to_item(row, i, f"{path}:{ln}", spec) for i, (ln, row) in enumerate(rows)]
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    _check_unique(items, str(path))
    if not items:
        raise ConfigError(f"{path}: the dataset has no rows")
    return items


def hf_items(spec: Any) -> list[Item]:
    try:
        import datasets  # heavy: imported only for hf benchmarks
    except ImportError:
        raise ConfigError(
            f"benchmark {spec.name!r} needs Hugging Face datasets: "
            "pip install 'evalgate-action[hf]'"
        ) from None
    try:
        ds = datasets.load_dataset(
            spec.dataset,
            spec.subset,
            split=spec.split,
            revision=spec.revision,
            data_files=spec.data_files,
        )
    except Exception as exc:  # datasets raises many types; translate at the boundary
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InfraError(
            f"benchmark {spec.name!r}: could not load dataset {spec.dataset!r}: {first}"
        ) from None
    where = f"{spec.dataset}[{spec.split}]"
    items = [_to_item(dict(row), i, f"{where} row {i}", spec) for i, row in enumerate(ds)]
    _check_unique(items, where)
    return items


def _check_unique(items: list[Item], where: str) -> None:
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise ConfigError(f"{where}: duplicate item id {item.id!r} (ids must be unique)")
        seen.add(item.id)


def load_items(spec: Any) -> list[Item]:
    """All items of a QA benchmark, in dataset order, before num_examples is applied."""
    if spec.kind == "arith":
        return arith_items(spec.size, spec.seed, spec.max_operand, list(spec.ops))
    if spec.kind == "jsonl":
        return file_items(spec)
    if spec.kind == "hf":
        return hf_items(spec)
    raise ValueError(spec.kind)

"""Item sources for QA benchmarks: generated arithmetic, local JSONL/CSV, Hugging Face datasets."""

from __future__ import annotations

import io
import json
import operator
import os
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from evalgate.errors import ConfigError, InfraError
from evalgate.suites.base import Item
from evalgate.suites.identity import digest

if TYPE_CHECKING:
    from evalgate.config.spec import ArithBenchmark, FileBenchmark, HFBenchmark
    from evalgate.config.spec.benchmarks import DatasetFields

__all__ = ["DataError", "arith_items", "file_items", "hf_items", "load_items"]


_APPLY = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def arith_items(size: int, seed: int, max_operand: int, ops: list[str]) -> list[Item]:
    """A pure function of its arguments: the same seed gives the same items on every machine."""
    rng = random.Random(seed)
    operands = [
        (rng.randint(0, max_operand), rng.randint(0, max_operand), rng.choice(ops))
        for _ in range(size)
    ]
    items = []
    for i, (a, b, op) in enumerate(operands):
        value = _APPLY[op](a, b)
        items.append(Item(id=f"arith-{seed}-{i}", prompt=f"{a} {op} {b}", answer=str(value)))
    return items


_DEFAULT_GROUP = "group"  # DatasetFields.group_field's default
# Suffixes of formats that are not JSON Lines (read as JSONL they give "invalid JSON" on line 1).
_OTHER_FORMATS = {".tsv", ".yaml", ".yml", ".parquet", ".xlsx", ".xls", ".txt", ".arrow"}


class DataError(ConfigError):
    """A dataset or template problem; ``field`` is the benchmark field to point at, and
    ``benchmark`` (set by the suite) whose — so the CLI can name the evals.yaml line."""

    def __init__(self, message: str, field: str = "path") -> None:
        super().__init__(message)
        self.field = field
        self.benchmark: str | None = None


def _read_text(path: Path) -> str:
    """The file's text: a UTF-8 BOM dropped (Excel writes one), CRLF or LF alike."""
    if path.is_dir():
        raise DataError(f"{path}: is a directory; `path` must name a JSONL or CSV file")
    if path.exists() and not path.is_file():  # /dev/null, a pipe: reading one may block
        raise DataError(f"{path}: not a regular file; `path` must name a JSONL or CSV file")
    if not path.is_file():
        raise DataError(f"{path}: dataset file not found")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read the dataset ({exc.strerror or exc})") from exc
    from evalgate.config._yamlio import decode_utf8

    return decode_utf8(raw, str(path), error=DataError)


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    row: dict[str, object] = {}
    for key, value in pairs:
        if key in row:  # json.loads would keep the last one silently
            raise ValueError(f"duplicate key {key!r} in one object")
        row[key] = value
    return row


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a value evalgate can compare; write a number or text")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):  # 1e400 overflows to inf without a word
        raise ValueError(f'{text} is not a finite number; write it as text ("{text}")')
    return value


def _whole_document(text: str) -> object:
    """The file read as one JSON document (None if it is not one)."""
    if not text.lstrip().startswith(("[", "{")):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _rows_jsonl(path: Path, text: str) -> Iterator[tuple[int, dict[str, object]]]:
    whole = _whole_document(text)
    if isinstance(whole, list) and whole and isinstance(whole[0], dict):
        raise DataError(
            f"{path}:1: a JSON array; evalgate reads JSON Lines (one object per line): "
            "write each row on its own line, without the enclosing [ ]"
        )
    if isinstance(whole, dict) and "\n" in text.strip():  # one object on one line is JSONL
        raise DataError(
            f"{path}:1: one JSON object over several lines; evalgate reads JSON Lines: "
            "write each row as one object on one line"
        )
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(
                line,
                object_pairs_hook=_no_duplicate_keys,
                parse_constant=_no_constant,
                parse_float=_finite,
            )
        except json.JSONDecodeError as exc:
            raise DataError(
                f"{path}:{lineno}: invalid JSON ({exc.msg}, column {exc.colno})"
            ) from None
        except ValueError as exc:
            raise DataError(f"{path}:{lineno}: {exc}") from None
        if not isinstance(row, dict):
            raise DataError(f"{path}:{lineno}: each line must be a JSON object")
        yield lineno, row


def _rows_csv(path: Path, text: str) -> Iterator[tuple[int, dict[str, object]]]:
    import csv  # CSV data files only

    # strict: an unclosed quote is an error, not a row that swallows the rest of the file.
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    done = 1  # the header's line; a failing record starts on the line after the last good one
    try:
        header = reader.fieldnames or []
        dupes = sorted({name for name in header if header.count(name) > 1})
        if dupes:
            raise DataError(f"{path}:1: the header names column {dupes[0]!r} twice")
        if len(header) == 1 and (";" in header[0] or "\t" in header[0]):
            sep = "';'" if ";" in header[0] else "tabs"
            raise DataError(
                f"{path}:1: the columns are separated by {sep}; evalgate reads comma-separated "
                "CSV (save the file with commas)"
            )
        for row in reader:
            if None in row or None in row.values():
                count = len(header) + len(row.get(None) or ()) - list(row.values()).count(None)
                raise DataError(
                    f"{path}:{reader.line_num}: {count} values, but the header names "
                    f"{len(header)} columns"
                )
            # line_num is where the record ends; a quoted value may span lines: name its start.
            inner = sum(v.count("\n") for v in row.values() if isinstance(v, str))
            yield reader.line_num - inner, row
            done = reader.line_num
    except csv.Error as exc:
        raise DataError(f"{path}:{done + 1}: invalid CSV ({exc}); check the quotes") from None


def _text(row: Mapping[str, object], name: str, where: str) -> str:
    value = row[name]
    if isinstance(value, bool):  # str(True) is "True": neither the file's spelling nor a word
        spelled = "true" if value else "false"
        raise DataError(
            f"{where}: field {name!r} is a boolean ({spelled}); write it as text, "
            f'e.g. "{spelled}" or "{"yes" if value else "no"}"'
        )
    if isinstance(value, dict | list):
        kind = "an object" if isinstance(value, dict) else "a list"
        raise DataError(f"{where}: field {name!r} must be text or a number (got {kind})")
    return str(value)


def _to_item(
    row: dict[str, object], index: int, where: str, spec: DatasetFields, ids: bool
) -> Item:
    """``ids``: whether the dataset has an id column (else rows are numbered)."""
    id_field = spec.id_field if ids else None
    for need, setting in ((spec.prompt_field, "prompt_field"), (spec.answer_field, "answer_field")):
        if need not in row:
            have = ", ".join(sorted(map(str, row))) or "none"
            raise DataError(f"{where}: missing field {need!r} (have: {have}); set {setting}")
        if row[need] is None:
            raise DataError(f"{where}: field {need!r} is null; every row needs a {need}")
    if not _text(row, spec.answer_field, where).strip():
        # An empty answer is contained in every completion: the item would always pass.
        raise DataError(f"{where}: field {spec.answer_field!r} is empty; every row needs an answer")
    if id_field is not None:
        item_id = row.get(id_field)
        if item_id is None or isinstance(item_id, bool | float):
            got = "missing" if id_field not in row else f"{item_id!r}"
            raise DataError(
                f"{where}: field {spec.id_field!r} must be text or an integer in every row "
                f"(got {got}); or set id_field: null to number the rows"
            )
    group_field = spec.group_field
    group = None
    if group_field is not None and row.get(group_field) is not None:
        # An object as a cluster id would be its Python repr, silently: _text refuses it.
        group = _text(row, group_field, where)
    # The row's other columns decide the score too (a template shows the choices; a scorer may
    # read them): in the item's hash. A row of id, prompt, answer (and group) alone hashes as
    # it always did, so stored baselines of plain questions stay comparable.
    named = {spec.id_field, spec.prompt_field, spec.answer_field, spec.group_field}
    rest = {k: v for k, v in row.items() if k not in named}
    return Item(
        id=_text(row, id_field, where) if id_field is not None else str(index),
        prompt=_text(row, spec.prompt_field, where),
        answer=_text(row, spec.answer_field, where),
        group=group,
        fields=row,
        exam=digest(rest) if rest else "",
    )


def file_items(spec: FileBenchmark) -> list[Item]:
    path = Path(spec.path)
    text = _read_text(path)
    fmt = spec.format
    if fmt == "auto":
        fmt = "csv" if path.suffix.lower() == ".csv" else "jsonl"
    if spec.format == "auto" and path.suffix.lower() in _OTHER_FORMATS:
        raise DataError(
            f"{path}: a {path.suffix} file; evalgate reads JSON Lines (.jsonl) or CSV (.csv) "
            "(set format: jsonl or csv if the content is one of those)"
        )
    rows = list(_rows_csv(path, text) if fmt == "csv" else _rows_jsonl(path, text))
    ids = bool(spec.id_field) and any(spec.id_field in row for _, row in rows)
    # The default column name ("group") may be absent: then items are independent. A column
    # named on purpose must exist, or the clustering the user asked for silently vanishes.
    group = spec.group_field
    if group and group != _DEFAULT_GROUP and rows and not any(group in r for _, r in rows):
        have = ", ".join(sorted(map(str, rows[0][1]))) or "none"
        raise DataError(
            f"{path}: no row has the group column {group!r} (have: {have}); "
            "name an existing column, or group_field: null for independent items",
            field="group_field",
        )
    located = [
        (_to_item(row, i, f"{path}:{ln}", spec, ids), ln) for i, (ln, row) in enumerate(rows)
    ]
    if not located:
        raise DataError(f"{path}: the dataset has no rows")
    _check_unique([item for item, _ in located], str(path), [ln for _, ln in located])
    return [item for item, _ in located]


def hf_items(spec: HFBenchmark) -> list[Item]:
    try:
        import datasets  # heavy: imported only for hf benchmarks
    except ImportError as exc:
        raise ConfigError(
            f"benchmark {spec.name!r} needs Hugging Face datasets: "
            "pip install 'evalgate-action[hf]'"
        ) from exc
    _not_shadowed(spec)
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
        ) from exc
    where = f"{spec.dataset}[{spec.split}]"
    ids = bool(spec.id_field) and spec.id_field in (ds.column_names or [])
    items = [_to_item(dict(row), i, f"{where} row {i}", spec, ids) for i, row in enumerate(ds)]
    _check_unique(items, where)
    return items


def _not_shadowed(spec: HFBenchmark) -> None:
    """Refuse a Hub name that a path in the working directory would shadow: the loader made
    a folder next to evals.yaml absolute, so a name still relative is the Hub's (or a builder's),
    and `datasets` would read a same-named folder of the working directory instead (in the
    Action: one the PR adds to its checkout, for the exam and the baseline alike)."""
    from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES  # builders come first

    name = spec.dataset
    if Path(name).is_absolute() or name in _PACKAGED_DATASETS_MODULES:
        return
    if os.path.lexists(name):
        raise ConfigError(
            f"benchmark {spec.name!r}: dataset {name!r} names a Hub dataset (there is no such "
            f"folder next to its evals.yaml), but the working directory ({os.getcwd()}) has a "
            f"{name!r} that `datasets` would read instead; refused (name a local folder by its "
            "path relative to evals.yaml)"
        )


def _check_unique(items: list[Item], where: str, lines: list[int] | None = None) -> None:
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        if item.id in seen:
            at = f"{where}:{lines[index]}" if lines else where
            first = f" (first on line {lines[seen[item.id]]})" if lines else ""
            raise DataError(
                f"{at}: duplicate item id {item.id!r}{first}; ids must be unique, or set "
                "id_field: null to number the rows"
            )
        seen[item.id] = index


def load_items(spec: ArithBenchmark | FileBenchmark | HFBenchmark) -> list[Item]:
    """All items of a QA benchmark, in dataset order, before num_examples is applied."""
    if spec.kind == "arith":
        return arith_items(spec.size, spec.seed, spec.max_operand, list(spec.ops))
    if spec.kind == "jsonl":
        return file_items(spec)
    if spec.kind == "hf":
        return hf_items(spec)
    raise ValueError(spec.kind)

"""What a PR changes in the exam, for the comment's first note: the PR's edits to the exam do
not apply (the run used the base's), and the comment says which they were.

A field is the exam where :data:`evalgate.config.split.FIELDS` says so; a path field's change
is its files' change too (another path, or the same path with other contents).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from pydantic import BaseModel

from evalgate.config.load import Config
from evalgate.config.split import field_role
from evalgate.report import code_span

__all__ = ["exam_changes"]

# Exam fields that hold a path (resolved to an absolute one by the loader, or by
# anchor_local_data): the PR's edits to the files they name are exam changes too.
_PATH_FIELDS = ("path", "tasks", "env_path", "task", "data_files", "dataset")

_SHOWN = 40  # characters of a changed value shown in the note; the rest is the diff's


def exam_changes(base: Config, base_root: Path, pr: Config, pr_root: Path) -> list[str]:
    """What the PR changes in the exam, one phrase per benchmark (``qa: eval, the data file``)."""
    out = []
    theirs = {b.name: b for b in pr.benchmarks}
    for bench in base.benchmarks:
        other = theirs.get(bench.name)
        if other is None:
            continue  # reported as removed by policy_checks
        if type(other) is not type(bench):
            changed = _which("kind", bench.kind, other.kind)
        else:
            changed = _bench_changes(bench, other, base_root, pr_root)
        if changed:
            out.append(f"{bench.name}: {', '.join(dict.fromkeys(changed))}")
    for section in ("gate", "baseline", "publish"):  # a budget is a ceiling: apply_ceiling's note
        if getattr(base, section) != getattr(pr, section):
            out.append(", ".join(_which(section, getattr(base, section), getattr(pr, section))))
    return out


def _bench_changes(bench: BaseModel, other: BaseModel, base_root: Path, pr_root: Path) -> list[str]:
    """The exam fields ``other`` (the PR's) changes in ``bench`` (the base's), of one kind."""
    changed: list[str] = []
    mine = dict(_fields(bench, "benchmarks[]"))
    for path, value in _fields(other, "benchmarks[]"):
        if field_role(path) != "exam" or path.endswith(".kind"):
            continue
        name = path.removeprefix("benchmarks[].")
        old = mine.get(path)
        found = _path_change(name, old, value, base_root, pr_root) if name in _PATH_FIELDS else None
        if found is not None:
            changed += [found] if found else []
        elif old != value:
            changed += _which(name, old, value)
    return changed


def _fields(obj: BaseModel, prefix: str) -> Iterator[tuple[str, object]]:
    for name in type(obj).model_fields:
        path, value = f"{prefix}.{name}", getattr(obj, name)
        if field_role(path) is None and isinstance(value, BaseModel):
            yield from _fields(value, path)  # a section whose fields are classified one by one
        else:
            yield path, value


# -- paths -------------------------------------------------------------------------------------


def _digest(path: Path) -> str:
    """Content of a file or a folder (names, modes, bytes, symlink targets), as one hash."""
    h = hashlib.sha256()
    if path.is_dir() and not path.is_symlink():
        items: Iterator[Path] = iter(sorted(path.rglob("*")))
    else:
        items = iter([path])
    for item in items:
        h.update(item.relative_to(path).as_posix().encode() if item != path else b".")
        if item.is_symlink():
            h.update(b"l" + os.readlink(item).encode())
        elif item.is_file():
            h.update(b"f%o" % (item.stat().st_mode & 0o111) + item.read_bytes())
        h.update(b"\0")
    return h.hexdigest() if path.exists() or path.is_symlink() else "absent"


def _relative(value: str, root: Path) -> tuple[str, Path] | None:
    file, _, func = value.partition("@")  # an inspect task: file.py@name
    full = Path(file)
    if not full.is_absolute():
        return None
    try:
        rel = full.relative_to(root)
    except ValueError:
        return None
    return rel.as_posix() + (f"@{func}" if func else ""), full


def _paths(value: object) -> list[str] | None:
    """A path field's value as a list of paths (one, or a list of them); None otherwise."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [str(v) for v in value]
    return None


def _path_change(name: str, old: object, new: object, base_root: Path, pr_root: Path) -> str | None:
    """How a path field changed: "" (not at all), its name (another path), "the files of …"
    (the same path, other contents); None when the values are not paths in the two trees."""
    olds, news = _paths(old), _paths(new)
    if olds is None or news is None or len(olds) != len(news):
        return None
    for a_value, b_value in zip(olds, news, strict=True):
        a, b = _relative(a_value, base_root), _relative(b_value, pr_root)
        if a is None or b is None:
            return None
        if a[0] != b[0]:
            return name
        if _digest(a[1]) != _digest(b[1]):
            return f"the files of {name} ({a[0]})"
    return ""


# -- values ------------------------------------------------------------------------------------


def _shown(value: object) -> str:
    """A changed value for the note: evalgate's own numbers as they are, anything else (text
    from the PR: prompts, names) in a code span, cut to a few words."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # `120`, as written, not the loader's `120.0`
    if value is None or isinstance(value, bool | int | float):
        return code_span("null" if value is None else json.dumps(value))
    if isinstance(value, BaseModel):  # a section of another kind: what it is, then its fields
        value = value.model_dump(mode="json", exclude_defaults=True)
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return code_span(text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…")


def _which(name: str, old: object, new: object) -> list[str]:
    """Each changed leaf under ``name``, named and with both values: ``eval.max_error_rate``
    of a section, a key of a map (``gate.thresholds.qa.accuracy``), added or removed."""
    if isinstance(old, BaseModel) and type(old) is type(new):
        subs = [f for f in type(old).model_fields if getattr(old, f) != getattr(new, f)]
        out = [c for f in subs for c in _which(f"{name}.{f}", getattr(old, f), getattr(new, f))]
        return out or [code_span(name)]
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out = []
        for key in dict.fromkeys([*old, *new]):
            if key not in new:
                out.append(f"{code_span(f'{name}.{key}')} removed (was {_shown(old[key])})")
            elif key not in old:
                out.append(f"{code_span(f'{name}.{key}')} added ({_shown(new[key])})")
            elif old[key] != new[key]:
                out += _which(f"{name}.{key}", old[key], new[key])
        return out or [code_span(name)]
    return [f"{code_span(name)} {_shown(old)} → {_shown(new)}"]

"""YAML loading that remembers where every key came from.

Errors must name file, line and field, so we compose the YAML node graph ourselves (PyYAML's
``compose``) and record each mapping key's and sequence item's line. Duplicate keys, which PyYAML
silently lets the last one win, are an error here: a gate policy must not change by accident.
Aliases are expanded with a budget and files have a size cap, so a 1 KB "billion laughs" file or a
pasted 50 MB log fails in milliseconds instead of eating the machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evalgate.errors import ConfigError

__all__ = [
    "MAX_BYTES",
    "Layer",
    "Path_",
    "decode_utf8",
    "format_path",
    "is_utf16",
    "load_yaml",
    "merge_layers",
    "read_text",
]

Path_ = tuple[str | int, ...]

MAX_BYTES = 2 * 1024 * 1024  # a hand-written evals.yaml is a few KB; 2 MiB is generous
_PLAIN_TAGS = {"tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"}
MAX_VALUES = 200_000  # values after alias expansion; far above any real config


# eq=False: never compared (an identity, not a value); the generated methods would be
# compiled from source at every start-up (dataclasses exec each one: issue #36).
@dataclass(frozen=True, eq=False)
class Layer:
    """One source of configuration: its data, its name, and the line of every key path."""

    # Plain YAML: dicts with str keys, lists, scalars (None when empty); Any because config.load
    # indexes into it before pydantic checks it, having checked its shape itself.
    data: Any
    source: str
    lines: dict[Path_, int] = field(default_factory=dict)
    prefix: Path_ = ()  # where this layer's data sits inside its file, for messages

    def where(self, path: Path_) -> str:
        """``source:line`` for the longest known prefix of ``path``."""
        for cut in range(len(path), -1, -1):
            line = self.lines.get(path[:cut])
            if line is not None:
                return f"{self.source}:{line}"
        return self.source


def format_path(path: Path_) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


class _Budget:
    """Counts constructed values (aliases expand into copies) and the nodes being built, and
    holds the one constructor a file's scalars are read with."""

    def __init__(self, source: str) -> None:
        self.source, self.left, self.active = source, MAX_VALUES, set[int]()
        # One loader per file, not one per scalar: creating a SafeLoader (its reader, scanner,
        # parser, composer and constructor) cost ~5 µs a scalar, more than constructing it.
        # It only constructs scalars here, which it caches by node: an alias gets the same
        # (immutable) value, as a fresh loader built it.
        self.scalars = yaml.SafeLoader("")

    def scalar(self, node: yaml.Node) -> object:
        return self.scalars.construct_object(node, deep=True)

    def spend(self, node: yaml.Node) -> None:
        self.left -= 1
        if self.left < 0:
            raise ConfigError(
                f"{self.source}:{node.start_mark.line + 1}: invalid YAML: more than "
                f"{MAX_VALUES:,} values after expanding aliases (`*name`); write the values out"
            )


def _construct(node: yaml.Node, path: Path_, lines: dict[Path_, int], budget: _Budget) -> object:
    budget.spend(node)
    lines.setdefault(path, node.start_mark.line + 1)
    if not isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        return budget.scalar(node)
    if id(node) in budget.active:  # `a: &x [*x]`: an alias inside its own anchor
        raise ConfigError(
            f"{budget.source}:{node.start_mark.line + 1}: {format_path(path)}: invalid YAML: "
            "an alias refers to the value that contains it"
        )
    if node.tag not in _PLAIN_TAGS:  # `!!python/object/apply:…`, `!!set`: never constructed
        raise ConfigError(
            f"{budget.source}:{node.start_mark.line + 1}: {format_path(path)}: invalid YAML "
            f"value: the tag {node.tag.replace('tag:yaml.org,2002:', '!!')} is not supported; "
            "write plain lists and mappings"
        )
    budget.active.add(id(node))
    try:
        if isinstance(node, yaml.SequenceNode):
            return [
                _construct(item, (*path, i), lines, budget) for i, item in enumerate(node.value)
            ]
        return _mapping(node, path, lines, budget)
    finally:
        budget.active.discard(id(node))


_MERGE = "tag:yaml.org,2002:merge"


def _mapping(
    node: yaml.MappingNode, path: Path_, lines: dict[Path_, int], budget: _Budget
) -> dict[str, object]:
    source = budget.source
    out: dict[str, object] = {}
    # `<<: *defaults` (YAML merge keys) first: the mapping's own keys override merged ones,
    # wherever they stand, as YAML specifies.
    for key_node, value_node in node.value:
        if key_node.tag == _MERGE:
            line = key_node.start_mark.line + 1
            for key, value in _merged(value_node, path, line, lines, budget).items():
                out.setdefault(key, value)
    own: set[str] = set()
    for key_node, value_node in node.value:
        if key_node.tag == _MERGE:
            continue
        scalar = budget.scalar(key_node) if isinstance(key_node, yaml.ScalarNode) else None
        if not isinstance(scalar, str | int | float | bool):
            raise ConfigError(
                f"{source}:{key_node.start_mark.line + 1}: {format_path(path)}: "
                "mapping keys must be plain strings"
            )
        key = str(scalar)
        if key in own:
            raise ConfigError(
                f"{source}:{key_node.start_mark.line + 1}: {format_path((*path, key))}: "
                f"duplicate key (first set on line {lines[(*path, key)]})"
            )
        own.add(key)
        lines[(*path, key)] = key_node.start_mark.line + 1
        out[key] = _construct(value_node, (*path, key), lines, budget)
    return out


def _merged(
    node: yaml.Node, path: Path_, line: int, lines: dict[Path_, int], budget: _Budget
) -> dict[str, object]:
    """The keys a `<<:` (on ``line``) brings in: one mapping, or a list of them (earlier win)."""
    sources = node.value if isinstance(node, yaml.SequenceNode) else [node]
    out: dict[str, object] = {}
    for source in sources:
        if not isinstance(source, yaml.MappingNode):
            raise ConfigError(
                f"{budget.source}:{line}: {format_path(path)}: invalid "
                "YAML: `<<:` merges a mapping (`<<: *name`) or a list of them"
            )
        for key, value in _mapping(source, path, lines, budget).items():
            out.setdefault(key, value)
    return out


def read_text(path: Path, source: str, *, limit: int = MAX_BYTES, what: str = "file") -> str:
    """A UTF-8 text file (a BOM is dropped), with errors that name a line, not a byte offset."""
    try:
        size = path.stat().st_size
        if path.is_dir():
            raise ConfigError(f"{source}: is a directory; give the path of a {what}")
        if size > limit:
            raise ConfigError(
                f"{source}: the {what} is {size / 1e6:.1f} MB; at most {limit / 1e6:.0f} MB "
                "is read (is this the right file?)"
            )
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{source}: file not found") from None
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read file ({exc.strerror or exc})") from exc
    return decode_utf8(raw, source)


def is_utf16(raw: bytes) -> bool:
    """UTF-16 (Windows "Unicode"): a BOM, or ASCII text with every other byte zero."""
    head = raw[:200]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return True
    return len(head) >= 4 and (
        head[1::2].count(0) == len(head) // 2 or head[0::2].count(0) == len(head) // 2
    )


def decode_utf8(raw: bytes, source: str, *, error: type[ConfigError] = ConfigError) -> str:
    """A file's bytes as text (a UTF-8 BOM dropped); UTF-16 or bytes that are not UTF-8 are
    ``error`` naming the line (a dataset's DataError, which also names the field)."""
    if is_utf16(raw):
        raise error(f"{source}:1: the file is UTF-16; save it as UTF-8")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise error(
            f"{source}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x}); save the file as UTF-8"
        ) from None


def _syntax_error(exc: yaml.MarkedYAMLError, source: str) -> ConfigError:
    problem = (exc.problem or exc.context or "invalid YAML").strip()
    # At end of stream the problem mark points past the file; the construct that was left open
    # (context mark) is where the user has to look.
    at_end = "end of stream" in problem or "<stream end>" in problem
    mark = (exc.context_mark if at_end else None) or exc.problem_mark or exc.context_mark
    line = f":{mark.line + 1}" if mark is not None else ""
    if at_end and "quoted scalar" in (exc.context or ""):
        problem = "a quoted string starts here and is never closed; add the closing quote"
    elif at_end and "flow" in (exc.context or ""):
        problem = "a [ or { opens here and is never closed; add the closing bracket"
    elif "found character '\\t'" in problem:
        problem = "a tab in the indentation; YAML indents with spaces only"
    return ConfigError(f"{source}{line}: invalid YAML: {problem}")


def load_yaml(path: Path, *, text: str | None = None, source: str | None = None) -> Layer:
    """Parse a YAML file into a :class:`Layer`; syntax errors become one-line ConfigErrors."""
    source = source or str(path)
    if text is None:
        text = read_text(path, source)
    too_deep = ConfigError(
        f"{source}: invalid YAML: lists or mappings nested too deeply (hundreds of levels); "
        "an evals.yaml needs a handful"
    )
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(exc, source) from None
    except yaml.reader.ReaderError as exc:  # a control character; it knows only its offset
        line = text[: max(exc.position, 0)].count("\n") + 1
        char = exc.character if isinstance(exc.character, int) else ord(exc.character or "?")
        raise ConfigError(
            f"{source}:{line}: invalid YAML: unacceptable character #x{char:04x}: {exc.reason}; "
            "remove it"
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: invalid YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:  # PyYAML's composer recurses once per nesting level
        raise too_deep from None
    if node is None:
        return Layer(data=None, source=source, lines={(): 1})
    lines: dict[Path_, int] = {}
    budget = _Budget(source)
    try:
        data = _construct(node, (), lines, budget)
    except RecursionError:
        raise too_deep from None
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        at = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(
            f"{source}{at}: invalid YAML value: {exc.problem}; write a plain value (no tags: "
            "evalgate expands no variables; secrets are read from the variables *_env fields name)"
        ) from None
    finally:
        budget.scalars.dispose()
    return Layer(data=data, source=source, lines=lines)


def merge_layers(layers: list[Layer]) -> tuple[Any, dict[Path_, Layer]]:
    """Deep-merge mappings, later layers winning; returns the data and each path's origin.

    Lists and scalars are replaced whole (merging lists element-wise surprises people).
    """
    merged: object = None
    origin: dict[Path_, Layer] = {}

    def visit(base: object, new: object, path: Path_, layer: Layer) -> object:
        if isinstance(base, dict) and new is None:
            return base  # `sampling:` left empty in a later layer keeps the earlier one's values
        if isinstance(base, dict) and isinstance(new, dict):
            out = dict(base)
            for key, value in new.items():
                out[key] = visit(base.get(key), value, (*path, key), layer)
            # A mapping belongs to the most specific file that wrote into it (for "missing field").
            if layer.source != "command line" or path not in origin:
                origin[path] = layer
            return out
        _claim(new, path, layer)
        return new

    def _claim(value: object, path: Path_, layer: Layer) -> None:
        origin[path] = layer
        if isinstance(value, dict):
            for key, sub in value.items():
                _claim(sub, (*path, key), layer)
        elif isinstance(value, list):
            for i, sub in enumerate(value):
                _claim(sub, (*path, i), layer)

    for layer in layers:
        if not layer.data and layer.data != 0:
            continue
        merged = visit(merged, layer.data, (), layer)
    return merged, origin

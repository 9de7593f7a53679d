"""YAML loading that remembers where every key came from.

Errors must name file, line and field, so we compose the YAML node graph ourselves (PyYAML's
``compose``) and record each mapping key's and sequence item's line. Duplicate keys, which PyYAML
silently lets the last one win, are an error here: a gate policy must not change by accident.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evalgate.errors import ConfigError

__all__ = ["Layer", "Path_", "format_path", "load_yaml", "merge_layers"]

Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class Layer:
    """One source of configuration: its data, its name, and the line of every key path."""

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


def _construct(node: yaml.Node, path: Path_, lines: dict[Path_, int], source: str) -> Any:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _scalar(key_node) if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(key, str | int | float | bool):
                raise ConfigError(
                    f"{source}:{key_node.start_mark.line + 1}: {format_path(path)}: "
                    "mapping keys must be plain strings"
                )
            key = str(key)
            if key in out:
                raise ConfigError(
                    f"{source}:{key_node.start_mark.line + 1}: {format_path((*path, key))}: "
                    f"duplicate key (first set on line {lines[(*path, key)]})"
                )
            lines[(*path, key)] = key_node.start_mark.line + 1
            out[key] = _construct(value_node, (*path, key), lines, source)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(item, (*path, i), lines, source) for i, item in enumerate(node.value)]
    return _scalar(node)


def _scalar(node: yaml.Node) -> Any:
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    finally:
        loader.dispose()


def load_yaml(path: Path, *, text: str | None = None, source: str | None = None) -> Layer:
    """Parse a YAML file into a :class:`Layer`; syntax errors become one-line ConfigErrors."""
    source = source or str(path)
    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"{source}: file not found") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{source}: cannot read file ({exc})") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        # At end of stream the problem mark points past the file; the construct that was left
        # open (context mark) is where the user has to look.
        at_end = "end" in (exc.problem or "") and "stream" in (exc.problem or "")
        mark = (exc.context_mark if at_end else None) or exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = (exc.problem or exc.context or "invalid YAML").strip()
        raise ConfigError(f"{source}{line}: invalid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: invalid YAML: {str(exc).splitlines()[0]}") from None
    if node is None:
        return Layer(data=None, source=source, lines={(): 1})
    lines: dict[Path_, int] = {}
    try:
        data = _construct(node, (), lines, source)
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{source}{line}: invalid YAML value: {exc.problem}") from None
    return Layer(data=data, source=source, lines=lines)


def merge_layers(layers: list[Layer]) -> tuple[Any, dict[Path_, Layer]]:
    """Deep-merge mappings, later layers winning; returns the data and each path's origin.

    Lists and scalars are replaced whole (merging lists element-wise surprises people).
    """
    merged: Any = None
    origin: dict[Path_, Layer] = {}

    def visit(base: Any, new: Any, path: Path_, layer: Layer) -> Any:
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

    def _claim(value: Any, path: Path_, layer: Layer) -> None:
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

"""Command-line dotted overrides: ``--sampling.temperature=0.5``, ``--eval.num_examples=20``.

Values are parsed as YAML scalars/flow collections, so ``0.5`` is a float, ``true`` a bool and
``[a, b]`` a list. ``benchmarks.NAME.…`` and ``models.NAME.…`` address one entry by name.
Paths are checked against the schema in :mod:`evalgate.config.load`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from evalgate.errors import ConfigError

__all__ = ["Overrides", "parse_overrides"]


# eq=False: never compared (an identity, not a value); the generated methods would be
# compiled from source at every start-up (dataclasses exec each one: issue #36).
@dataclass(frozen=True, eq=False)
class Overrides:
    """Parsed overrides, split by what they address."""

    top: dict[str, object] = field(default_factory=dict)
    per_benchmark: dict[str, dict[str, object]] = field(default_factory=dict)
    per_model: dict[str, dict[str, object]] = field(default_factory=dict)
    paths: tuple[tuple[str, ...], ...] = ()


def _set(tree: dict[str, object], keys: list[str], value: object, raw: str) -> None:
    node = tree
    for key in keys[:-1]:
        nxt = node.setdefault(key, {})
        if not isinstance(nxt, dict):
            raise ConfigError(f"command line: {raw}: conflicts with an earlier override")
        node = nxt
    node[keys[-1]] = value


def _entry_name(keys: list[str], known: set[str]) -> int:
    """How many keys after ``benchmarks``/``models`` form the entry's name: names may contain
    dots (`my.bench`), so the longest known name wins; else the first key."""
    for end in range(len(keys) - 1, 1, -1):
        if ".".join(keys[1:end]) in known:
            return end - 1
    return 1


def parse_overrides(
    items: list[str] | tuple[str, ...], names: dict[str, set[str]] | None = None
) -> Overrides:
    """Parse ``a.b.c=value`` strings (a leading ``--`` is allowed). ``names``: the entries'
    names by section (``benchmarks``, ``models``), to read a name that contains dots."""
    out = Overrides()
    paths = []
    for raw in items:
        text = raw[2:] if raw.startswith("--") else raw
        key, sep, value_text = text.partition("=")
        keys = key.split(".")
        if not sep or not key or any(not k for k in keys):
            raise ConfigError(
                f"command line: {raw!r}: overrides look like --section.field=value "
                "(e.g. --sampling.temperature=0.5)"
            )
        try:
            value = yaml.safe_load(value_text) if value_text.strip() else ""
        except yaml.YAMLError:
            value = value_text
        if keys[0] in ("benchmarks", "models"):
            if len(keys) < 3:
                raise ConfigError(
                    f"command line: --{key}: address one entry by name, "
                    f"e.g. --{keys[0]}.NAME.field=value"
                )
            size = _entry_name(keys, (names or {}).get(keys[0], set()))
            keys = [keys[0], ".".join(keys[1 : 1 + size]), *keys[1 + size :]]
            target = out.per_benchmark if keys[0] == "benchmarks" else out.per_model
            _set(target.setdefault(keys[1], {}), keys[2:], value, raw)
        else:
            _set(out.top, keys, value, raw)
        paths.append(tuple(keys))
    return Overrides(out.top, out.per_benchmark, out.per_model, tuple(paths))

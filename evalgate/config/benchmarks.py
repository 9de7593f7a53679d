"""The benchmark registry: YAML definitions by name.

Built-in definitions live in the repository's ``benchmarks/`` folder (shipped inside the wheel as
``evalgate/_builtin_benchmarks``); a user's own go in ``benchmarks/`` next to their evals.yaml and
take precedence, so a team can pin or adapt a built-in without forking evalgate.
"""

from __future__ import annotations

from pathlib import Path

from evalgate.config._yamlio import Layer, load_yaml
from evalgate.errors import ConfigError

__all__ = ["available", "builtin_dir", "load"]


def builtin_dir() -> Path:
    package = Path(__file__).resolve().parents[1]  # evalgate/
    shipped = package / "_builtin_benchmarks"  # inside the wheel (pyproject's force-include)
    return shipped if shipped.is_dir() else package.parent / "benchmarks"  # a source checkout


def available(dirs: tuple[Path, ...] = ()) -> dict[str, Path]:
    """Benchmark name → definition file; earlier dirs win, built-ins come last."""
    found: dict[str, Path] = {}
    for folder in (*dirs, builtin_dir()):
        if folder.is_dir():
            for file in sorted(folder.glob("*.yaml")):
                found.setdefault(file.stem, file)
    return found


def load(name: str, dirs: tuple[Path, ...], *, where: str) -> Layer:
    """The definition layer for ``name``; an unknown name lists the known ones."""
    known = available(dirs)
    file = known.get(name)
    if file is None:
        raise ConfigError(
            f"{where}: benchmarks: unknown benchmark {name!r}; known: {', '.join(sorted(known))} "
            "(or give `kind:` for an inline benchmark)"
        )
    layer = load_yaml(file)
    if not isinstance(layer.data, dict):
        raise ConfigError(f"{file}:1: a benchmark definition must be a mapping")
    if layer.data.get("name", name) != name:
        raise ConfigError(f"{layer.where(('name',))}: name: must match the file name {name!r}")
    return Layer(data={"name": name, **layer.data}, source=layer.source, lines=layer.lines)

"""Find baseline runs to compare with: in an output folder, or (later) in a result store."""

from __future__ import annotations

import json
from pathlib import Path

from evalgate.errors import UsageError

__all__ = ["find_runs"]


def _key(run_dir: Path) -> tuple[str, str] | None:
    try:
        cfg = json.loads((run_dir / "run_config.json").read_text(encoding="utf-8"))
        return str(cfg["model"]["name"]), str(cfg["benchmark"]["name"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def find_runs(path: Path) -> dict[tuple[str, str], Path]:
    """(model label, benchmark) → run directory, from a run directory or an output root.

    An output root may hold several invocations; the newest run of each pair wins (run ids start
    with a UTC timestamp, so they sort by time).
    """
    path = Path(path)
    if (path / "run_config.json").is_file():
        key = _key(path)
        if key is None:
            raise UsageError(f"{path}: unreadable run_config.json")
        return {key: path}
    if not path.is_dir():
        raise UsageError(f"{path}: no such directory (give a run directory or an output root)")
    found: dict[tuple[str, str], Path] = {}
    for cfg in sorted((path / "evals").glob("*/*/run_config.json"), key=lambda p: p.parent.name):
        key = _key(cfg.parent)
        if key is not None and (cfg.parent / "results.jsonl").is_file():
            found[key] = cfg.parent
    if not found:
        raise UsageError(f"{path}: no evalgate runs found (expected {path}/evals/*/*/)")
    return found

"""``evalgate benchmarks``: the built-in benchmarks, with their defaults."""

from __future__ import annotations

import argparse
from typing import IO

__all__ = ["run"]


def run(
    args: argparse.Namespace, overrides: list[str], environ: dict[str, str], out: IO[str]
) -> int:
    from evalgate.config import benchmarks
    from evalgate.config._yamlio import load_yaml

    for name, path in sorted(benchmarks.available().items()):
        data = load_yaml(path).data or {}
        ev, sm = data.get("eval", {}), data.get("sampling", {})
        print(f"{name:<14} {data.get('kind', '?'):<6} {data.get('description', '')}", file=out)
        print(f"{'':<14} defaults: eval={ev} sampling={sm}", file=out)
    return 0

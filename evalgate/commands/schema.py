"""``evalgate schema``: the JSON Schema of evals.yaml, for editors."""

from __future__ import annotations

import argparse
import json
from typing import IO

__all__ = ["run"]


def run(
    args: argparse.Namespace, overrides: list[str], environ: dict[str, str], out: IO[str]
) -> int:
    from evalgate.config.schema import json_schema

    print(json.dumps(json_schema(), indent=2), file=out)
    return 0

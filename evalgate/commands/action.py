"""``evalgate action``: the GitHub Action's entrypoint; its inputs come from the environment."""

from __future__ import annotations

import argparse
from typing import IO

__all__ = ["run"]


def run(
    args: argparse.Namespace, overrides: list[str], environ: dict[str, str], out: IO[str]
) -> int:
    from evalgate.action import run_action

    return run_action(environ, out=out)

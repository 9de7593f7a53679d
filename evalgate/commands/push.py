"""``evalgate push``: upload a saved run to a Hugging Face dataset repository."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import IO

from evalgate.commands._options import log_line
from evalgate.errors import UsageError

__all__ = ["run"]


def run(
    args: argparse.Namespace, overrides: list[str], environ: dict[str, str], out: IO[str]
) -> int:
    from evalgate.publish.hf_hub import push_run

    if args.repo.count("/") != 1 or not all(args.repo.split("/")):
        raise UsageError(f"--repo {args.repo!r}: give the dataset repository as ORG/NAME")
    url = push_run(
        args.run,
        repo=args.repo,
        output_root=Path(args.output),
        environ=environ,
        private=not args.public,
        log=log_line,
    )
    print(url, file=out)
    return 0

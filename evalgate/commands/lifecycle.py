"""``evalgate deploy``, ``status``, ``stop``: the persistent Modal apps of evals.yaml's models."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import IO

__all__ = ["run"]


def run(
    args: argparse.Namespace, overrides: list[str], environ: dict[str, str], out: IO[str]
) -> int:
    from evalgate.config.load import load_config
    from evalgate.serve import lifecycle

    need_config = not (args.command == "stop" and args.all and not Path(args.config).exists())
    config = load_config(Path(args.config)) if need_config else None
    if args.command == "deploy":
        assert config is not None  # only `stop --all` runs without one
        results = lifecycle.deploy(config, environ=environ, models=args.model, wait=args.wait)
    elif args.command == "status":
        assert config is not None
        results = lifecycle.status(config, environ=environ, models=args.model, probe=args.probe)
    else:
        results = lifecycle.stop(config, environ=environ, models=args.model, all_apps=args.all)
    if getattr(args, "json", False):
        print(json.dumps([r.as_dict() for r in results], indent=2), file=out)
    else:
        for r in results:
            print(r.line(), file=out)
        if not results:
            print("no modal-vllm apps", file=out)
    return 0

"""The output tree, as modal-eval users know it.

``{root}/evals/{benchmark}--{org}--{model}/{run_id}/`` holds ``run_config.json``,
``results.jsonl`` (one line per rollout, appended and flushed as rollouts finish, so a crash loses
nothing already computed), ``metadata.json`` and ``logs/``. Per invocation, ``{root}`` gets
``scorecard.md`` and ``verdict.json``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

__all__ = ["RunDir", "new_run_id", "write_json"]


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"


def write_json(path: Path, data: Any) -> None:
    """Write atomically: a reader never sees half a file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


@dataclass
class RunDir:
    path: Path

    @classmethod
    def create(cls, root: Path, benchmark: str, model_id: str, run_id: str) -> RunDir:
        org, _, name = model_id.rpartition("/")
        folder = f"{_slug(benchmark)}--{_slug(org or 'local')}--{_slug(name)}"
        path = root / "evals" / folder / run_id
        (path / "logs").mkdir(parents=True, exist_ok=False)
        return cls(path)

    @property
    def results_path(self) -> Path:
        return self.path / "results.jsonl"

    def open_journal(self) -> IO[str]:
        return self.results_path.open("a", encoding="utf-8")

    def write_config(self, data: dict[str, Any]) -> None:
        write_json(self.path / "run_config.json", data)

    def write_metadata(self, data: dict[str, Any]) -> None:
        write_json(self.path / "metadata.json", data)

    def attach_log(self, log: Path | None) -> None:
        if log is not None and log.is_file():
            shutil.copyfile(log, self.path / "logs" / log.name)

"""A result store in a local folder: ``{root}/{commit}/{name}/`` holds one run.

Each run folder holds the files of :data:`~evalgate.store.base.RUN_FILES` and a ``stored_at``
marker (one ISO-8601 UTC line). Useful on a self-hosted runner with a persistent disk, in tests,
and as the reference implementation of the store contract.

A run is written into a temporary sibling folder and renamed into place, so a crash never leaves
a half-stored run: a reader sees the old run, the new one, or (for an instant while an old run
is replaced) none.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Sequence
from pathlib import Path

from evalgate.run.layout import METADATA
from evalgate.store.base import (
    RUN_FILES,
    RunKey,
    StoredRun,
    StoreError,
    check_name,
    is_commit,
    iso_utc,
    run_files,
    utc_now,
)

__all__ = ["LocalDirStore"]

MARKER = "stored_at"


class LocalDirStore:
    """Runs as plain folders below ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"LocalDirStore({str(self.root)!r})"

    def save(self, key: RunKey, run_dir: Path) -> str:
        files = run_files(run_dir)
        final = self.root / key.commit / key.name
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            # Names starting with "." can never be run names (see check_name): no collisions,
            # and readers skip them.
            tmp = final.parent / f".tmp-{key.name}-{secrets.token_hex(4)}"
            tmp.mkdir()
            try:
                for name, src in files.items():
                    shutil.copyfile(src, tmp / name)
                (tmp / MARKER).write_text(utc_now() + "\n", encoding="utf-8")
                self._swap_in(tmp, final)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        except OSError as exc:
            raise StoreError(f"could not store {key.relpath} in {self.root}: {exc}") from exc
        return str(final)

    @staticmethod
    def _swap_in(tmp: Path, final: Path) -> None:
        # rename() cannot replace a non-empty folder: move the old run aside first, then drop it.
        old = None
        if final.exists():
            old = final.parent / f".old-{final.name}-{secrets.token_hex(4)}"
            os.rename(final, old)
        os.rename(tmp, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def load(self, key: RunKey) -> StoredRun | None:
        return self._read(key)

    def find(self, commits: Sequence[str], name: str) -> StoredRun | None:
        check_name(name)
        keys = [RunKey(commit, name) for commit in commits]  # validate all before reading any
        for key in keys:
            run = self._read(key)
            if run is not None:
                return run
        return None

    def history(self, name: str, limit: int = 20) -> list[StoredRun]:
        check_name(name)
        if limit <= 0 or not self.root.is_dir():
            return []
        runs = []
        for entry in self.root.iterdir():
            if not is_commit(entry.name):  # not a run folder (a README, a temp folder): skip
                continue
            run = self._read(RunKey(entry.name, name))
            if run is not None:
                runs.append(run)
        runs.sort(key=lambda run: (run.stored_at, run.key.commit), reverse=True)
        return runs[:limit]

    def _read(self, key: RunKey) -> StoredRun | None:
        path = self.root / key.commit / key.name
        if not path.is_dir():
            return None
        missing = [name for name in RUN_FILES if not (path / name).is_file()]
        if missing:
            raise StoreError(
                f"stored run {path} lacks {', '.join(missing)}; delete that folder or save the "
                "run again"
            )
        return StoredRun(key=key, path=path, stored_at=_stored_at(path))


def _stored_at(path: Path) -> str:
    try:
        text = (path / MARKER).read_text(encoding="utf-8").strip()
    except OSError:
        text = ""
    if text:
        return text
    # A run copied in by hand has no marker: its metadata's modification time is the best guess.
    return iso_utc((path / METADATA).stat().st_mtime)

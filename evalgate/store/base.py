"""The result-store interface: save a run under ``(commit, name)``, find it again later.

A *run* is a directory evalgate wrote (``outputs/evals/{name}/{run_id}/``); a store keeps its
three result files — never ``logs/`` — under a :class:`RunKey`. The baseline comparison asks a
store for the base branch's run (:meth:`ResultStore.find` over the merge-base and its ancestors),
the trend chart for the last runs of one name (:meth:`ResultStore.history`). Every backend
(a local folder, an orphan branch of the user's own repository, later Modal Volumes or the HF
Hub) implements the same four methods, and one contract test suite runs against all of them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from evalgate.errors import EvalgateError, ExitCode, UsageError
from evalgate.run.layout import RUN_FILES as _RUN_FILES

__all__ = [
    "RUN_FILES",
    "ResultStore",
    "RunKey",
    "StoreError",
    "StoredRun",
    "check_name",
    "is_commit",
    "iso_utc",
    "run_files",
    "utc_now",
]

# What a stored run holds (the run directory's own list). logs/ stay behind: large, noisy, and
# never compared.
RUN_FILES: tuple[str, ...] = _RUN_FILES

_SHA_RE = re.compile(r"[0-9a-f]{40}")
# A single path component that cannot climb (no "/", no leading "." so no ".." or ".tmp-…").
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_NAME_MAX = 200  # file systems cap a component at 255 bytes; keep room for temp-dir suffixes


class StoreError(EvalgateError):
    """A store could not be read or written: git missing, push rejected, corrupt data."""

    exit_code = ExitCode.INFRA


def check_name(name: str) -> str:
    """``name`` if it is a valid run folder name, else UsageError (it becomes a path component)."""
    if not isinstance(name, str) or len(name) > _NAME_MAX or not _NAME_RE.fullmatch(name):
        raise UsageError(
            f"invalid run name {name!r}: use letters, digits, '.', '_' and '-', "
            "starting with a letter or digit"
        )
    return name


def is_commit(text: str) -> bool:
    """Whether ``text`` is a full 40-hex SHA in lower case (how stores spell commits)."""
    return bool(_SHA_RE.fullmatch(text))


def _check_commit(commit: str) -> str:
    lowered = commit.lower() if isinstance(commit, str) else commit
    if not isinstance(lowered, str) or not is_commit(lowered):
        raise UsageError(
            f"invalid commit {commit!r}: pass the full 40-hex SHA (git rev-parse COMMIT)"
        )
    return lowered


@dataclass(frozen=True)
class RunKey:
    """One run of one benchmark × model at one commit; validated, so safe as path components."""

    commit: str  # full 40-hex SHA of the evaluated commit (normalised to lower case)
    name: str  # run folder name, e.g. "arith--HuggingFaceTB--SmolLM2-135M-Instruct"

    def __post_init__(self) -> None:
        object.__setattr__(self, "commit", _check_commit(self.commit))
        check_name(self.name)

    @property
    def relpath(self) -> str:
        """``{commit}/{name}``: where backends put the run below their root."""
        return f"{self.commit}/{self.name}"


@dataclass(frozen=True)
class StoredRun:
    """A run found in a store; ``path`` is a local folder holding the files of :data:`RUN_FILES`."""

    key: RunKey
    path: Path
    stored_at: str  # ISO-8601 UTC, e.g. "2025-01-31T12:00:00.123456Z"


class ResultStore(Protocol):
    """Where base-branch runs are kept between workflow runs."""

    def save(self, key: RunKey, run_dir: Path) -> str:
        """Store the run's result files under ``key`` (replacing any earlier run there).

        Returns a human-readable location for logs and the scorecard.
        """
        ...

    def load(self, key: RunKey) -> StoredRun | None:
        """The run stored under ``key``, or None."""
        ...

    def find(self, commits: Sequence[str], name: str) -> StoredRun | None:
        """The run ``name`` of the first commit, in the given order, that has one; else None.

        Callers pass the merge-base first, then its ancestors.
        """
        ...

    def history(self, name: str, limit: int = 20) -> list[StoredRun]:
        """Up to ``limit`` runs called ``name``, most recently stored first."""
        ...


def run_files(run_dir: Path) -> dict[str, Path]:
    """The result files of a run directory, checked to exist, by file name."""
    files = {name: Path(run_dir) / name for name in RUN_FILES}
    missing = [name for name, path in files.items() if not path.is_file()]
    if missing:
        raise StoreError(
            f"{run_dir} lacks {', '.join(missing)}: pass a run folder written by evalgate "
            "(outputs/evals/NAME/RUN_ID)"
        )
    return files


def iso_utc(timestamp: float) -> str:
    """A POSIX timestamp as ISO-8601 UTC with microseconds: fixed width, so strings sort."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def utc_now() -> str:
    """Now, as :func:`iso_utc` spells it (microseconds: runs stored in one second still sort)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

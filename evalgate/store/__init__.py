"""Result stores: where base-branch runs are kept so a pull request can be compared with them.

``open_store("local:PATH" | "git-branch[:BRANCH]", repo=...)`` picks a backend; every backend
implements :class:`ResultStore` (save / load / find / history) and passes the same contract tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from evalgate.errors import ConfigError
from evalgate.store.base import RUN_FILES, ResultStore, RunKey, StoredRun, StoreError
from evalgate.store.git_branch import DEFAULT_BRANCH, GitBranchStore
from evalgate.store.local_dir import LocalDirStore

__all__ = [
    "RUN_FILES",
    "STORE_SPECS",
    "GitBranchStore",
    "LocalDirStore",
    "ResultStore",
    "RunKey",
    "StoreError",
    "StoredRun",
    "open_store",
]

# Spelled as users write them. A Modal Volume or a Hugging Face Hub dataset repo fits the same
# protocol later ("modal-volume:NAME", "hf:OWNER/REPO"): add a class and a branch below.
STORE_SPECS = ("local:PATH", "git-branch[:BRANCH]")


def open_store(
    spec: str,
    *,
    repo: Path,
    environ: Mapping[str, str] | None = None,
    token: str | None = None,
    remote: str = "origin",
    cache_dir: Path | None = None,
) -> ResultStore:
    """The store a spec names. A relative ``local:`` path is taken relative to ``repo``."""
    kind, sep, arg = spec.strip().partition(":")
    if kind == "local":
        if not arg:
            raise ConfigError(f"result store {spec!r} needs a folder: local:PATH")
        path = Path(arg).expanduser()
        return LocalDirStore(path if path.is_absolute() else Path(repo) / path)
    if kind == "git-branch":
        if sep and not arg:
            raise ConfigError(f"result store {spec!r} needs a branch after ':' (or drop the ':')")
        return GitBranchStore(
            Path(repo),
            branch=arg or DEFAULT_BRANCH,
            remote=remote,
            cache_dir=cache_dir,
            environ=environ,
            token=token,
        )
    raise ConfigError(f"unknown result store {spec!r}; known: {', '.join(STORE_SPECS)}")

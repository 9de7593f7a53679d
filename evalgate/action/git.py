"""The few git questions the Action asks of the checked-out repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["GitFailed", "ancestors", "git", "merge_base", "show_file"]


class GitFailed(Exception):
    pass


def git(repo: Path, *args: str, timeout: float = 120.0) -> str:
    """Run git in ``repo``; GitFailed carries git's first stderr line."""
    try:
        proc = subprocess.run(
            ["git", "-C", str(repo), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={
                "GIT_TERMINAL_PROMPT": "0",
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                # In a container action the workspace belongs to the runner's user, not ours:
                # without this git refuses it as "dubious ownership".
                "GIT_CONFIG_COUNT": "1",
                "GIT_CONFIG_KEY_0": "safe.directory",
                "GIT_CONFIG_VALUE_0": "*",
            },
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitFailed(f"git {args[0]}: {exc}") from None
    if proc.returncode != 0:
        first = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[0]
        raise GitFailed(f"git {args[0]}: {first}")
    return proc.stdout


def _have(repo: Path, sha: str) -> bool:
    try:
        git(repo, "cat-file", "-e", f"{sha}^{{commit}}")
        return True
    except GitFailed:
        return False


def _ensure(repo: Path, sha: str) -> None:
    """actions/checkout fetches one commit by default: fetch the one we need, shallowly."""
    if not _have(repo, sha):
        git(repo, "fetch", "--no-tags", "--depth=50", "origin", sha)


def merge_base(repo: Path, base: str, head: str) -> str:
    """The PR's merge-base (where its branch left the base); the base tip when unknowable."""
    try:
        _ensure(repo, base)
        _ensure(repo, head)
        return git(repo, "merge-base", base, head).strip() or base
    except GitFailed:
        return base


def ancestors(repo: Path, sha: str, count: int = 20) -> list[str]:
    """``sha`` and its first-parent ancestors, newest first (as far as history is present)."""
    try:
        out = git(repo, "rev-list", "--first-parent", f"--max-count={count}", sha)
    except GitFailed:
        return [sha]
    return out.split() or [sha]


def show_file(repo: Path, sha: str, path: str) -> str | None:
    """A file's text at a commit (path relative to ``repo``), or None if absent there."""
    try:
        _ensure(repo, sha)
        return git(repo, "show", f"{sha}:./{path}")
    except GitFailed:
        return None

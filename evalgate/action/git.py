"""The few git questions the Action asks of the checked-out repository.

Git runs through :class:`evalgate._git.Git`, as the result store's does: the same environment,
the same ``safe.directory`` for a checkout owned by the runner's user, the same masking.
"""

from __future__ import annotations

from pathlib import Path

from evalgate._git import Git, GitFailed
from evalgate.errors import InfraError

__all__ = [
    "GitFailed",
    "ancestors",
    "ensure_commit",
    "git",
    "merge_base",
    "show_file",
]


def git(repo: Path, *args: str, timeout: float = 120.0) -> str:
    """Run git in ``repo``; GitFailed carries git's first error line."""
    try:
        return Git(repo, timeout=timeout).run(*args)
    except InfraError as exc:  # git missing or too slow: callers fall back as on any failure
        raise GitFailed(args, -1, "", str(exc)) from exc


def _have(repo: Path, sha: str) -> bool:
    try:
        git(repo, "cat-file", "-e", f"{sha}^{{commit}}")
        return True
    except GitFailed:
        return False


def ensure_commit(repo: Path, sha: str, token: str | None = None) -> None:
    """actions/checkout fetches one commit by default: fetch the one we need.

    As the store fetches: with ``token`` as a header when given (else the credentials
    actions/checkout persisted), and from a local remote whoever owns it."""
    if _have(repo, sha):
        return
    fetcher = Git(repo, token=token)
    try:
        # Shallowly only into a shallow clone: --depth would make a full clone shallow.
        shallow = fetcher.run("rev-parse", "--is-shallow-repository").strip() == "true"
        depth = ["--depth=50"] if shallow else []
        fetcher.use_remote("origin")
        fetcher.run("fetch", *fetcher.pack_args("fetch"), "--no-tags", *depth, "origin", sha)
    except InfraError as exc:
        raise GitFailed(("fetch",), -1, "", str(exc)) from exc


def merge_base(repo: Path, base: str, head: str, *, token: str | None = None) -> str:
    """The PR's merge-base (where its branch left the base). When git cannot answer, an
    :class:`InfraError`: the base tip instead would compare the PR with commits it never saw
    (a baseline that moved on since the branch left it), and say nothing."""
    try:
        ensure_commit(repo, base, token)
        ensure_commit(repo, head, token)
        try:
            found = git(repo, "merge-base", base, head).strip()
        except GitFailed:
            # actions/checkout's depth-1 clone holds no history to meet in: fetch it, once.
            if not _unshallow(repo, base, head, token):
                raise
            found = git(repo, "merge-base", base, head).strip()
    except GitFailed as exc:
        raise InfraError(
            f"cannot find where this PR left the base branch (git merge-base {base[:12]} "
            f"{head[:12]}: {exc}); the baseline cannot be chosen",
            hint="check out with `fetch-depth: 0`, or make both commits fetchable",
        ) from exc
    if not found:
        raise InfraError(f"the PR's head {head[:12]} shares no history with the base {base[:12]}")
    return found


def _unshallow(repo: Path, base: str, head: str, token: str | None) -> bool:
    """Fetch the full history of ``base`` and ``head`` into a shallow clone; False when the
    clone is not shallow (then more history would not help)."""
    fetcher = Git(repo, token=token)
    try:
        if fetcher.run("rev-parse", "--is-shallow-repository").strip() != "true":
            return False
        fetcher.use_remote("origin")
        fetcher.run("fetch", *fetcher.pack_args("fetch"), "--no-tags", "--unshallow", "origin",
                    base, head)  # fmt: skip
    except InfraError as exc:
        raise GitFailed(("fetch",), -1, "", str(exc)) from exc
    return True


def ancestors(repo: Path, sha: str, count: int = 20) -> list[str]:
    """``sha`` and its first-parent ancestors, newest first (as far as history is present)."""
    try:
        out = git(repo, "rev-list", "--first-parent", f"--max-count={count}", sha)
    except GitFailed:
        return [sha]
    return out.split() or [sha]


def show_file(repo: Path, sha: str, path: str, *, token: str | None = None) -> str | None:
    """A file's text at a commit (path relative to ``repo``), or None if absent there."""
    try:
        ensure_commit(repo, sha, token)
        return git(repo, "show", f"{sha}:./{path}")
    except GitFailed:
        return None

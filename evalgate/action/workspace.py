"""Leave the runner's checkout as it was found: nothing in it owned by root afterwards.

GitHub runs a docker action as root, with the workspace bind-mounted from the runner, where it
belongs to the runner's user (uid 1001 on hosted runners). Whatever the Action writes there as
root — git objects, the store's private ref and cache under ``.git``, a shallow file or
``.git/worktrees`` from a baseline re-run, ``evalgate-outputs/`` — would otherwise stay
root-owned, and the job's later steps, running as the runner's user, fail on it (``git fetch``:
"Permission denied"; ``git clean``, actions/checkout's cleanup of the next job).

One mechanism covers every writer, present and future: when running as root on a workspace
another user owns, :func:`restoring_ownership` notes the paths already root-owned before the run
and, when the run ends (however it ends), gives every other root-owned path in the workspace to
the workspace's owner. A scratch clone for the store alone would not do: the run's outputs and
the Action's own git calls write into the checkout too. Not root, or a workspace root owns: there
is nothing to restore and nothing is walked.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

__all__ = ["leaves_workspace_as_found", "restoring_ownership"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _foreign_owner(root: Path) -> tuple[int, int] | None:
    """(uid, gid) of ``root`` when we run as root and someone else owns it, else None."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None  # only root can create files another user cannot remove
    try:
        info = root.stat()
    except OSError:
        return None
    return None if info.st_uid == 0 else (info.st_uid, info.st_gid)


def _root_owned(root: Path) -> Iterator[str]:
    """Every path under ``root`` (not following symlinks) that root owns."""
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            path = os.path.join(folder, name)
            with contextlib.suppress(OSError):  # removed while we looked: nothing to restore
                if os.lstat(path).st_uid == 0:
                    yield path


@contextlib.contextmanager
def restoring_ownership(*folders: str | os.PathLike[str] | None) -> Iterator[None]:
    """Give what the body creates as root under each folder to that folder's owner."""
    roots = {}
    for folder in folders:
        if folder:
            root = Path(os.path.realpath(folder))
            owner = _foreign_owner(root)
            if owner is not None:
                roots[root] = owner
    # Not ours to change: what root owned before we started.
    before = {path for root in roots for path in _root_owned(root)}
    try:
        yield
    finally:
        for root, (uid, gid) in roots.items():
            for path in _root_owned(root):
                if path not in before:
                    with contextlib.suppress(OSError):
                        os.chown(path, uid, gid, follow_symlinks=False)


def leaves_workspace_as_found(
    func: Callable[Concatenate[Mapping[str, str], _P], _R],
) -> Callable[Concatenate[Mapping[str, str], _P], _R]:
    """Decorate an entry point whose first argument is the environment.

    Besides the workspace, the runner mounts the job's home (``HOME``, ``/github/home``) and
    temporary folder (``RUNNER_TEMP``) into a container action, and removes them as its own user
    when the job ends: they get the same treatment when another user owns them.
    """

    @functools.wraps(func)
    def wrapper(environ: Mapping[str, str], *args: _P.args, **kwargs: _P.kwargs) -> _R:
        folders = [environ.get(name) for name in ("GITHUB_WORKSPACE", "HOME", "RUNNER_TEMP")]
        with restoring_ownership(*folders):
            return func(environ, *args, **kwargs)

    return wrapper

"""Reading a file of an uploaded artifact, which code under test wrote: never through a link.

Publish mode runs with a write token on files a pull request's job produced. A symlink there
(``scorecard.md -> /proc/self/environ``) would make it read, and post, this job's own secrets; a
FIFO would hang it; a huge file would exhaust it. So each file is opened with ``O_NOFOLLOW``
(no link in the last component), the folder holding it must not be a link either, and only a
regular file of bounded size is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from evalgate.errors import UsageError

__all__ = ["MAX_ARTIFACT_BYTES", "read_artifact_text"]

MAX_ARTIFACT_BYTES = 8 * 1024 * 1024


def read_artifact_text(path: Path, *, what: str, limit: int = MAX_ARTIFACT_BYTES) -> str:
    """The text of ``path``; :class:`UsageError` for a link, a non-file, a missing or huge file."""
    path = Path(path)
    if path.parent.is_symlink():
        raise UsageError(f"{path.parent}: the artifact's folder is a symlink; not followed")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UsageError(
            f"{path}: missing ({what}); download the run's artifact there first"
        ) from None
    except OSError as exc:
        if path.is_symlink():
            raise UsageError(
                f"{path}: is a symlink ({what}); an artifact's files are never followed"
            ) from None
        raise UsageError(f"{path}: unreadable ({what}): {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{path}: not a regular file ({what})")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise UsageError(f"{path}: larger than {limit} bytes ({what}); refusing to read it")
    return data.decode("utf-8", errors="replace")

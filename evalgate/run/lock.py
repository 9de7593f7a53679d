"""One process per run directory: an advisory lock the kernel releases when its holder dies.

Two processes appending to one journal (two ``evalgate resume`` of one run, or a resume while
the run itself still goes on) each run every missing pair: twice the requests, duplicate lines.
``fcntl.flock`` on ``.lock`` in the run directory keeps the second out; it is tied to the open
file, so a holder killed with -9 leaves no stale lock behind (a pid file would). The holder's pid
is written into the file, only to name it in the refusal.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from evalgate.errors import UsageError

__all__ = ["lock_run", "unlock_run"]

LOCK_NAME = ".lock"
_HELD: dict[Path, int] = {}  # run directory → the open lock file (this process holds it)


def lock_run(run_dir: Path) -> None:
    """Hold ``run_dir`` for this process (again: a no-op); UsageError when another holds it."""
    key = Path(run_dir).resolve()
    if key in _HELD:
        return
    fd = os.open(key / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode("ascii", "replace").strip() or "?"
        os.close(fd)
        raise UsageError(
            f"{run_dir}: another evalgate (pid {holder}) is running this run; wait for it to "
            "finish or stop it, then resume"
        ) from None
    except OSError:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    _HELD[key] = fd


def unlock_run(run_dir: Path) -> None:
    fd = _HELD.pop(Path(run_dir).resolve(), None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)  # closing the last descriptor releases the flock

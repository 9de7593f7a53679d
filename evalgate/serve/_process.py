"""Stopping a server that runs in its own process group — the same way for every backend — and
making sure it cannot outlive the evalgate that started it."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

__all__ = ["die_with_parent", "spawn_group", "stop_group"]

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel SIGKILL the child when evalgate dies, however it dies
    (kill -9 and OOM included, where no ``finally`` runs): a server left behind keeps its port,
    its memory and its GPU. Linux only (prctl); None elsewhere, where ``stop_group`` at exit is
    all there is."""
    if not sys.platform.startswith("linux"):
        return None
    parent = os.getpid()
    libc = ctypes.CDLL(None, use_errno=True)  # loaded here: the child must not import

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # evalgate died before the prctl took hold
            os._exit(1)

    return preexec


def spawn_group(
    argv: list[str],
    log_path: Path,
    *,
    env: Mapping[str, str],
    preexec_fn: Callable[[], None] | None,
    cwd: Path | None = None,
    note: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start a server in its own process group (so :func:`stop_group` reaches the workers it
    forks), its output appended to ``log_path`` after the line ``note``, with no stdin.
    ``preexec_fn``: :func:`die_with_parent`, or one that also calls it."""
    with log_path.open("ab") as log:
        if note is not None:
            log.write(f"{note}\n".encode())
            log.flush()
        return subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=preexec_fn,
            env=env,
            cwd=cwd,
        )


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_group(proc: subprocess.Popen[bytes] | None, *, grace_s: float = 5.0) -> None:
    """SIGTERM the group and wait ``grace_s`` (servers shut down cleanly), then always SIGKILL
    the group: the leader may be gone while a worker it forked (uvicorn workers, vLLM's GPU
    processes) is not. Returns once the kernel has reaped the group, so the port (or GPU) is
    free for whatever comes next."""
    if proc is None:
        return
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and _group_alive(proc.pid):
        time.sleep(0.05)

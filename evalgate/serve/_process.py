"""Stopping a server that runs in its own process group — the same way for every backend."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

__all__ = ["stop_group"]


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

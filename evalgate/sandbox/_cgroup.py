"""Cgroups for the local (bubblewrap) sandbox, when this process may create them.

cgroup v2 under a delegated subtree, or cgroup v1 per controller (as root). Where neither is
possible (the usual case inside a Docker container), the sandbox's supervisor accounts for the
sandbox's memory itself (``_sandboxd.py``) and the CPU share is reported as not enforced.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evalgate.sandbox.base import SandboxConfig

__all__ = ["Cgroup"]


@functools.cache
def _sweep(parent: Path) -> None:
    """Once per process and parent: remove the cgroups of evalgate processes that died."""
    for path in parent.glob("evalgate-*-*"):
        pid = path.name.split("-")[1]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            with contextlib.suppress(OSError):
                path.rmdir()  # empty once its processes are gone


class Cgroup:
    """One sandbox's cgroup(s): v2 under a delegated subtree, or v1 per controller (as root)."""

    def __init__(self, dirs: list[Path]) -> None:
        self.dirs = dirs

    @classmethod
    def create(cls, name: str, config: SandboxConfig) -> Cgroup | None:
        """``evalgate-PID-name`` under our own cgroup(s), or None where we may not."""
        try:
            found = cls._v2(f"evalgate-{os.getpid()}-{name}", config) or cls._v1(
                f"evalgate-{os.getpid()}-{name}", config
            )
        except OSError:
            return None
        for path in found.dirs if found is not None else ():
            _sweep(path.parent)
        return found

    @staticmethod
    def _own(controller: str) -> str | None:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, ctrls, path = line.split(":", 2)
            if controller in ctrls.split(",") or (controller == "" and ctrls == ""):
                return path
        return None

    @classmethod
    def _v2(cls, name: str, config: SandboxConfig) -> Cgroup | None:
        root = Path("/sys/fs/cgroup")
        own = cls._own("")
        if own is None or not (root / "cgroup.controllers").exists():
            return None
        parent = root / own.lstrip("/")
        enabled = (parent / "cgroup.subtree_control").read_text().split()
        if not {"memory", "pids"} <= set(enabled) or not os.access(parent, os.W_OK):
            return None  # not delegated to us: enabling controllers here is not ours to do
        path = parent / name
        path.mkdir()
        cg = cls([path])
        limits = {
            "memory.max": str(config.memory_mb << 20),
            "memory.swap.max": "0",
            "pids.max": str(config.pids),
        }
        if "cpu" in enabled:
            limits["cpu.max"] = f"{int(config.cpus * 100_000)} 100000"
        for key, value in limits.items():
            with contextlib.suppress(FileNotFoundError):
                (path / key).write_text(value)
        return cg

    @classmethod
    def _v1(cls, name: str, config: SandboxConfig) -> Cgroup | None:
        limits = {
            "memory": {"memory.limit_in_bytes": str(config.memory_mb << 20)},
            "pids": {"pids.max": str(config.pids)},
            "cpu": {
                "cpu.cfs_period_us": "100000",
                "cpu.cfs_quota_us": str(int(config.cpus * 100_000)),
            },
        }
        dirs = []
        for controller, values in limits.items():
            base = Path("/sys/fs/cgroup", controller)
            own = cls._own(controller)
            if own is None or not (base / "tasks").exists():
                continue
            parent = base / own.lstrip("/")
            if not os.access(parent, os.W_OK):
                continue
            path = parent / name
            path.mkdir()
            dirs.append(path)
            for key, value in values.items():
                (path / key).write_text(value)
        return cls(dirs) if dirs else None

    def add(self, pid: int) -> None:
        for d in self.dirs:
            (d / "cgroup.procs").write_text(str(pid))

    @property
    def kinds(self) -> set[str]:
        out = set()
        for d in self.dirs:
            names = os.listdir(d)
            for prefix in ("memory", "pids", "cpu"):
                if any(n.startswith(prefix + ".") for n in names):
                    out.add(prefix)
        return out

    async def remove(self) -> None:
        for d in self.dirs:
            for _ in range(50):  # the namespace's processes exit asynchronously
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    await asyncio.sleep(0.02)

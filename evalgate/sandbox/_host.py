"""What this machine offers the bubblewrap sandbox, probed once per process.

The bwrap binary and its version, the interpreter the supervisor runs under, whether bwrap can
drop to ``nobody`` (as root), the generated ``/etc`` files, and the execute-only shell a task's
check runs under.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

__all__ = ["GUARD_SHELL", "SANDBOX_UID", "reachable_source", "system_binds"]

SANDBOX_UID = 1000
_DROP_UID = 65534  # when evalgate runs as root, bwrap runs as nobody


@functools.cache
def _bwrap() -> tuple[str, tuple[int, ...]] | None:
    path = shutil.which("bwrap")
    if path is None:
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out.stdout)
    version = tuple(int(x) for x in found.groups() if x) if found else (0,)
    return path, version


def _reachable_by_others(path: str) -> bool:
    """Whether a user with no special relation to ``path`` can reach and read it."""
    try:
        parts = os.path.realpath(path).split("/")
        for i in range(2, len(parts) + 1):
            mode = os.stat("/".join(parts[:i]) or "/").st_mode
            last = i == len(parts)
            need = (0o004 | (0o001 if stat.S_ISDIR(mode) else 0)) if last else 0o001
            if mode & need != need:
                return False
    except OSError:
        return False
    return True


def reachable_source(path: str) -> str:
    """``path``, or (evalgate as root, ``path`` not reachable by others) a reachable copy of it.

    As root, bwrap drops to nobody only when nobody can reach every source it binds; a source
    under a private folder (a 0700 home, pytest's temporary folders) would otherwise keep bwrap
    running as host root. The copy (made once per process and source state, removed at exit)
    is readable by all, as the sandbox needs it to be anyway.
    """
    if os.geteuid() != 0 or _reachable_by_others(path):
        return path
    try:
        st = os.stat(path)
    except OSError:
        return path  # bwrap names the missing source
    return _staged(os.path.realpath(path), st.st_mtime_ns, st.st_size)


@functools.cache
def _staged(path: str, _mtime_ns: int, _size: int) -> str:
    folder = tempfile.mkdtemp(prefix="evalgate-mount-")
    os.chmod(folder, 0o755)
    import atexit

    atexit.register(shutil.rmtree, folder, True)
    dest = os.path.join(folder, os.path.basename(path.rstrip("/")) or "mount")
    if os.path.isdir(path):
        shutil.copytree(path, dest, symlinks=True)
        entries = [dest] + [os.path.join(r, n) for r, ds, fs in os.walk(dest) for n in ds + fs]
    else:
        shutil.copy2(path, dest)
        entries = [dest]
    for entry in entries:
        st = os.lstat(entry)
        if not stat.S_ISLNK(st.st_mode):  # a+rX, as `chmod -R a+rX`
            execute = 0o111 if stat.S_ISDIR(st.st_mode) or st.st_mode & 0o111 else 0
            os.chmod(entry, stat.S_IMODE(st.st_mode) | 0o444 | execute)
    return dest


def _drop_prefix(sources: list[str]) -> list[str]:
    """As root, run bwrap as nobody: unprivileged namespaces, no host-root file access.

    Only when every host path bound into the sandbox is reachable by nobody; otherwise bwrap
    runs as root, whose privileged mode still gives the sandbox no capabilities at all (only
    its files are checked against uid 0).
    """
    if os.geteuid() != 0 or not all(_reachable_by_others(src) for src in sources):
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return []
    return [setpriv, f"--reuid={_DROP_UID}", f"--regid={_DROP_UID}", "--clear-groups", "--"]


@functools.cache
def _python() -> tuple[str, str | None, tuple[tuple[str, str], ...]]:
    """The sandbox's python3: (path inside, host folder to mount at /opt/python, extra env).

    The system's /usr/bin/python3 when there is one (it is inside /usr anyway); else the
    interpreter running evalgate, mounted read-only at /opt/python.
    """
    if os.path.exists("/usr/bin/python3"):
        return "/usr/bin/python3", None, ()
    exe = f"python{sys.version_info.major}.{sys.version_info.minor}"
    env = (("LD_LIBRARY_PATH", "/opt/python/lib"),)  # for a shared libpython with a fixed RUNPATH
    return f"/opt/python/bin/{exe}", sys.base_prefix, env


GUARD_SHELL = "/opt/evalgate/guard/sh"
_GUARD_OWNER = 1  # neither root nor the sandbox's host user (nobody, or root when privileged)


@functools.cache
def _guard_shell() -> str | None:
    """An execute-only copy of /bin/sh, owned by another user (evalgate as root only).

    A process that runs a binary it cannot read is not dumpable (execve), so other processes of
    the same user (the agent's code a check runs) can neither ptrace it nor open its
    /proc/PID/mem to forge its exit status. Not as another user: we cannot chown.
    """
    if os.geteuid() != 0:
        return None
    folder = tempfile.mkdtemp(prefix="evalgate-guard-")
    os.chmod(folder, 0o755)
    path = os.path.join(folder, "sh")
    shutil.copyfile(os.path.realpath("/bin/sh"), path)
    os.chown(path, _GUARD_OWNER, _GUARD_OWNER)
    os.chmod(path, 0o711)
    import atexit

    atexit.register(shutil.rmtree, folder, True)
    return path


@functools.cache
def _etc_dir() -> str:
    """passwd, group and hosts for every sandbox of this process (removed at exit)."""
    path = tempfile.mkdtemp(prefix="evalgate-etc-")
    os.chmod(path, 0o755)
    files = {
        "passwd": f"root:x:0:0::/:/bin/sh\nsandbox:x:{SANDBOX_UID}:{SANDBOX_UID}::/tmp:/bin/sh\n"
        "nobody:x:65534:65534::/nonexistent:/bin/false\n",
        "group": f"root:x:0:\nsandbox:x:{SANDBOX_UID}:\nnogroup:x:65534:\n",
        "hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
    }
    for name, text in files.items():
        Path(path, name).write_text(text, encoding="utf-8")
        os.chmod(Path(path, name), 0o644)
    import atexit

    atexit.register(shutil.rmtree, path, True)
    return path


def system_binds(etc: Iterable[str], made: Iterable[str]) -> list[str]:
    """bwrap arguments for the system a sandboxed program runs on: ``/usr`` read-only, the
    ``/bin``, ``/lib``… links or folders, the host's ``/etc`` files named in ``etc`` (where
    present), and the generated ones named in ``made`` (passwd, group, hosts: no host
    accounts). One list for the agent sandbox and the repository-code jail."""
    a = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = f"/{name}"
        if os.path.islink(host):
            a += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            a += ["--ro-bind", host, host]
    for name in etc:
        a += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    generated = _etc_dir()
    for name in made:
        a += ["--ro-bind", f"{generated}/{name}", f"/etc/{name}"]
    return a

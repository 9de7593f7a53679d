"""Reading a file the config names on this machine, for a prompt or a sandbox: the one helper.

Skills (``skills_dir``'s ``*.md``), an MCP config, a chat template: their text goes to a model
or into an agent's sandbox. A repository can make any of them a symlink (to ``~/.ssh/id_rsa``,
``/proc/self/environ``, ``/dev/zero``), so each file is checked on its own, not only its folder:
every link resolved, the real path inside the repository, a regular file (no device, FIFO or
``/proc`` entry), opened with ``O_NOFOLLOW`` on that real path and read up to a cap. This holds
in ``local`` mode as in the Action.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from evalgate.errors import ConfigError

__all__ = ["MAX_PROMPT_FILE", "check_host_path", "read_host_file", "repository_root"]

# A skill, an MCP config or a template is text a person wrote: 1 MiB is far above any.
MAX_PROMPT_FILE = 1 << 20

# Kernel interfaces, not files: their "contents" are this process's environment, memory, devices.
_SPECIAL = ("/proc", "/sys", "/dev")


def repository_root(path: str | Path) -> Path:
    """The repository ``path`` lies in: the nearest folder above it (or itself) holding
    ``.git``; without one, ``path`` itself when it is a folder, else its folder."""
    start = Path(os.path.abspath(os.path.expanduser(path)))
    for folder in (start, *start.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return start if start.is_dir() else start.parent


def _inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def check_host_path(path: str | Path, *, root: str | Path, what: str) -> Path:
    """The real path of ``path`` (every link resolved), refused in one line when it leaves
    ``root`` or is a kernel interface (``/proc``, ``/sys``, ``/dev``)."""
    real = os.path.realpath(os.path.expanduser(path))
    top = os.path.realpath(root)
    if any(_inside(real, special) for special in _SPECIAL) or not _inside(real, top):
        raise ConfigError(
            f"{what}: {path} is outside the repository (resolves to {real}, not under {top}); "
            "files read for prompts and sandboxes must stay inside it"
        )
    return Path(real)


def read_host_file(
    path: str | Path, *, root: str | Path, what: str, max_bytes: int = MAX_PROMPT_FILE
) -> str:
    """The text of ``path``, checked as :func:`check_host_path` says, a regular file opened
    without following a link, and at most ``max_bytes`` long (else refused: never read whole)."""
    real = check_host_path(path, root=root, what=what)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        raise ConfigError(f"{what}: cannot open {path} ({exc.strerror})") from exc
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise ConfigError(f"{what}: {path} is not a regular file; refused")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ConfigError(
            f"{what}: {path} is over {max_bytes // 1024} KiB; refused (it is read into a prompt)"
        )
    return data.decode("utf-8", errors="replace")

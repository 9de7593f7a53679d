"""How code from the repository runs on this machine: inspect task files, verifiers environments.

That code is often the pull request's own, and the gate's process holds the runner's token
(``GITHUB_TOKEN``, the Action's ``INPUT_*``), the Actions runtime's tokens and the keys of the
models it serves. So such a process gets:

- **a cleared environment** (:func:`repo_env`): what any program needs to run (``PATH``,
  ``HOME``, locale, temporary folder, CA bundles, proxies, cache folders), what its runner
  strictly needs (the model-under-test's endpoint key, passed by the caller), and the variables
  its benchmark declares in ``pass_env``; nothing else, whatever its name;
- **no way into the gate's memory** (:func:`spawn_options`): the gate makes itself non-dumpable
  (``prctl(PR_SET_DUMPABLE, 0)``), so a process of its uid cannot open its ``/proc/PID/environ``
  or ``mem``; and where the gate runs as root — where ``CAP_SYS_PTRACE`` would override that —
  the child starts with root's file access only (every other capability leaves the bounding set;
  inheritable and ambient sets cleared; no new privileges): the kernel then refuses it the gate's
  ``/proc`` files, which need a superset of the gate's capabilities.

Not covered here: other processes of the same uid that are dumpable (the Actions runner itself,
outside a container action), the machine's files, what the code leaves running. The inspect
runner and the verifiers worker therefore also run in a bubblewrap jail
(:mod:`evalgate.sandbox.worker`: no capabilities, only the files they need, their own pid
namespace); these options are what its fallback keeps where bubblewrap cannot run.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import TypedDict

__all__ = ["NEEDED", "RESERVED", "SpawnOptions", "protect_gate", "repo_env", "spawn_options"]

# What a program needs to start and to reach the model under test: no credentials among them.
NEEDED = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "XDG_CACHE_HOME",
    "HF_HOME",
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
)
# Prefixes a benchmark may not declare: the runner's token and inputs, the Actions runtime.
RESERVED = ("GITHUB_", "INPUT_", "ACTIONS_", "RUNNER_")

_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAP_VERSION_3 = 0x20080522
# Kept by a root gate's children: CHOWN, DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER, the file access
# root had (a container action's HOME belongs to the runner's uid; a dataset cache is written
# there). Any capability fewer than the gate's already closes its /proc files: the kernel lets a
# process read another's only with a superset of its capabilities, or CAP_SYS_PTRACE.
_FILE_CAPS = frozenset({0, 1, 2, 3})


def repo_env(
    declared: Iterable[str] = (),
    runner: Mapping[str, str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of repository code: ``NEEDED`` and the ``declared`` names that are set
    in ``environ`` (default: this process's), then ``runner`` (what the runner itself needs)."""
    source = os.environ if environ is None else environ
    env = {k: source[k] for k in (*NEEDED, *declared) if k in source and not k.startswith(RESERVED)}
    env.update(runner or {})
    return env


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def protect_gate() -> None:
    """Make this process non-dumpable: a process of the same uid can no longer read its
    ``/proc/PID/environ`` or memory. Idempotent; a no-op off Linux."""
    if sys.platform.startswith("linux"):
        _libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _drop_capabilities(libc: ctypes.CDLL) -> Callable[[], None]:
    """A ``preexec_fn`` that leaves the child of a root gate only ``_FILE_CAPS`` after its
    exec. Everything is allocated before the fork: the child only makes system calls."""
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    caps = range(64)

    def drop() -> None:
        libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
        for cap in caps:  # past the kernel's last capability this fails (EINVAL): harmless
            if cap not in _FILE_CAPS:
                libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
        if libc.capget(ctypes.byref(header), data) == 0:
            data[0].inheritable = data[1].inheritable = 0
            libc.capset(ctypes.byref(header), data)

    return drop


class SpawnOptions(TypedDict, total=False):
    """What :func:`spawn_options` may set."""

    preexec_fn: Callable[[], None]


def spawn_options() -> SpawnOptions:
    """Keyword arguments for ``subprocess.Popen`` / ``asyncio.create_subprocess_exec`` that
    start repository code: the gate protected first, and a root gate's child stripped of its
    capabilities."""
    if not sys.platform.startswith("linux"):
        return {}
    protect_gate()
    if os.geteuid() != 0:
        return {}
    return {"preexec_fn": _drop_capabilities(_libc())}

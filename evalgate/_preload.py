"""aiohttp imported on a second thread while the main one reads the config (issue #36).

Importing aiohttp builds its two default TLS contexts, each loading the system's CA bundle: about
a tenth of a 1-item run, spent in OpenSSL with the GIL released. On a thread that starts with a
command that sends requests, that work overlaps the main thread's imports (pydantic, the config
schema) on the other core; the main thread's own ``import aiohttp`` (``evalgate.serve.client``)
then waits for the module the thread is finishing, or finds it done.

Two threads importing at once can deadlock on CPython's per-module import locks (3.11 raises
``_DeadlockError`` in one of them) only when each holds a module the other waits for. Here the
second thread takes no module lock but aiohttp's own: aiohttp's other dependencies are imported
first, on the main thread, and a finder turns away any module outside ``aiohttp`` the thread
would still import (a dependency of another aiohttp release, an optional extra): the thread gives
up, its half-imported modules are dropped as after any failed import, and the main thread imports
aiohttp itself, as it did before. (The thread does take a module's lock before its finder turns
the module away: a wait on the main thread there could only close a cycle if that module's import
imported aiohttp, which aiohttp's dependencies do not.) The main thread holds no ``aiohttp`` lock
the thread needs unless it imports aiohttp itself, and then it waits for the thread.
tests/test_startup.py checks that the thread imports aiohttp whole on the installed release.

The thread is started only when a core is free for it (:func:`a_core_is_free`): its gain is the
TLS work done beside the main thread (~40-50 ms on an idle 2-core machine); on a busy one the
GIL's hand-overs between the two threads wait on the scheduler and cost more than that.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

__all__ = ["AIOHTTP_NEEDS", "a_core_is_free", "import_aiohttp_in_background", "importing"]

# What `import aiohttp` (the client: not aiohttp.web) imports outside its own package, by the
# names it imports them under; their own imports come with them.
AIOHTTP_NEEDS = (
    "asyncio",
    "attr",
    "aiohappyeyeballs",
    "aiosignal",
    "base64",
    "concurrent.futures",
    "email.message",
    "email.parser",
    "email.policy",
    "email.utils",
    "frozenlist",
    "hashlib",
    "http.cookies",
    "json",
    "mimetypes",
    "multidict",
    "netrc",
    "pickle",
    "platform",
    "propcache.api",
    "socket",
    "ssl",
    "typing_extensions",
    "urllib.request",
    "uuid",
    "yarl",
)


class _Outside(Exception):
    """The thread was about to import a module outside aiohttp: it stops there. Not an
    ImportError, which aiohttp catches around its optional imports (ssl among them)."""


class _OnlyAiohttp:
    """A finder, first on ``sys.meta_path``, that lets the thread ``owner`` import only aiohttp's
    own modules (and fail to find ones that are not installed, as aiohttp's optional imports
    expect); any other thread, or the owner once done, passes through untouched."""

    def __init__(self) -> None:
        self.owner: int | None = None

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if threading.get_ident() != self.owner or name.partition(".")[0] == "aiohttp":
            return None
        finders = sys.meta_path[sys.meta_path.index(self) + 1 :]
        if any(finder.find_spec(name, path, target) for finder in finders):
            raise _Outside(name)
        return None  # not installed: the ModuleNotFoundError the import expects


_thread: threading.Thread | None = None


def importing() -> threading.Thread | None:
    """The thread, while it is still importing (an exit need not wait for it)."""
    return _thread if _thread is not None and _thread.is_alive() else None


# While the thread imports, the interpreter hands the GIL over every 50 ms instead of 5 ms (it
# still does at each of the main thread's file reads): its import is the same work either way,
# and each hand-over costs both threads a wake-up.
_SWITCH_INTERVAL_S = 0.05


def _import(guard: _OnlyAiohttp, interval: float) -> None:
    guard.owner = threading.get_ident()
    try:
        # Whatever stops it (_Outside, a broken install), the main thread imports it again and
        # meets the same error there, where it is reported.
        with contextlib.suppress(BaseException):
            importlib.import_module("aiohttp")
    finally:
        guard.owner = None
        # A new list, as when it was put first: an import on the main thread may be iterating
        # over the one it replaces.
        sys.meta_path = [finder for finder in sys.meta_path if finder is not guard]
        sys.setswitchinterval(interval)


def a_core_is_free() -> bool:
    """Whether, right now, a core is free for the thread (Linux: the tasks running or waiting to
    run, from /proc/loadavg; elsewhere the last minute's load average). The thread only pays
    beside the main one: on a busy machine each hand-over of the GIL waits for the scheduler,
    and a 1-item run took ~60-110 ms longer with it than without (load 2.5-3 on 2 cores)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    if cpus < 2:
        return False
    running = _running_tasks()
    if running is None:
        try:
            return os.getloadavg()[0] < cpus - 1
        except OSError:
            return False
    return running < cpus  # this process's running thread is one of them


def _running_tasks() -> int | None:
    """The tasks running or waiting to run now, this thread among them (Linux)."""
    try:
        with open("/proc/loadavg", "rb") as stat:  # "0.52 0.58 0.59 RUNNING/TASKS LAST_PID"
            return int(stat.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return None


def import_aiohttp_in_background() -> threading.Thread | None:
    """Start importing aiohttp on a daemon thread (None: nothing started: already imported, or
    no core free for it). Call it on the main thread, before anything imports aiohttp."""
    if "aiohttp" in sys.modules or not a_core_is_free():
        return None
    for name in AIOHTTP_NEEDS:
        with contextlib.suppress(ImportError):  # another release's: the finder stops the thread
            importlib.import_module(name)
    guard = _OnlyAiohttp()
    # A new list, not an insertion: another thread may be iterating over the current one.
    sys.meta_path = [guard, *sys.meta_path]
    global _thread
    interval = sys.getswitchinterval()
    sys.setswitchinterval(max(interval, _SWITCH_INTERVAL_S))
    _thread = threading.Thread(
        target=_import, args=(guard, interval), name="import-aiohttp", daemon=True
    )
    _thread.start()
    return _thread

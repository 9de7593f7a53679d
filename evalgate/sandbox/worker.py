"""Repository code that runs as a worker process on this machine, inside a bubblewrap jail.

An inspect task file and a verifiers environment are the repository's code (often the pull
request's own); their runner processes talk to the gate through pipes and files, and results
cross as data. :func:`jail` wraps such a runner's command line so that it:

- runs **with no capabilities** in its own user namespace (uid 1000 inside). When evalgate runs
  as root, bwrap itself runs as ``nobody`` wherever every bound path is reachable by others;
  where one is not (an interpreter in root's 0700 home), bwrap's privileged mode: files are
  checked against host uid 0 without any capability, and only the bound paths exist;
- **sees only what it needs**: ``/usr`` and the libraries, a few ``/etc`` files (CA bundles,
  name resolution), the interpreter's prefixes, the files its caller names — read-only — and
  the folders it must write (its output) read-write; a private ``/tmp`` that is also its home.
  Never the runner's home, never a ``.git`` (masked in every bound folder: ``.git/config``
  holds the checkout's token), never the exam tree or evalgate's install for writing;
- **ends with its step**: its own pid namespace (bwrap's init is pid 1): when the runner exits,
  the kernel kills every process it left, ``setsid`` daemons included; ``--die-with-parent``
  when the gate dies first;
- gets **only the environment its caller built** (``repo_code.repo_env``: no token the base
  did not route to it), less the host paths that mean nothing inside (``HOME``, ``TMPDIR``).

The network namespace is shared: the runner must reach the model under test and the judge's
relay, both of which it is given the address and key of anyway.

Where bubblewrap cannot run (no user namespaces: Docker's default seccomp profile, Ubuntu's
AppArmor restriction), :func:`jail` falls back to the plain process, said on stderr once per
process with the reason (:func:`fallback_reason`): the cleared environment, a private home, the
gate made non-dumpable, its own session, whose process group :meth:`Jail.end` kills when the
step ends; a root gate runs it as ``nobody`` (no capabilities) where nobody can reach the
interpreter and its files, else with root's file access capabilities only
(``repo_code.spawn_options``). That fallback does not hide this machine's readable files, and a
process that leaves its session (``setsid``) survives it: run the gate where bubblewrap works
(or in a throw-away container) for the boundary.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalgate.sandbox._host import (
    SANDBOX_UID,
    _bwrap,
    _drop_prefix,
    _reachable_by_others,
    system_binds,
)

__all__ = ["HOME", "Jail", "fallback_reason", "granted", "interpreter_paths", "jail"]

HOME = "/tmp"  # the worker's home: its private tmpfs
_DROP_UID = 65534
# /etc files a runner needs: CA bundles (an https model), name resolution (the network is the
# host's), the dynamic linker's cache. passwd/group are generated (no host accounts).
_ETC = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "hosts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "pki",
    "resolv.conf",
    "ssl",
)
# Host paths in the caller's environment that mean nothing inside (or point into a home).
# A shared Hugging Face cache is one of them: what one worker wrote there (a PR's task), the
# next (the base's) would read as its data. Downloads go to the worker's private home.
_HOST_PATHS = ("HOME", "TMPDIR", "XDG_CACHE_HOME", "HF_HOME")
_warned: set[str] = set()


@dataclass
class Jail:
    """A command line ready for ``subprocess.Popen`` / ``asyncio.create_subprocess_exec``."""

    argv: list[str]
    env: dict[str, str]
    options: dict[str, Any] = field(default_factory=dict)  # more keyword arguments for Popen
    confined: bool = True  # False: the fallback (no bubblewrap here)
    home: str | None = None  # the fallback's private home, removed by end()
    cwd: str = "/"  # where to start it (bwrap changes into the jail's own)

    def end(self, pid: int) -> None:
        """After the worker's step: SIGKILL whatever is left of its process group (a jailed
        worker's pid namespace is gone with it already: this is the fallback's containment),
        and remove the fallback's private home."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        if self.home is not None:
            shutil.rmtree(self.home, ignore_errors=True)


@functools.cache
def fallback_reason() -> str | None:
    """Why repository code runs unjailed here, or None where bubblewrap works."""
    if not sys.platform.startswith("linux"):
        return "not Linux"
    from evalgate.sandbox.bubblewrap import BubblewrapBackend

    return BubblewrapBackend.unavailable()


@functools.cache
def interpreter_paths(python: str) -> tuple[str, ...]:
    """The folders ``python`` runs from: its prefixes (a venv and the interpreter it was made
    from), the real path of the executable, and import paths outside them (an editable
    install's source folder). Asked of the interpreter itself, isolated (``-I``): it is the
    job's own (``EVALGATE_INSPECT_PYTHON`` or evalgate's), not the repository's."""
    probe = (
        "import json, os, sys; print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix, "
        "sys.base_exec_prefix, os.path.realpath(sys.executable), *sys.path]))"
    )
    try:
        done = subprocess.run(
            [python, "-I", "-c", probe],
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
        )
        found = json.loads(done.stdout) if done.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired, ValueError):
        found = []
    paths = [os.path.realpath(python), os.path.abspath(python)]
    for entry in found:
        if isinstance(entry, str) and entry and os.path.exists(entry):
            paths.append(entry)
    return tuple(_outermost(paths))


def _outermost(paths: Iterable[str]) -> list[str]:
    """The paths less those inside another one of them (a bind of the outer one has them)."""
    out: list[str] = []
    for path in sorted({os.path.abspath(p) for p in paths}, key=len):
        if path.startswith("/usr/") or path == "/usr":
            continue  # bound anyway
        if not any(path == o or path.startswith(o.rstrip("/") + "/") for o in out):
            out.append(path)
    return out


def granted(env: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """Host paths the worker's environment grants it, (read-only, read-write): the Docker
    daemon's socket where ``DOCKER_HOST`` (a variable its benchmark must declare in
    ``pass_env``) names one, for inspect's docker sandbox or a verifiers docker runtime — the
    daemon is root on this machine, so that is the exam's explicit choice — and
    ``DOCKER_CONFIG`` (the CLI's plugins, Compose)."""
    reads, writes = [], []
    host = env.get("DOCKER_HOST", "")
    if host.startswith("unix://") and os.path.exists(host.removeprefix("unix://")):
        writes.append(host.removeprefix("unix://"))
    if env.get("DOCKER_CONFIG") and os.path.isdir(env["DOCKER_CONFIG"]):
        reads.append(env["DOCKER_CONFIG"])
    return reads, writes


def _too_wide(folder: str) -> bool:
    """A working folder not to bind whole: ``/``, or the runner's home or a folder above it (a
    task file run from ``~``): then only the files the caller names are bound."""
    real = os.path.realpath(folder)
    home = os.path.realpath(os.path.expanduser("~"))
    return real == "/" or home == real or home.startswith(real.rstrip("/") + "/")


def _masks(folder: str) -> list[str]:
    """Hide a ``.git`` inside a bound folder: its ``config`` holds the checkout's token."""
    git = os.path.join(folder, ".git")
    if os.path.isdir(git) and not os.path.islink(git):
        return ["--tmpfs", git, "--remount-ro", git]
    if os.path.lexists(git):
        return ["--ro-bind", "/dev/null", git]
    return []


def _warn_once(reason: str) -> None:
    if reason not in _warned:
        _warned.add(reason)
        sys.stderr.write(
            "evalgate: repository code (inspect tasks, verifiers environments) runs without its "
            f"sandbox here: {reason}\n"
        )


def jail(
    argv: list[str],
    *,
    env: Mapping[str, str],
    python: str,
    reads: Iterable[str | Path] = (),
    writes: Iterable[str | Path] = (),
    cwd: str | Path | None = None,
) -> Jail:
    """``argv`` (run by the interpreter ``python``) in a bubblewrap jail that binds ``reads``
    read-only and ``writes`` read-write at their own paths, started in ``cwd`` (bound
    read-only when not among them, unless it is ``/`` or holds the runner's home; the private
    ``/tmp`` when None); the fallback where
    bubblewrap cannot run (see the module's docstring). End it with :meth:`Jail.end`."""
    from evalgate._repo_code import protect_gate

    reason = fallback_reason()
    if reason is not None:
        return _fallback(argv, env, python, reads, writes, cwd, reason)
    found = _bwrap()
    assert found is not None  # fallback_reason said it runs
    bwrap, version = found
    env_reads, sockets = granted(env)
    ro = _outermost([*interpreter_paths(python), *(str(p) for p in reads), *env_reads])
    if cwd is not None and str(cwd) not in ro and not _too_wide(str(cwd)):
        ro.append(str(cwd))  # else only what ``reads`` names of it (bwrap makes the folders)
    rw = [os.path.abspath(str(p)) for p in writes]
    drop = _drop_prefix([*ro, *rw, *sockets])
    if drop:  # bwrap as nobody: what it writes must be nobody's
        for path in rw:
            os.chown(path, _DROP_UID, _DROP_UID)
    rw += sockets
    a = [*drop, bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    a += ["--unshare-cgroup-try"]
    if version >= (0, 8):
        a.append("--disable-userns")
    a += ["--die-with-parent", "--new-session", "--hostname", "evalgate-worker"]
    a += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    a += system_binds(_ETC, ("passwd", "group"))
    a += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for path in ro:
        a += ["--ro-bind", path, path, *_masks(path)]
    for path in rw:
        a += ["--bind", path, path, *_masks(path)]
    a += ["--remount-ro", "/", "--chdir", str(cwd) if cwd is not None else HOME]
    inner = {k: v for k, v in env.items() if k not in _HOST_PATHS}
    inner["HOME"] = HOME
    protect_gate()  # bwrap and what it runs cannot read the gate's memory or environment
    # The environment is bwrap's own, inherited by what it runs: never on its command line
    # (``--setenv``), which every user of this machine can read in ``ps``.
    return Jail([*a, "--", *argv], inner, {"start_new_session": True})


def _fallback(
    argv: list[str],
    env: Mapping[str, str],
    python: str,
    reads: Iterable[str | Path],
    writes: Iterable[str | Path],
    cwd: str | Path | None,
    reason: str,
) -> Jail:
    """No bubblewrap: the plain process in its own session, with a private home. A root gate
    runs it as ``nobody`` (no capabilities, nothing of root's to read or write, only its
    output folders made nobody's) wherever nobody can reach the interpreter and the files it
    reads; else with root's file access capabilities only (``repo_code.spawn_options``)."""
    from evalgate._repo_code import protect_gate, spawn_options

    options: dict[str, Any] = {"start_new_session": True}
    writes = [str(p) for p in writes]
    sources = [*interpreter_paths(python), *(str(p) for p in reads)]
    sources += [os.path.dirname(os.path.abspath(p)) for p in writes]  # reached to be written
    sources += [] if cwd is None else [str(cwd)]
    # A home of its own: nothing it leaves there (a .pth in the user site) reaches the next.
    home = tempfile.mkdtemp(prefix="evalgate-home-")
    inner = {**{k: v for k, v in env.items() if k not in _HOST_PATHS}, "HOME": home}
    if os.geteuid() == 0 and all(_reachable_by_others(p) for p in sources):
        for path in [*writes, home]:
            os.chown(path, _DROP_UID, _DROP_UID)
        protect_gate()
        options |= {"user": _DROP_UID, "group": _DROP_UID, "extra_groups": []}
        how = "as nobody"
    else:
        options |= spawn_options()
        how = "with root's file access" if os.geteuid() == 0 else "as this user"
    _warn_once(
        f"{reason}; it runs {how}, in its own process group, with a cleared environment, and "
        "can read this machine's files"
    )
    start = home if cwd is None else str(cwd)
    return Jail(list(argv), inner, options, confined=False, home=home, cwd=start)

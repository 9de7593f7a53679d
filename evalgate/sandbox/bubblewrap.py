"""The ``local`` sandbox: bubblewrap (bwrap) namespaces on this machine, no daemon, no root.

Each sandbox is one ``bwrap`` process whose pid 1 is evalgate's supervisor (``_sandboxd.py``);
every exec is forked by the supervisor inside the sandbox's namespaces. What a sandbox sees:

- a fresh root: ``/usr`` (and the ``/bin``, ``/lib*`` links) and a short list of ``/etc`` files
  read-only; generated ``/etc/passwd``, ``/etc/group``, ``/etc/hosts``; nothing else of the host
  (no ``/home``, no ``/root``, no ``/run``, no ``/tmp`` of the host, no runner workspace);
- a writable ``/workspace`` and ``/tmp``, each a size-capped tmpfs (``disk_mb``), and the rest of
  the tree read-only;
- an empty environment, rebuilt explicitly for every exec;
- its own user (uid 1000 inside; when evalgate runs as root, bwrap runs as host uid 65534, so
  even a file mistakenly exposed is checked against an unprivileged user, unless a mounted host
  path is not readable by others: then bwrap's privileged mode, still with no capabilities), pid,
  network, IPC, UTS and cgroup namespaces, no capabilities, ``no_new_privs``, no nested user
  namespaces (bwrap ≥ 0.8);
- no network: an empty network namespace (loopback only). ``model-only`` adds the model bridge:
  a unix socket from the host, reached through a TCP relay on 127.0.0.1:18080 inside.

Limits, and how each is enforced (see :meth:`BubblewrapBackend.limits`):

- wall time: per exec by the supervisor (SIGKILL to the exec's process group at the deadline),
  and per sandbox by the caller's timeout plus destroy, which kills the whole pid namespace;
- processes: RLIMIT_NPROC, which the kernel counts per user namespace (Linux ≥ 5.14), so it is a
  per-sandbox cap; plus ``pids.max`` when a cgroup is available;
- memory: a limit for the whole sandbox, tmpfs pages included: the cgroup's when one is
  available, else the supervisor's own accounting of every process's memory plus the tmpfs
  files (see ``_sandboxd.py``); and per process RLIMIT_DATA (heap and private writable mappings)
  and RLIMIT_AS at 8× that, at least 4 GiB (generous, so that runtimes reserving address space
  still start);
- disk: the tmpfs size of ``/workspace`` and of ``/tmp`` (``disk_mb`` each; ``/dev/shm`` at most
  64 MiB), and the rest of the tree is read-only: a full disk is ENOSPC inside, never the host's;
- CPU: RLIMIT_CPU (CPU seconds per process, = the sandbox timeout); a CPU *share* (``cpus``)
  only with a cgroup (``cpu.max``): without one, :meth:`BubblewrapBackend.limits` says so.

Cgroups are used when this process may create them under its own cgroup (cgroup v1 as root, or
a delegated cgroup v2 subtree); otherwise the rlimits and the supervisor's accounting above.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import functools
import itertools
import json
import marshal
import math
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalgate.sandbox._cgroup import Cgroup as _Cgroup
from evalgate.sandbox._host import (
    GUARD_SHELL,
    SANDBOX_UID,
    _bwrap,
    _drop_prefix,
    _guard_shell,
    _python,
    reachable_source,
    system_binds,
)
from evalgate.sandbox._io import Drain, Feed, read_line, wait_exit
from evalgate.sandbox.base import (
    MODEL_PORT,
    WORKDIR,
    ExecCall,
    Sandbox,
    SandboxBackend,
    SandboxConfig,
    SandboxError,
)
from evalgate.sandbox.bridge import ModelBridge

__all__ = ["BubblewrapBackend", "BubblewrapSandbox"]

_DAEMON_SOURCE = (Path(__file__).with_name("_sandboxd.py")).read_text(encoding="utf-8")
_GRACE_S = 5.0  # how late the supervisor's own timeout report may be before we give up on it
_ETC = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "nsswitch.conf",
    "mime.types",
)
_EXEC_IDS = itertools.count(1)


# ------------------------------------------------------------------------------------------
# The sandbox


class BubblewrapSandbox(Sandbox):
    backend = "local"

    def __init__(self, config: SandboxConfig, backend: BubblewrapBackend) -> None:
        super().__init__(config)
        self.id = "bwrap-" + secrets.token_hex(4)
        self._backend = backend
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        # What waits for the supervisor's answer: "ready", "killall", or an exec's id.
        self._pending: dict[str | int, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._stderr: Drain | None = None  # bwrap's (and the supervisor's) error messages
        self._dir: str | None = None
        self._bridge: ModelBridge | None = None
        self._cgroup: _Cgroup | None = None
        self._status_fd: int | None = None
        self._child_pid: int | None = None  # host pid of the sandbox's pid 1
        self._dead: str | None = None  # why the supervisor is gone, once it is
        self._python_env: dict[str, str] = {}  # for a python mounted at /opt/python

    # -- start ---------------------------------------------------------------------------

    def _argv(self, ctrl_fd: int, status_fd: int, block_fd: int | None) -> list[str]:
        cfg = self.config
        bwrap, version = self._backend.bwrap
        py, py_prefix, py_env = _python()
        # Sources nobody could reach are bound from a reachable copy: bwrap never runs as root.
        binds = [(reachable_source(m.source), m.target) for m in cfg.mounts]
        if py_prefix is not None:
            binds.append((py_prefix, "/opt/python"))
        if self._bridge is not None:
            binds.append((f"{self._dir}/run", "/run/evalgate"))
        a = [*_drop_prefix([src for src, _ in binds]), bwrap, "--unshare-all", "--unshare-user"]
        guard = _guard_shell()
        if guard is not None:  # not readable by design: bwrap only needs to reach it
            binds.append((guard, GUARD_SHELL))
            self.guard_shell = GUARD_SHELL
        if version >= (0, 8):
            a.append("--disable-userns")  # no nested user namespaces: less kernel to attack
        a += ["--die-with-parent", "--new-session", "--as-pid-1", "--hostname", "sandbox"]
        a += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--clearenv"]
        a += system_binds(_ETC, ("passwd", "group", "hosts"))
        disk = cfg.disk_mb << 20
        a += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]
        for path, mode, size in (("/dev/shm", "1777", min(disk, 64 << 20)),
                                 ("/tmp", "1777", disk), (WORKDIR, "0755", disk)):  # fmt: skip
            # --size came with bwrap 0.7: older ones give an uncapped tmpfs (half the RAM).
            a += ["--perms", mode] if version >= (0, 5) else []
            a += ["--size", str(size)] if version >= (0, 7) else []
            a += ["--tmpfs", path]
        for source, target in binds:
            a += ["--ro-bind", source, target]
        a += ["--remount-ro", "/", "--chdir", WORKDIR]
        for key, value in py_env:
            a += ["--setenv", key, value]
        a += ["--json-status-fd", str(status_fd)]
        if block_fd is not None:
            a += ["--block-fd", str(block_fd)]
        a += ["--", py, "-I", "-S", "-c", _DAEMON_SOURCE, "serve", str(ctrl_fd)]
        if self._bridge is not None:
            a += ["bridge=/run/evalgate/model.sock", f"port={MODEL_PORT}"]
        # What no cgroup keeps, the supervisor accounts for itself (see _sandboxd.py).
        kinds = self._cgroup.kinds if self._cgroup is not None else set()
        if "memory" not in kinds:
            a += [f"mem={cfg.memory_mb << 20}", f"tmpfs=/tmp:{WORKDIR}:/dev/shm"]
        if "pids" not in kinds:
            a.append(f"pids={cfg.pids}")
        return a

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException as exc:
            # Whatever stopped us (an error, a timeout, a cancelled run), leave no sandbox behind.
            with contextlib.suppress(Exception):
                await asyncio.shield(self.destroy())
            if not isinstance(exc, Exception) or isinstance(exc, SandboxError):
                raise
            raise SandboxError(f"local sandbox did not start: {exc}") from exc

    async def _start_bridge(self) -> None:
        """The model bridge on a unix socket the sandbox gets bound in (network: model-only)."""
        assert self.config.model is not None
        self._dir = tempfile.mkdtemp(prefix="evalgate-sbx-")
        os.mkdir(f"{self._dir}/run")
        self._bridge = ModelBridge(self.config.model, f"{self._dir}/run/model.sock")
        await self._bridge.start()
        # Reachable by the sandbox's dropped uid (nobody, when evalgate is root): the bound
        # folder readable, as _drop_prefix requires of every bound source, else bwrap would run
        # as host root. It holds the socket alone; the bridge token keeps everyone else out.
        for path, mode in ((self._dir, 0o711), (f"{self._dir}/run", 0o755)):
            os.chmod(path, mode)
        os.chmod(f"{self._dir}/run/model.sock", 0o666)
        self.model_env = self._bridge.sandbox_env

    async def _start(self) -> None:
        cfg = self.config
        loop = asyncio.get_running_loop()
        _, _, py_env = _python()
        self._python_env = dict(py_env)
        if cfg.network == "model-only" and cfg.model is not None:
            await self._start_bridge()
        self._cgroup = _Cgroup.create(self.id, cfg)
        host_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = host_sock
        host_sock.setblocking(False)
        # bwrap reports the host pid of the sandbox's pid 1 on the status pipe: destroy kills
        # it directly, and a cgroup gets it before it runs anything (bwrap waits on block_fd).
        status_r, status_w = os.pipe()
        self._status_fd = status_r
        block_r = block_w = None
        if self._cgroup is not None:
            block_r, block_w = os.pipe()
        pass_fds = [fd for fd in (child_sock.fileno(), status_w, block_r) if fd is not None]
        err_r, err_w = os.pipe()
        try:
            argv = self._argv(child_sock.fileno(), status_w, block_r)
            # Popen, not asyncio's subprocess: its wait() also waits for pipes, and a transport
            # outliving its loop complains; the exit is awaited through a pidfd instead.
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err_w,
                pass_fds=pass_fds,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
                cwd="/",
            )
        except OSError as exc:
            os.close(err_r)
            if block_w is not None:
                os.close(block_w)
            raise SandboxError(f"local sandbox: cannot start bwrap: {exc}") from exc
        finally:
            child_sock.close()
            for fd in (status_w, block_r, err_w):
                if fd is not None:
                    os.close(fd)
        self._stderr = Drain(err_r, 8192)
        ready = loop.create_future()
        self._pending["ready"] = ready
        self._reader = loop.create_task(self._read_loop())
        try:
            status = await asyncio.wait_for(read_line(status_r), 30)
            self._child_pid = int(json.loads(status)["child-pid"])
            if block_w is not None:
                assert self._cgroup is not None
                self._cgroup.add(self._child_pid)
                os.write(block_w, b"1")
            await asyncio.wait_for(ready, 30)
        except (TimeoutError, EOFError, SandboxError, OSError, ValueError, KeyError) as exc:
            self._pending.pop("ready", None)
            ready.cancel()  # (a no-op when it already failed; then it is retrieved below)
            if not ready.cancelled():
                ready.exception()
            await self.destroy()
            detail = self._error_text()
            hint = ""
            if "namespace" in detail or "uid map" in detail:
                hint = (
                    " (unprivileged user namespaces are disabled here; on Ubuntu ≥ 23.10 run "
                    "`sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`)"
                )
            reason = detail or f"{type(exc).__name__}: {exc}"
            raise SandboxError(f"local sandbox did not start: {reason}{hint}") from exc
        finally:
            if block_w is not None:
                os.close(block_w)

    def _error_text(self) -> str:
        raw = bytes(self._stderr.buf) if self._stderr is not None else b""
        return raw.decode("utf-8", "replace").strip()[:500]

    async def _read_loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._sock is not None
        try:
            while True:
                msg = await loop.sock_recv(self._sock, 1 << 16)
                if not msg:
                    break
                obj = marshal.loads(msg)
                key = "ready" if obj.get("ready") else obj.get("id", obj.get("op"))
                fut = self._pending.pop(key, None)
                if fut is not None and not fut.done():
                    fut.set_result(obj)
        except (OSError, ValueError):
            pass
        finally:
            self._dead = self._dead or "the sandbox's supervisor exited"
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(SandboxError(f"{self.describe()}: {self._dead}"))
            self._pending.clear()

    async def _send(self, obj: dict[str, object], fds: Sequence[int] = ()) -> None:
        if self._sock is None or self._dead:
            raise SandboxError(f"{self.describe()}: {self._dead or 'not started'}")
        data = marshal.dumps(obj)
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        loop = asyncio.get_running_loop()
        while True:
            try:
                self._sock.sendmsg([data], anc)
                return
            except BlockingIOError:
                ready = loop.create_future()
                loop.add_writer(self._sock.fileno(), ready.set_result, None)
                try:
                    await ready
                finally:
                    loop.remove_writer(self._sock.fileno())
            except OSError as exc:
                raise SandboxError(f"{self.describe()}: supervisor unreachable: {exc}") from exc

    def _with_python(self, env: dict[str, str]) -> dict[str, str]:
        if not self._python_env:
            return env
        path = ":".join(p for p in ("/opt/python/bin", env.get("PATH")) if p)
        return {**self._python_env, **env, "PATH": path}

    def _limits(self) -> dict[str, int]:
        cfg = self.config
        mem = cfg.memory_mb << 20
        return {
            "nproc": cfg.pids,
            "data": mem,
            "as": max(mem * 8, 4 << 30),
            "cpu": math.ceil(cfg.timeout_s) + 1,
            "nofile": 1024,
            "core": 0,
        }

    # -- exec ------------------------------------------------------------------------------

    async def _exec(self, call: ExecCall) -> tuple[int, bytes, bytes, bool, bool]:
        argv, timeout_s, stdin, env, cwd, max_output = call.unpack()
        self._check_alive()
        loop = asyncio.get_running_loop()
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        exec_id = next(_EXEC_IDS)
        done = loop.create_future()
        self._pending[exec_id] = done
        request = {
            "op": "exec",
            "id": exec_id,
            "argv": argv,
            "env": self._with_python(env),
            "cwd": cwd,
            "timeout": timeout_s,
            "limits": self._limits(),
        }
        out, err = Drain(out_r, max_output), Drain(err_r, max_output)
        try:
            await self._send(request, [in_r, out_w, err_w])
        except BaseException:
            self._pending.pop(exec_id, None)
            for d in (out, err):
                d.close()
            os.close(in_w)
            raise
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
        feed = Feed(in_w, stdin or b"")
        finished = False
        try:
            reply = await asyncio.wait_for(asyncio.shield(done), timeout_s + _GRACE_S)
            finished = True
        except TimeoutError:
            raise SandboxError(
                f"{self.describe()}: no exit report {_GRACE_S:.0f} s after the timeout"
            ) from None
        finally:
            if not finished:
                self._pending.pop(exec_id, None)
                with contextlib.suppress(SandboxError):
                    await self._send({"op": "kill", "id": exec_id})
            feed.close()
            # Output written before the exit is in the pipes already; a background process
            # that keeps them open must not hold us up.
            await asyncio.wait([out.done, err.done], timeout=0.25 if finished else 0)
            for d in (out, err):
                d.close()
        stderr = bytes(err.buf)
        if "spawn" in reply:
            stderr += f"evalgate-sandbox: cannot start {argv[0]!r}: {reply['spawn']}\n".encode()
        if "limit" in reply:
            stderr += f"evalgate-sandbox: killed: {reply['limit']}\n".encode()
        return (
            int(reply["status"]),
            bytes(out.buf),
            stderr,
            bool(reply["timed_out"]),
            out.truncated or err.truncated,
        )

    async def kill_all(self) -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._pending["killall"] = fut
        await self._send({"op": "killall"})
        await asyncio.wait_for(fut, 10)

    # -- destroy -----------------------------------------------------------------------------

    async def destroy(self) -> None:
        if self._destroyed:
            return
        self._destroyed = True
        self._dead = self._dead or "destroyed"
        # Stop reading before closing: a closed fd still registered with the event loop would
        # hand its number, and our reader, to the next sandbox's socket.
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        if self._sock is not None:
            self._sock.close()  # end of file for the supervisor
        if self._proc is not None:
            if self._child_pid is not None and self._proc.poll() is None:
                # SIGKILL to the namespace's init (deliverable from outside): the kernel kills
                # every process in the sandbox with it. bwrap has not reaped it yet, so the pid
                # is still the sandbox's.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._child_pid, signal.SIGKILL)
            try:
                await asyncio.wait_for(wait_exit(self._proc.pid), 5)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self._proc.kill()  # --die-with-parent takes the namespace down with bwrap
            self._proc.wait()
        if self._status_fd is not None:
            os.close(self._status_fd)
            self._status_fd = None
        if self._stderr is not None:  # bwrap is gone: its stderr is complete (kept for messages)
            await asyncio.wait([self._stderr.done], timeout=0.5)
            self._stderr.close()
        if self._cgroup is not None:
            await self._cgroup.remove()
        if self._bridge is not None:
            await self._bridge.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)


class BubblewrapBackend(SandboxBackend):
    """``local``: bubblewrap. Needs the ``bwrap`` binary (Debian/Ubuntu package ``bubblewrap``)."""

    name = "local"

    def __init__(self) -> None:
        found = _bwrap()
        if found is None:
            raise SandboxError(f"local sandbox: {self.unavailable()}")
        self.bwrap = found

    @classmethod
    @functools.cache
    def unavailable(cls) -> str | None:
        found = _bwrap()
        if found is None:
            return "bubblewrap is not installed (apt-get install bubblewrap)"
        py, py_prefix, py_env = _python()
        sources = [py_prefix] if py_prefix else []
        probe = [*_drop_prefix(sources), found[0], "--unshare-all", "--unshare-user"]
        probe += ["--die-with-parent", "--ro-bind", "/usr", "/usr", "--proc", "/proc"]
        probe += ["--dev", "/dev"]
        for name in ("bin", "lib", "lib64"):
            if os.path.islink(f"/{name}"):
                probe += ["--symlink", os.readlink(f"/{name}"), f"/{name}"]
            elif os.path.isdir(f"/{name}"):
                probe += ["--ro-bind", f"/{name}", f"/{name}"]
        if py_prefix is not None:
            probe += ["--ro-bind", py_prefix, "/opt/python"]
        for key, value in py_env:
            probe += ["--setenv", key, value]
        probe += ["--", py, "-I", "-S", "-c", "pass"]
        try:
            out = subprocess.run(probe, capture_output=True, text=True, timeout=30, cwd="/")
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap does not run here: {exc}"
        if out.returncode != 0:
            return f"bubblewrap cannot create a sandbox here: {out.stderr.strip()[:300]}"
        return None

    async def create(self, config: SandboxConfig) -> BubblewrapSandbox:
        sandbox = BubblewrapSandbox(config, self)
        await sandbox.start()
        return sandbox

    @staticmethod
    def _cgroup_kinds(config: SandboxConfig) -> set[str]:
        cg = _Cgroup.create(f"probe-{secrets.token_hex(3)}", config)
        kinds = cg.kinds if cg is not None else set()
        for d in cg.dirs if cg is not None else ():
            with contextlib.suppress(OSError):
                d.rmdir()
        return kinds

    def unenforced(self, config: SandboxConfig) -> list[str]:
        # Memory and processes are kept without a cgroup too (the supervisor's accounting).
        out = []
        if "cpu" not in self._cgroup_kinds(config):
            out.append(f"cpus: the CPU share of {config.cpus:g} (no cgroup)")
        if self.bwrap[1] < (0, 7):
            out.append(f"disk_mb: tmpfs not size-capped (bwrap {self.bwrap[1]} < 0.7)")
        return out

    def limits(self, config: SandboxConfig) -> dict[str, str]:
        kinds = self._cgroup_kinds(config)
        return {
            "wall time": "per exec: SIGKILL to its process group (supervisor); per task: destroy "
            "kills the pid namespace",
            "processes": f"RLIMIT_NPROC={config.pids} (counted per user namespace)"
            + (
                f" + cgroup pids.max={config.pids}"
                if "pids" in kinds
                else " + the supervisor's count every 25 ms (no cgroup)"
            ),
            "memory": (
                f"cgroup memory limit {config.memory_mb} MiB (tmpfs pages included)"
                if "memory" in kinds
                else f"{config.memory_mb} MiB for the whole sandbox (processes' memory + tmpfs "
                "files), accounted by the supervisor every 25 ms (no cgroup: an allocation can "
                "overshoot within one tick)"
            )
            + f"; per process RLIMIT_DATA={config.memory_mb} MiB",
            "disk": (
                f"tmpfs /workspace and /tmp of {config.disk_mb} MiB each; the rest read-only"
                if self.bwrap[1] >= (0, 7)
                else "tmpfs /workspace and /tmp, NOT size-capped (bwrap < 0.7); the rest read-only"
            ),
            "cpu": f"RLIMIT_CPU={math.ceil(config.timeout_s) + 1} s per process"
            + (
                f" + cgroup quota of {config.cpus} CPUs"
                if "cpu" in kinds
                else f"; the share of {config.cpus:g} CPUs is NOT enforced (no cgroup)"
            ),
            "network": "empty network namespace"
            + (" + model bridge (unix socket)" if config.network == "model-only" else ""),
        }

"""evalgate's supervisor inside a bubblewrap sandbox: pid 1 of the sandbox's pid namespace.

This file runs *inside* the sandbox, under the sandbox's own ``python3`` (stdlib only, Python
≥ 3.8), as ``python3 -I -S -c <this source> serve FD CONFIG``. It never imports evalgate, and it
imports only built-in modules (``_socket``, ``_signal``, ``marshal``…) because its start-up time is
most of a sandbox's creation time.

Why a supervisor: every exec must land in the same namespaces (the same private workspace, the
same empty network), and namespaces are entered most cheaply by forking from inside them. Why
pid 1: the kernel drops signals sent from inside a pid namespace to its init unless the init
handles them, so sandboxed code cannot kill its supervisor; and when the supervisor exits, the
kernel kills everything left in the namespace, so destroy is total. The supervisor is also
non-dumpable, so sandboxed code (the same uid) can neither ptrace it nor take its file
descriptors through /proc, and cannot forge the exit status of a task's check.

Protocol: a SOCK_SEQPACKET socket inherited from the host (close-on-exec, so no sandboxed process
holds it), one ``marshal``-encoded dict per message (both ends are evalgate; marshal is the one
serialiser that costs no import):

- host → ``{"op": "exec", "id", "argv", "env", "cwd", "timeout", "limits"}`` with three file
  descriptors attached (stdin, stdout, stderr), which the command gets as 0, 1 and 2;
- host → ``{"op": "kill", "id"}``: kill that exec's process group now;
- host → ``{"op": "killall"}``: kill every other process in the sandbox;
- supervisor → ``{"ready": True}`` once, then ``{"id", "status", "timed_out"}`` per exec
  (``status`` in the shell's convention: 128 + N for signal N; 126 and ``spawn`` when the fork
  failed, which is the sandbox's own doing, e.g. its process limit), ``{"op": "killall"}``;
- end of file from the host: the supervisor exits, taking the whole sandbox with it.

Limits without a cgroup (``mem=BYTES``, ``pids=N`` on the command line): the kernel's
per-process limits cannot cap a sandbox (eight processes under RLIMIT_DATA, or mapping shared
memory, which it does not count, add up; tmpfs files are charged to no process; and RLIMIT_NPROC
does not bind when bwrap had to run as root, whose processes are exempt), so the supervisor
accounts for the whole sandbox itself, every ``_TICK_S``: the memory of every process in the
namespace plus the pages held by the sandbox's tmpfs mounts (``tmpfs=/tmp:/workspace:/dev/shm``),
and its processes and threads. Over a limit, every process but the supervisor is killed (the
bridge relay is restarted), and each running exec is reported with ``limit``, the reason. Per
process it reads the kernel's counters (``RssAnon`` + ``RssShmem`` from ``/proc/PID/status``:
cheap, and an upper bound); only when that sum is over the limit does it read the exact
proportional figures (``Pss_Anon`` + ``Pss_Shmem`` from ``smaps_rollup``), so pages shared after
a fork count once. What this cannot do is stop an allocation (or a fork) between two ticks: the
overshoot is bounded by what the sandbox's processes can fault in (or fork) during ``_TICK_S``,
and each process's memory by its RLIMIT_AS.

``forward SOCKET PORT`` is the model bridge's inner half: a TCP listener on 127.0.0.1:PORT in the
sandbox's empty network namespace that relays each connection to a unix socket bind-mounted
from the host, where a proxy speaks to the model endpoint and to nothing else.
"""

import _signal
import _socket
import array
import marshal
import os
import resource
import select
import sys
import time

_LIMITS = {
    "nproc": resource.RLIMIT_NPROC,
    "data": resource.RLIMIT_DATA,
    "as": resource.RLIMIT_AS,
    "cpu": resource.RLIMIT_CPU,
    "fsize": resource.RLIMIT_FSIZE,
    "nofile": resource.RLIMIT_NOFILE,
    "core": resource.RLIMIT_CORE,
}
_PR_SET_DUMPABLE = 4
_TICK_S = 0.025  # how often a sandbox without a cgroup is accounted for
_libc = None


def _try(fn, *args):
    """``fn(*args)``, ignoring OSError (contextlib.suppress, without importing contextlib)."""
    try:
        return fn(*args)
    except OSError:
        return None


def _set_dumpable(flag):
    global _libc
    try:
        if _libc is None:
            import ctypes

            _libc = ctypes.CDLL(None)
        _libc.prctl(_PR_SET_DUMPABLE, flag, 0, 0, 0)
    except Exception:  # no prctl: still contained by the namespaces, only less strictly
        pass


def _execvpe(argv, env):
    """os.execvpe without its import of ``warnings`` (milliseconds per exec)."""
    name = argv[0]
    if "/" in name:
        os.execve(name, argv, env)
    error: OSError = FileNotFoundError(2, "No such file or directory", name)
    for folder in env.get("PATH", "/usr/bin:/bin").split(":"):
        try:
            os.execve(os.path.join(folder or ".", name), argv, env)
        except (FileNotFoundError, NotADirectoryError):
            pass
        except PermissionError as exc:
            error = exc
    raise error


def _child(req, fds, private):
    """In the forked child: become the command. Never returns.

    ``private`` are the supervisor's own descriptors (the host channel above all): closed before
    the child turns dumpable, so that nothing in the sandbox can take them from it.
    """
    try:
        for fd in private:
            _try(os.close, fd)
        os.setsid()  # its own process group: a timeout kills the command and all it started
        for sig in (_signal.SIGPIPE, _signal.SIGXFSZ, _signal.SIGINT, _signal.SIGCHLD):
            _signal.signal(sig, _signal.SIG_DFL)
        _signal.set_wakeup_fd(-1)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)  # the copies at 0-2 are inheritable; the originals close on exec
        _set_dumpable(1)  # ours to write /proc/self/oom_score_adj (exec resets it anyway)
        try:  # when the sandbox runs out of memory, the OOM killer should take the task, not us
            fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
            os.write(fd, b"1000")
            os.close(fd)
        except OSError:
            pass
        for name, value in req.get("limits", {}).items():
            resource.setrlimit(_LIMITS[name], (value, value))
        os.chdir(req.get("cwd") or "/")
        _execvpe(req["argv"], req.get("env") or {})
    except BaseException as exc:
        try:
            msg = f"evalgate-sandbox: cannot run {req.get('argv', ['?'])[0]!r}: {exc}\n"
            os.write(2, msg.encode())
        finally:
            os._exit(127)


def _status(code):
    if os.WIFEXITED(code):
        return os.WEXITSTATUS(code)
    if os.WIFSIGNALED(code):
        return 128 + os.WTERMSIG(code)
    return 255


def _kib(path, keys):
    """Sum of the ``keys`` fields (in kB) of a /proc file; 0 once the process is gone."""
    total = 0
    try:
        with open(path, "rb") as fh:
            for line in fh:
                name, _, rest = line.partition(b":")
                if name in keys:
                    total += int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return total


_CHEAP = (b"RssAnon", b"RssShmem")
_EXACT = (b"Pss_Anon", b"Pss_Shmem")


class Accounting:
    """The whole sandbox against its limits, where no cgroup keeps them: every process's memory
    plus its tmpfs files (``mem``), and its processes and threads (``pids``)."""

    def __init__(self, mem, pids, mounts, spare):
        self.mem, self.pids = mem, pids
        self.mounts = [m for m in mounts if m]
        self.spare = spare  # pids never counted: ourselves and the bridge relay

    def tmpfs(self):
        used = 0
        for path in self.mounts:
            try:
                st = os.statvfs(path)
            except OSError:
                continue
            used += (st.f_blocks - st.f_bfree) * st.f_frsize
        return used

    def over(self):
        """None, or why the sandbox is over a limit."""
        spare = self.spare()
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in spare]
        if self.pids and len(pids) > self.pids:  # more processes than tasks: no need to read
            return f"the sandbox's process limit of {self.pids} was exceeded ({len(pids)})"
        cheap = tasks = 0
        for pid in pids:
            cheap += _kib(f"/proc/{pid}/status", _CHEAP)
            tasks += _kib(f"/proc/{pid}/status", (b"Threads",)) if self.pids else 0
        if self.pids and tasks > self.pids:
            return f"the sandbox's process limit of {self.pids} was exceeded ({tasks} threads)"
        if not self.mem:
            return None
        files = self.tmpfs()
        if (cheap << 10) + files <= self.mem:
            return None
        used = sum(_kib(f"/proc/{p}/smaps_rollup", _EXACT) for p in pids) << 10
        if used + files <= self.mem:
            return None
        return (
            f"the sandbox's memory limit of {self.mem >> 20} MiB was exceeded "
            f"({used >> 20} MiB in {len(pids)} processes + {files >> 20} MiB of tmpfs files)"
        )


class Forwarder:
    """The model bridge's inner half, in a child of ours; restarted after a kill of everyone."""

    def __init__(self, unix_path, port):
        self.unix_path = unix_path
        self.listener = _listen(port)  # bound before "ready": open when the host hears it
        self.pid = None

    def spawn(self, ctrl):
        self.pid = os.fork()
        if self.pid == 0:
            ctrl.close()
            os.setsid()
            forward(self.listener, self.unix_path)
            os._exit(0)


def serve(fd, config):
    # pid 1 without a SIGINT handler: the signal, sent from inside, is simply dropped.
    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    _set_dumpable(0)
    ctrl = _socket.socket(fileno=fd)
    os.set_inheritable(fd, False)
    fwd = None
    if config.get("bridge"):
        fwd = Forwarder(config["bridge"], int(config["port"]))
        fwd.spawn(ctrl)
    limits = None
    if config.get("mem") or config.get("pids"):
        spare = lambda: {1, os.getpid(), fwd.pid if fwd else None}  # noqa: E731
        mounts = config.get("tmpfs", "").split(":")
        limits = Accounting(int(config.get("mem", 0)), int(config.get("pids", 0)), mounts, spare)
    _Daemon(ctrl, fd, fwd, limits).run()


class _Daemon:
    """The sandbox's pid 1: runs the host's exec requests, reaps, enforces deadlines/limits."""

    def __init__(self, ctrl, fd, fwd, limits):
        self.ctrl, self.fd, self.fwd, self.limits = ctrl, fd, fwd, limits
        self.wake_r, self.wake_w = os.pipe()
        for end in (self.wake_r, self.wake_w):
            os.set_blocking(end, False)
        _signal.set_wakeup_fd(self.wake_w)
        _signal.signal(_signal.SIGCHLD, lambda *_: None)
        self.running = {}  # pid -> {"id", "deadline", "timed_out"}
        self.by_id = {}  # exec id -> pid
        self.fd_size = array.array("i").itemsize

    def send(self, obj):
        try:
            self.ctrl.send(marshal.dumps(obj))
        except OSError:
            os._exit(0)  # the host is gone: so are we, and with us the sandbox

    def reap(self):
        """Reap exited children; False when none are left at all."""
        while True:
            try:
                pid, code = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if self.fwd is not None and pid == self.fwd.pid:
                self.fwd.pid = None  # killed with everyone else: restarted below
            job = self.running.pop(pid, None)
            if job is not None:  # else an orphan re-parented to us: reaped, nothing to report
                self.by_id.pop(job["id"], None)
                report = {"id": job["id"], "status": _status(code), "timed_out": job["timed_out"]}
                if job.get("limit"):
                    report["limit"] = job["limit"]
                self.send(report)

    def run(self):
        self.send({"ready": True})
        while True:
            now = time.monotonic()
            deadlines = [j["deadline"] for j in self.running.values() if j["deadline"] is not None]
            wait = max(0.0, min(deadlines) - now) if deadlines else None
            if self.limits is not None:
                wait = _TICK_S if wait is None else min(wait, _TICK_S)
            readable, _, _ = select.select([self.fd, self.wake_r], [], [], wait)
            why = self.limits.over() if self.limits is not None else None
            if why is not None:
                for job in self.running.values():
                    job["limit"] = why
                _try(os.kill, -1, _signal.SIGKILL)  # everyone in the namespace but ourselves
            if self.wake_r in readable:
                try:
                    while os.read(self.wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass
            self.reap()
            if self.fwd is not None and self.fwd.pid is None:
                self.fwd.spawn(self.ctrl)
            if self.fd in readable:
                self.receive()
            self.expire()

    def receive(self):
        fds = array.array("i")
        msg, anc, _, _ = self.ctrl.recvmsg(
            1 << 20, _socket.CMSG_SPACE(16 * self.fd_size), _socket.MSG_CMSG_CLOEXEC
        )
        if not msg:
            os._exit(0)
        for level, kind, data in anc:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - (len(data) % self.fd_size)])
        req = marshal.loads(msg)
        op = req.get("op")
        if op == "exec":
            self.exec(req, list(fds))
        elif op == "kill":
            pid = self.by_id.get(req["id"])
            if pid is not None:
                _try(os.killpg, pid, _signal.SIGKILL)
        elif op == "killall":
            _try(os.kill, -1, _signal.SIGKILL)  # everyone in the namespace but ourselves
            # Reap them before answering: zombies still count against the process limit, and
            # the next exec (a task's check) must be able to start.
            give_up = time.monotonic() + 5
            while self.reap() and time.monotonic() < give_up:
                time.sleep(0.002)
            self.send({"op": "killall"})
        for f in fds:
            os.close(f)

    def exec(self, req, fds):
        try:
            pid = os.fork()
        except OSError as exc:  # the sandbox's own processes used up its limits
            self.send({"id": req["id"], "status": 126, "timed_out": False, "spawn": str(exc)})
            return
        if pid == 0:
            _child(req, fds, (self.fd, self.wake_r, self.wake_w))
        timeout = req.get("timeout")
        self.running[pid] = {
            "id": req["id"],
            "deadline": time.monotonic() + timeout if timeout else None,
            "timed_out": False,
        }
        self.by_id[req["id"]] = pid

    def expire(self):
        now = time.monotonic()
        for pid, job in self.running.items():
            if job["deadline"] is not None and now >= job["deadline"]:
                job["timed_out"], job["deadline"] = True, None
                _try(os.killpg, pid, _signal.SIGKILL)


def _listen(port):
    listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    return listener


def forward(listener, unix_path):
    import threading

    def pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock, how in ((dst, _socket.SHUT_WR), (src, _socket.SHUT_RD)):
                _try(sock.shutdown, how)

    def relay(conn):
        try:
            upstream = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            upstream.connect(unix_path)
        except OSError:
            conn.close()
            return
        back = threading.Thread(target=pump, args=(upstream, conn), daemon=True)
        back.start()
        pump(conn, upstream)
        back.join()
        conn.close()
        upstream.close()

    while True:
        conn_fd, _ = listener._accept()
        conn = _socket.socket(fileno=conn_fd)
        threading.Thread(target=relay, args=(conn,), daemon=True).start()


def main(argv):
    if argv[1] == "serve":
        config = {}
        for pair in argv[3:]:
            key, _, value = pair.partition("=")
            config[key] = value
        serve(int(argv[2]), config)
    elif argv[1] == "forward":  # standalone, for the container backends
        forward(_listen(int(argv[3])), argv[2])
    else:
        sys.exit(
            "usage: serve FD [bridge=SOCKET port=PORT] [mem=BYTES tmpfs=DIR:DIR] [pids=N] "
            "| forward SOCKET PORT"
        )


if __name__ == "__main__":
    main(sys.argv)

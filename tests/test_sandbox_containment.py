"""Containment of the local (bubblewrap) sandbox: what a hostile agent cannot do.

Sandbox-level probes first (files, environment, network, processes, memory, disk, time, the
supervisor), then a whole agent benchmark in which some tasks attack and others work, run
concurrently through the engine: the attacks fail with a reason, the others pass, the host is
unharmed.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from evalgate.config.spec._base import Sampling
from evalgate.config.spec.benchmarks import AgentBenchmark
from evalgate.run.engine import run_suite
from evalgate.sandbox import (
    ModelRoute,
    Mount,
    SandboxConfig,
    backend_class,
    bubblewrap,
    open_backend,
)
from evalgate.serve.base import Endpoint
from evalgate.serve.client import ChatClient
from evalgate.suites.agent.suite import AgentSuite

pytestmark = pytest.mark.skipif(
    backend_class("local").unavailable() is not None,
    reason=f"bubblewrap: {backend_class('local').unavailable()}",
)

LIMITS = SandboxConfig(timeout_s=60, memory_mb=256, pids=64, disk_mb=32)
HAS_CGROUP = bubblewrap._Cgroup.create(f"probe-{os.getpid()}", LIMITS) is not None


@pytest.fixture(autouse=True, params=["cgroup", "no-cgroup"])
def cgroup(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Every containment test runs twice: with cgroups where this machine allows them, and
    without (as inside a Docker action), where the rlimits and the supervisor's accounting hold.
    """
    if request.param == "cgroup":
        if not HAS_CGROUP:
            pytest.skip("no cgroup may be created here (the no-cgroup run covers this machine)")
        return True
    monkeypatch.setattr(bubblewrap._Cgroup, "create", classmethod(lambda cls, name, cfg: None))
    return False


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def _bwrap_processes() -> int:
    """Live bwrap processes started by this test process (other test runs may share the host)."""
    count = 0
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                stat_line = (proc / "stat").read_text()
            except OSError:
                continue
            name, rest = stat_line.split(" (", 1)[1].rsplit(") ", 1)
            state, ppid = rest.split()[:2]
            count += name == "bwrap" and state != "Z" and int(ppid) == os.getpid()
    return count


def _processes_in(box: Any) -> int:
    """Processes in the sandbox's pid namespace, counted from the host."""
    ns = os.readlink(f"/proc/{box._child_pid}/ns/pid")
    count = 0
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                count += os.readlink(proc / "ns" / "pid") == ns
            except OSError:
                continue
    return count


class _Tripwire:
    """A TCP service on the host's loopback that counts connections (there must be none)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.hits += 1
            conn.close()

    def close(self) -> int:
        self._stop = True
        self._thread.join()
        self.sock.close()
        return self.hits


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A fake runner token file, a fake ~/.ssh key, and a token in the environment."""
    token = "ghs_" + secrets.token_hex(16)
    runner = tmp_path / "runner"
    runner.mkdir()
    (runner / ".credentials").write_text(token)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(f"-----BEGIN KEY-----\n{token}\n")
    for path in (runner, runner / ".credentials", home, home / ".ssh", home / ".ssh" / "id_rsa"):
        path.chmod(path.stat().st_mode | stat.S_IROTH | (stat.S_IXOTH if path.is_dir() else 0))
    monkeypatch.setenv("GITHUB_TOKEN", token)
    monkeypatch.setenv("HOME", str(home))
    return {"token": token, "file": str(runner / ".credentials"), "home": str(home)}


def test_host_files_and_environment_are_invisible(planted: dict[str, str]) -> None:
    async def go() -> None:
        async with await open_backend("local").create(LIMITS) as box:
            r = await box.exec(
                f"cat {planted['file']} {planted['home']}/.ssh/id_rsa /root/.ssh/id_rsa "
                "/etc/shadow 2>&1; ls / /home /root /run 2>&1; env; cat /proc/*/environ 2>&1"
            )
            assert planted["token"] not in r.stdout + r.stderr
            assert "No such file or directory" in r.stdout
            assert set(r.stdout.split("\n\n")[0].split()) >= {"usr", "workspace", "tmp"}
            assert "GITHUB_TOKEN" not in r.stdout and "HOME=/tmp" in r.stdout
            r = await box.exec("touch /usr/x /etc/x /x 2>&1; echo hi > /dev/x 2>&1; true")
            assert (r.stdout + r.stderr).count("Read-only file system") == 4
            r = await box.exec("grep -E '^(NoNewPrivs|CapEff)' /proc/self/status; unshare -U true")
            assert "NoNewPrivs:\t1" in r.stdout and "CapEff:\t0000000000000000" in r.stdout
            assert r.exit_code != 0  # no nested user namespaces

    run(go())


def test_network_reaches_the_model_bridge_and_nothing_else(scripted_server: Any) -> None:
    server = scripted_server(lambda body, n: "pong")
    tripwire = _Tripwire()
    port = tripwire.port
    route = ModelRoute(base_url=server.base_url, model="under-test", api_key="sk-real-key")
    probe = f"""
import json, os, socket, urllib.request
def attempt(what, fn):
    try:
        fn(); print(what, "REACHED")
    except Exception as exc:
        print(what, "blocked:", type(exc).__name__)
attempt("internet", lambda: socket.create_connection(("1.1.1.1", 80), timeout=3))
attempt("host-loopback", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=3))
attempt("dns", lambda: socket.getaddrinfo("example.com", 80))
base, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
def call(path, body=None):
    auth = {{"Authorization": "Bearer " + key}}
    req = urllib.request.Request(base + path, data=body, headers=auth)
    return urllib.request.urlopen(req, timeout=10).read().decode()
attempt("bridge-files", lambda: call("/files"))
body = json.dumps({{"model": "gpt-4", "messages": [{{"role": "user", "content": "ping"}}]}})
answer = json.loads(call("/chat/completions", body.encode()))
print("bridge-chat", answer["choices"][0]["message"]["content"])
print("key-inside", key)
"""

    async def go() -> str:
        config = SandboxConfig(timeout_s=60, network="model-only", model=route)
        async with await open_backend("local").create(config) as box:
            r = await box.exec(["python3", "-c", probe], timeout_s=30)
            assert r.ok, r.stderr
            return r.stdout

    out = run(go())
    hits = tripwire.close()
    for what in ("internet", "host-loopback", "dns", "bridge-files"):
        assert f"{what} blocked" in out, out
    assert "bridge-chat pong" in out
    assert "sk-real-key" not in out and "key-inside sk-evalgate-sandbox-" in out
    assert hits == 0  # the host's loopback service never saw a connection
    assert [b["model"] for b in server.requests] == ["under-test"]
    assert server.authorization == ["Bearer sk-real-key"]


def test_fork_bomb_is_capped_and_the_host_and_neighbours_are_fine() -> None:
    async def go() -> None:
        backend = open_backend("local")
        async with await backend.create(LIMITS) as box, await backend.create(LIMITS) as other:
            bomb = await box.exec(["bash", "-c", ":(){ :|:& };:; sleep 3"], timeout_s=4)
            assert "Resource temporarily unavailable" in bomb.stderr
            live = _processes_in(box)
            assert 8 < live <= LIMITS.pids + 2  # the bomb is live, and capped
            assert (await other.exec("echo fine")).stdout == "fine\n"
            host = await asyncio.create_subprocess_exec("true")
            assert await host.wait() == 0
            await box.kill_all()
            assert _processes_in(box) == 1  # only the supervisor is left

    run(go())


def test_memory_disk_and_time_limits() -> None:
    async def go() -> None:
        async with await open_backend("local").create(LIMITS) as box:
            mem = await box.exec(["python3", "-c", "x = bytearray(1 << 30)"])
            assert mem.exit_code != 0 and "MemoryError" in mem.stderr
            disk = await box.exec(
                "dd if=/dev/zero of=fill bs=1M count=200; dd if=/dev/zero of=/tmp/fill bs=1M "
                "count=200; dd if=/dev/zero of=/dev/shm/fill bs=1M count=200; du -sm fill"
            )
            assert "No space left on device" in disk.stderr or "File size limit" in disk.stderr
            assert int(disk.stdout.split()[0]) <= LIMITS.disk_mb
            t0 = time.perf_counter()
            slow = await box.exec("sleep 100", timeout_s=1)
            assert slow.timed_out and time.perf_counter() - t0 < 10
            # Memory-backed and capped, not the host's disk (whose free space other processes
            # on a shared machine change at any time, so it is not measured).
            kinds = await box.exec("stat -f -c %T /workspace /tmp /dev/shm")
            assert kinds.stdout.split() == ["tmpfs"] * 3, kinds

    run(go())


# Eight processes, each holding 300 MiB of shared memory (which RLIMIT_DATA does not see).
SHARED_HOGS = """
import mmap, os, time
for _ in range(8):
    if os.fork() == 0:
        m = mmap.mmap(-1, 300 << 20, flags=mmap.MAP_SHARED)
        for off in range(0, len(m), 4096):
            m[off] = 1
        print("held", flush=True)
        time.sleep(2)
        os._exit(0)
for _ in range(8):
    os.wait()
print("all held")
"""


def test_memory_is_capped_for_the_whole_sandbox(cgroup: bool) -> None:
    """memory_mb caps the sandbox, not each process: shared memory and tmpfs files count."""
    config = SandboxConfig(timeout_s=60, memory_mb=128, pids=64, disk_mb=256)

    async def go() -> None:
        async with await open_backend("local").create(config) as box:
            hogs = await box.exec(["python3", "-c", SHARED_HOGS], timeout_s=30)
            assert hogs.stdout.splitlines().count("held") < 8, hogs  # never all eight at once
            if not cgroup:
                assert "memory limit of 128 MiB" in hogs.stderr, hogs.stderr
            # Files in the sandbox's tmpfs are memory too.
            files = await box.exec(
                "dd if=/dev/zero of=/tmp/a bs=1M count=100 2>/dev/null && "
                "dd if=/dev/zero of=big bs=1M count=100 2>/dev/null && sleep 1 && echo wrote",
                timeout_s=30,
            )
            assert "wrote" not in files.stdout and files.exit_code != 0, files
            if not cgroup:
                assert "tmpfs" in files.stderr, files.stderr

    run(go())


def test_the_supervisor_is_out_of_reach() -> None:
    async def go() -> None:
        async with await open_backend("local").create(LIMITS) as box:
            r = await box.exec(
                "kill -9 1; kill -INT 1; ls /proc/1/fd 2>&1; cat /proc/1/environ 2>&1; "
                "python3 -c 'import ctypes; print(\"ptrace\", ctypes.CDLL(None).ptrace(16, 1, 0, 0))'"  # noqa: E501
            )
            assert r.stdout.count("Permission denied") == 2 and "ptrace -1" in r.stdout
            assert (await box.exec("echo alive")).stdout == "alive\n"

    run(go())


def test_destroy_leaves_nothing_behind() -> None:
    async def go() -> None:
        before = _bwrap_processes()
        box = await open_backend("local").create(LIMITS)
        await box.exec("(setsid sleep 300 &); nohup sleep 300 >/dev/null 2>&1 &")
        assert _bwrap_processes() > before
        pid = box._child_pid
        await box.destroy()
        assert _bwrap_processes() == before
        assert not Path(f"/proc/{pid}").exists()

    run(go())


# -- a hostile agent inside a real benchmark run --------------------------------------------

HOSTILE_AGENT = r"""#!/bin/sh
# Does what its -prompt says: honest work, or an attack on the machine it runs on.
prompt=""
while [ $# -gt 0 ]; do
    case "$1" in -prompt) prompt="$2"; shift 2 ;; *) shift ;; esac
done
set -- $prompt
case "$1" in
good)
    printf 'Hello, evalgate!\n' > hello.txt ;;
network)
    python3 -c '
import socket, sys
for host, port in (("1.1.1.1", 443), ("127.0.0.1", int(sys.argv[1]))):
    try:
        socket.create_connection((host, port), timeout=3)
        open("stolen.txt", "a").write("connected %s\n" % host)
    except OSError as exc:
        print(host, exc, file=sys.stderr)
' "$2" ;;
files)
    for f in "$2" "$3/.ssh/id_rsa" /root/.ssh/id_rsa /etc/shadow /proc/1/environ; do
        cat "$f" >> stolen.txt
    done ;;
forkbomb)
    bash -c ':(){ :|:& };:'; sleep 60 ;;
disk)
    dd if=/dev/zero of=fill bs=1M count=500 ;;
memory)
    python3 -c 'x = bytearray(2 << 30); open("allocated.txt", "w").write("2 GiB")' ;;
sleep)
    sleep 600 ;;
esac
"""


def test_hostile_tasks_fail_cleanly_while_others_pass(
    tmp_path: Path, planted: dict[str, str], scripted_server: Any
) -> None:
    server = scripted_server(lambda body, n: "unused")
    tripwire = _Tripwire()
    port = tripwire.port
    agent = tmp_path / "hostile-agent"
    agent.write_text(HOSTILE_AGENT)
    agent.chmod(0o755)
    token = planted["token"]
    tasks = [
        ("good-1", "good", "test -f hello.txt"),
        ("good-2", "good", "test -f hello.txt"),
        ("network", f"network {port}", "test -s stolen.txt"),
        ("files", f"files {planted['file']} {planted['home']}", "grep -q ghs_ stolen.txt"),
        ("forkbomb", "forkbomb", "test -f never.txt"),
        ("disk", "disk", 'test "$(wc -c < fill)" -gt 100000000'),
        ("memory", "memory", "test -f allocated.txt"),
        ("sleep", "sleep", "true"),
    ]
    (tmp_path / "tasks.yaml").write_text(
        json.dumps(
            {"tasks": [{"id": i, "prompt": p, "check": c, "timeout_s": 6} for i, p, c in tasks]}
        )
    )
    spec = AgentBenchmark.model_validate(
        {
            "name": "hostile",
            "kind": "agent",
            "tasks": str(tmp_path / "tasks.yaml"),
            "agent": {"type": "command", "command": [str(agent)]},
            "sandbox": {"timeout_s": 30, "memory_mb": 256, "pids": 64, "disk_mb": 32},
        }
    )
    suite = AgentSuite.from_spec(spec)
    processes_before = _bwrap_processes()

    async def go() -> list[dict[str, Any]]:
        endpoint = Endpoint(base_url=server.base_url, model="m", api_key="sk-host")
        async with ChatClient(endpoint, Sampling()) as client:
            return await run_suite(suite, client, rollouts=1, max_concurrent=len(tasks))

    t0 = time.perf_counter()
    records = {r["example_id"]: r for r in run(go())}
    elapsed = time.perf_counter() - t0
    hits = tripwire.close()

    assert all(r["error"] is None for r in records.values()), records
    assert records["good-1"]["reward"] == records["good-2"]["reward"] == 1.0
    reasons = {k: r["completion"].splitlines()[0] for k, r in records.items()}
    for name in ("network", "files", "disk", "memory"):
        assert records[name]["reward"] == 0.0
        assert reasons[name].startswith("[fail] check failed"), reasons[name]
    assert records["sleep"]["reward"] == 0.0
    assert reasons["sleep"] == "[fail] agent timed out after 6 s", reasons["sleep"]
    # A fork bomb hits RLIMIT_NPROC, or (bwrap run as root, exempt from it, and no cgroup) the
    # supervisor's process count, which kills it.
    bomb = records["forkbomb"]
    assert bomb["reward"] == 0.0 and reasons["forkbomb"].startswith("[fail]"), bomb
    capped = ("Resource temporarily unavailable", "process limit of 64 was exceeded")
    assert any(text in bomb["completion"] for text in capped), bomb["completion"]
    assert "Network is unreachable" in records["network"]["completion"]
    assert "No such file or directory" in records["files"]["completion"]
    assert "No space left on device" in records["disk"]["completion"]
    assert "MemoryError" in records["memory"]["completion"]
    # The host: the token never left, nothing connected to it, no process or disk left over.
    assert all(token not in json.dumps(r) for r in records.values())
    assert Path(planted["file"]).read_text() == token
    assert hits == 0
    assert _bwrap_processes() == processes_before
    assert elapsed < 60


def _host_uids_of(marker: str) -> set[int]:
    """The host uids of the processes whose command line holds ``marker``."""
    uids = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                status = Path(f"/proc/{pid}/status").read_text()
                uids.add(int(status.split("Uid:")[1].split()[0]))
        except (OSError, IndexError):
            continue
    return uids


@pytest.mark.skipif(os.geteuid() != 0, reason="bwrap drops to nobody only when evalgate is root")
def test_a_bridge_sandbox_never_runs_bwrap_as_host_root() -> None:
    """The bridge folder is bound in: it must not keep bwrap from dropping to nobody."""
    route = ModelRoute(base_url="http://127.0.0.1:9/v1", model="m")
    marker = secrets.token_hex(8)

    async def go(network: str) -> set[int]:
        config = SandboxConfig(timeout_s=30, network=network, model=route)  # type: ignore[arg-type]
        async with await open_backend("local").create(config) as box:
            r = await box.exec(
                ["sh", "-c", f"sh -c 'sleep 30; : {marker}' & echo started"], timeout_s=10
            )
            assert r.ok, r.stderr
            return _host_uids_of(marker)

    for network in ("none", "model-only"):
        uids = run(go(network))
        assert uids and 0 not in uids, (network, uids)  # the sandbox's processes are not root


@pytest.mark.skipif(os.geteuid() != 0, reason="bwrap drops to nobody only when evalgate is root")
def test_a_mount_from_a_private_folder_does_not_keep_bwrap_root(tmp_path: Path) -> None:
    """An agent binary under a 0700 folder is bound from a readable copy, not by host root."""
    private = tmp_path / "private"
    (private / "skills").mkdir(parents=True)
    (private / "agent").write_text("#!/bin/sh\necho agent ran\n")
    (private / "agent").chmod(0o700)
    (private / "skills" / "a.md").write_text("skill\n")
    private.chmod(0o700)
    mounts = (
        Mount(str(private / "agent"), "/opt/evalgate/bin/agent"),
        Mount(str(private / "skills"), "/opt/evalgate/skills"),
    )
    route = ModelRoute(base_url="http://127.0.0.1:9/v1", model="m")
    marker = secrets.token_hex(8)

    async def go() -> tuple[str, set[int]]:
        config = SandboxConfig(timeout_s=30, network="model-only", model=route, mounts=mounts)
        async with await open_backend("local").create(config) as box:
            r = await box.exec(
                ["sh", "-c", f"sh -c 'sleep 30; : {marker}' & /opt/evalgate/bin/agent && "
                 "cat /opt/evalgate/skills/a.md"], timeout_s=10)  # fmt: skip
            assert r.ok, r.stderr
            return r.stdout, _host_uids_of(marker)

    out, uids = run(go())
    assert out == "agent ran\nskill\n"
    assert uids and 0 not in uids, uids

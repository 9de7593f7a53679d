"""One contract for every sandbox backend available here: subprocess (the non-isolating
reference), local (bubblewrap), docker (with a daemon) and modal (with credentials).

Offline checks of what the docker and modal backends would ask for run everywhere.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest

from evalgate.sandbox import (
    BACKENDS,
    ModelRoute,
    Mount,
    SandboxConfig,
    SandboxError,
    SandboxFileError,
    backend_class,
    open_backend,
)

T = TypeVar("T")
# conftest's autouse fixture removes *_SECRET variables; keep Modal's for the live test.
_MODAL_CREDENTIALS = {
    k: os.environ[k] for k in ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET") if k in os.environ
}


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


def _unavailable(name: str) -> str | None:
    if name == "modal" and len(_MODAL_CREDENTIALS) < 2:
        return "Modal live tests need MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"
    try:
        return backend_class(name).unavailable()
    except SandboxError as exc:
        return str(exc)


@pytest.fixture(params=["subprocess", "local", "docker", "modal"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    reason = _unavailable(request.param)
    if reason is not None:
        pytest.skip(f"{request.param}: {reason}")
    for key, value in _MODAL_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    return open_backend(request.param)


CONFIG = SandboxConfig(timeout_s=120, memory_mb=512, pids=128, disk_mb=64)


def test_exec_basics(backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOST_ONLY_TOKEN", "must-not-leak")

    async def go() -> None:
        async with await backend.create(CONFIG) as box:
            r = await box.exec("echo out; echo err >&2; exit 3")
            assert (r.exit_code, r.stdout, r.stderr, r.timed_out) == (3, "out\n", "err\n", False)
            assert not r.ok
            r = await box.exec(["cat"], stdin="from stdin\n")
            assert r.ok and r.stdout == "from stdin\n"
            r = await box.exec(
                ["sh", "-c", 'echo "$FOO|${HOST_ONLY_TOKEN:-unset}"'], env={"FOO": "1"}
            )
            assert r.stdout == "1|unset\n"  # the host's environment never reaches the sandbox
            r = await box.exec("touch here.txt && ls")
            assert "here.txt" in r.stdout  # the default cwd is the workspace
            r = await box.exec(["no-such-command-xyz"])
            assert r.exit_code == 127 and not r.timed_out
            r = await box.exec("kill -9 $$")
            assert r.exit_code == 137 and not r.timed_out  # killed by a signal: 128 + 9

    run(go())


def test_timeout_kills_the_command_and_its_children(backend: Any) -> None:
    async def go() -> None:
        async with await backend.create(CONFIG) as box:
            t0 = time.perf_counter()
            r = await box.exec("sleep 30 & sleep 30; echo never", timeout_s=1.0)
            assert r.timed_out and r.exit_code == 137 and "never" not in r.stdout
            assert time.perf_counter() - t0 < 15
            r = await box.exec("echo still usable")
            assert r.ok and r.stdout == "still usable\n"

    run(go())


def test_background_process_does_not_hold_exec(backend: Any) -> None:
    async def go() -> None:
        async with await backend.create(CONFIG) as box:
            t0 = time.perf_counter()
            r = await box.exec("sleep 20 & echo started", timeout_s=30)
            assert r.ok and r.stdout == "started\n"
            assert time.perf_counter() - t0 < 10

    run(go())


def test_files_round_trip(backend: Any) -> None:
    async def go() -> None:
        async with await backend.create(CONFIG) as box:
            blob = bytes(range(256)) * 100
            await box.write_file("deep/nested/blob.bin", blob)
            assert await box.read_file("deep/nested/blob.bin") == blob
            await box.write_file("run.sh", "echo ran\n", mode=0o755)
            r = await box.exec("./run.sh")
            assert r.stdout == "ran\n"
            with pytest.raises(SandboxFileError):
                await box.read_file("missing.txt")
            with pytest.raises(SandboxFileError):
                await box.read_file("deep/nested/blob.bin", max_bytes=100)

    run(go())


def test_a_workspace_copies_into_another_sandbox(backend: Any) -> None:
    """read_tree: binary content, locked files, and links kept as links (never followed)."""

    async def go() -> None:
        blob = bytes(range(256)) * 100
        async with await backend.create(CONFIG) as box:
            await box.write_file("data/blob.bin", blob)
            await box.exec(
                "echo secret > data/locked && chmod 000 data/locked data && "
                "ln -s /etc/hostname link && mkfifo pipe"
            )
            tree = await box.read_tree()
            with pytest.raises(SandboxFileError, match="larger than"):
                await box.read_tree(max_bytes=1000)
        async with await backend.create(CONFIG) as fresh:
            r = await fresh.exec(["tar", "-x", "-f", "-"], stdin=tree)
            assert r.ok, r.stderr
            assert await fresh.read_file("data/blob.bin") == blob
            r = await fresh.exec("cat data/locked; readlink link; test -p pipe && echo fifo")
            assert r.stdout.split() == ["secret", "/etc/hostname", "fifo"], r

    run(go())


def test_output_is_capped_not_blocking(backend: Any) -> None:
    async def go() -> None:
        async with await backend.create(CONFIG) as box:
            r = await box.exec("head -c 3000000 /dev/zero | tr '\\0' x", max_output=1000)
            assert r.ok and r.truncated and len(r.stdout) == 1000

    run(go())


def test_concurrent_execs_and_sandboxes_are_separate(backend: Any) -> None:
    async def go() -> None:
        boxes = await asyncio.gather(*(backend.create(CONFIG) for _ in range(4)))
        try:
            await asyncio.gather(*(b.write_file("id.txt", f"box {i}") for i, b in enumerate(boxes)))
            reads = await asyncio.gather(*(b.read_file("id.txt") for b in boxes))
            assert reads == [f"box {i}".encode() for i in range(4)]
            results = await asyncio.gather(*(boxes[0].exec(f"echo {i}") for i in range(6)))
            assert [r.stdout for r in results] == [f"{i}\n" for i in range(6)]
        finally:
            await asyncio.gather(*(b.destroy() for b in boxes))

    run(go())


def test_destroy_is_final_and_idempotent(backend: Any) -> None:
    async def go() -> None:
        box = await backend.create(CONFIG)
        await box.exec("sleep 60 &")
        await box.destroy()
        await box.destroy()
        with pytest.raises(SandboxError):
            await box.exec("true")

    run(go())


def test_kill_all_ends_leftover_processes(backend: Any) -> None:
    if not backend.isolating:
        pytest.skip("the reference backend must never run `kill -9 -1` on the host")

    async def go() -> None:
        # Left-overs carry a marker in their command line, counted through /proc (images may
        # have no `ps`; a container's own keeper process may also be a `sleep`). The pattern
        # "leftover-mark[e]r" matches the sleepers, not the grep that looks for them.
        sleeper = "python3 -c 'import time; time.sleep(300)' leftover-marker"
        count = "grep -l 'leftover-mark[e]r' /proc/[0-9]*/cmdline 2>/dev/null | wc -l"
        async with await backend.create(CONFIG) as box:
            await box.exec(f"({sleeper} &) ; {sleeper} & echo")
            before = await box.exec(count)
            assert int(before.stdout) >= 2
            await box.kill_all()
            after = await box.exec(count)
            assert after.stdout.strip() == "0"

    run(go())


def test_limits_are_described(backend: Any) -> None:
    limits = backend.limits(CONFIG)
    if backend.isolating:
        assert {"wall time", "processes", "memory", "disk", "cpu", "network"} <= set(limits)


def test_registry_is_lazy_and_complete() -> None:
    assert set(BACKENDS) == {"local", "docker", "modal", "subprocess"}
    with pytest.raises(SandboxError, match="unknown sandbox backend"):
        backend_class("nope")


# -- offline: what the docker and modal backends would ask for ------------------------------


def test_docker_run_arguments() -> None:
    from evalgate.sandbox.docker import DockerSandbox

    cfg = SandboxConfig(
        cpus=2, memory_mb=768, pids=64, disk_mb=100, labels={"evalgate.run": "r1"},
        mounts=(Mount("/host/agent", "/opt/evalgate/bin/agent"),),
    )  # fmt: skip
    argv = DockerSandbox(cfg, "docker").run_argv()
    joined = " ".join(argv)
    for flag in (
        "--network none",
        "--read-only",
        "--cap-drop ALL",
        "--security-opt no-new-privileges",
        "--cpus 2",
        "--memory 768m",
        "--memory-swap 768m",
        "--pids-limit 64",
        "--tmpfs /workspace:rw,exec,size=100m,mode=1777",
        "--label evalgate.sandbox=1",
        "--label evalgate.run=r1",
        "-v /host/agent:/opt/evalgate/bin/agent:ro",
    ):
        assert flag in joined, flag
    assert argv[-3:] == ["python:3.11-slim", "sleep", "infinity"]


def _modal_backend() -> Any:
    pytest.importorskip("modal")
    from evalgate.sandbox.modal import ModalBackend

    return ModalBackend()


def test_modal_sandbox_spec_offline() -> None:
    backend = _modal_backend()
    import modal as modal_sdk

    cfg = SandboxConfig(cpus=1.5, memory_mb=2048, timeout_s=100, labels={"evalgate.run": "r"})
    kwargs = backend.sandbox_kwargs(cfg)
    inspect.signature(modal_sdk.Sandbox.create).bind("sleep", "infinity", **kwargs)
    assert kwargs["block_network"] is True
    assert kwargs["cpu"] == (1.5, 1.5) and kwargs["memory"] == (2048, 2048)
    assert kwargs["timeout"] == 160 and kwargs["workdir"] == "/workspace"
    assert kwargs["tags"] == {"evalgate": "1", "evalgate.run": "r"}

    route = ModelRoute(base_url="https://api.example.com/v1", model="m", api_key="sk-test")
    kwargs = backend.sandbox_kwargs(SandboxConfig(network="model-only", model=route))
    inspect.signature(modal_sdk.Sandbox.create).bind("sleep", "infinity", **kwargs)
    assert "block_network" not in kwargs
    assert kwargs["outbound_domain_allowlist"] == ["api.example.com"]
    assert len(kwargs["secrets"]) == 1

    ip_route = ModelRoute(base_url="http://1.2.3.4:8000/v1", model="m")
    kwargs = backend.sandbox_kwargs(SandboxConfig(network="model-only", model=ip_route))
    assert kwargs["outbound_cidr_allowlist"] == ["1.2.3.4/32"]

    local = ModelRoute(base_url="http://127.0.0.1:8000/v1", model="m")
    with pytest.raises(SandboxError, match="not reachable from Modal"):
        backend.sandbox_kwargs(SandboxConfig(network="model-only", model=local))


def test_modal_unavailable_without_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("modal")
    from evalgate.sandbox import modal as modal_backend

    monkeypatch.delenv("MODAL_TOKEN_ID", raising=False)
    monkeypatch.setattr(modal_backend.os.path, "exists", lambda p: False)
    assert "credentials" in (modal_backend.ModalBackend.unavailable() or "")
    with pytest.raises(SandboxError, match="unavailable"):
        open_backend("modal")


@pytest.mark.skipif(len(_MODAL_CREDENTIALS) < 2, reason="needs MODAL_TOKEN_ID / MODAL_TOKEN_SECRET")
def test_modal_live_parallel_sandboxes_are_all_terminated(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("modal")
    for key, value in _MODAL_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    from evalgate.sandbox.modal import ModalBackend

    run_tag = {"evalgate.run": f"contract-{os.getpid()}-{time.time_ns()}"}
    config = SandboxConfig(timeout_s=120, labels=run_tag)

    async def go() -> None:
        backend = ModalBackend()
        boxes = await asyncio.gather(*(backend.create(config) for _ in range(4)))
        results = await asyncio.gather(*(b.exec(f"echo {i}") for i, b in enumerate(boxes)))
        assert [r.stdout for r in results] == [f"{i}\n" for i in range(4)]
        await boxes[0].destroy()
        await backend.aclose()  # the other three, as a crashed caller would leave them
        assert not backend._live and all(b._destroyed for b in boxes)
        await backend.terminate_tagged(run_tag)  # the net for anything the SDK lost track of

    run(go())

"""Which sandbox backend runs, and what the docker backend hands the daemon from inside a
container (the Action's): host paths for mounts, none of our environment."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from evalgate.sandbox import Mount, SandboxConfig, SandboxError, backend_class, open_backend
from evalgate.sandbox import docker as docker_mod
from evalgate.sandbox.base import ExecCall
from evalgate.sandbox.docker import DockerBackend, DockerSandbox, host_path, own_container

CID = "0123456789abcdef" * 4
MOUNTS = (  # what `docker inspect` says of the Action's container, longest destination first
    ("/github/file_commands", "/home/runner/work/_temp/_runner_file_commands"),
    ("/github/runner_temp", "/home/runner/work/_temp"),
    ("/github/workspace", "/home/runner/work/repo/repo"),
    ("/var/run/docker.sock", "/var/run/docker.sock"),
)


def _availability(monkeypatch: pytest.MonkeyPatch, local: str | None, docker: str | None) -> None:
    monkeypatch.setattr(backend_class("local"), "unavailable", classmethod(lambda cls: local))
    monkeypatch.setattr(DockerBackend, "unavailable", classmethod(lambda cls: docker))
    monkeypatch.setattr(docker_mod.shutil, "which", lambda name: f"/usr/bin/{name}")


def test_local_falls_back_to_docker_where_bubblewrap_cannot_create_namespaces(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    reason = "bubblewrap cannot create a sandbox here: No permissions to create new namespace"
    _availability(monkeypatch, reason, None)
    backend = open_backend("local")
    assert isinstance(backend, DockerBackend)
    assert f"sandbox: {reason}; using the docker backend" in capsys.readouterr().err


def test_local_is_local_where_bubblewrap_works(monkeypatch: pytest.MonkeyPatch) -> None:
    _availability(monkeypatch, None, None)
    assert open_backend("local").name == "local"


def test_no_fallback_names_both_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    _availability(monkeypatch, "bubblewrap is not installed", "no Docker daemon: refused")
    with pytest.raises(SandboxError) as err:
        open_backend("local")
    assert "bubblewrap is not installed" in str(err.value)
    assert "docker fallback is unavailable too: no Docker daemon: refused" in str(err.value)


def test_an_explicit_docker_backend_never_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    _availability(monkeypatch, None, "no Docker daemon: refused")
    with pytest.raises(SandboxError, match="'docker' is unavailable"):
        open_backend("docker")


def test_own_container_is_read_from_mountinfo(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text(
        "1 0 0:1 / / rw - overlay overlay rw\n"
        f"2 1 8:1 /var/lib/docker/containers/{CID}/hostname /etc/hostname rw - ext4 /dev/sda1\n"
    )
    assert own_container(str(info)) == CID
    info.write_text("1 0 0:1 / / rw - ext4 /dev/sda1 rw\n")
    assert own_container(str(info)) is None


@pytest.fixture
def in_container(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(docker_mod, "_mounts", lambda docker: MOUNTS)


@pytest.mark.usefixtures("in_container")
def test_paths_are_translated_to_the_hosts() -> None:
    assert host_path("docker", "/github/workspace/tools/agent") == (
        "/home/runner/work/repo/repo/tools/agent"
    )
    assert host_path("docker", "/github/runner_temp") == "/home/runner/work/_temp"
    with pytest.raises(SandboxError, match="inside this container only"):
        host_path("docker", "/tmp/evalgate-dkr-1/run")


def test_a_prefix_is_not_a_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(docker_mod, "_mounts", lambda docker: (("/github/workspace", "/h/ws"),))
    with pytest.raises(SandboxError):
        host_path("docker", "/github/workspace-other/x")


@pytest.mark.usefixtures("in_container")
def test_run_argv_mounts_host_paths_and_carries_none_of_our_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACTIONS_RUNTIME_TOKEN", "runtime-token-sentinel")
    config = SandboxConfig(mounts=(Mount("/github/workspace/bin/agent", "/opt/agent"),))
    box = DockerSandbox(config, "docker")
    box._dir = "/github/runner_temp/evalgate-dkr-x"
    argv = box.run_argv()
    assert "/home/runner/work/_temp/evalgate-dkr-x/run:/run/evalgate:ro" in argv
    assert "/home/runner/work/repo/repo/bin/agent:/opt/agent:ro" in argv
    assert not any("runtime-token-sentinel" in a or a.startswith("--env-file") for a in argv)


def test_exec_passes_only_the_environment_it_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTIONS_RUNTIME_TOKEN", "runtime-token-sentinel")
    seen: list[list[str]] = []

    async def fake_run(cmd: list[str], **kw: object) -> tuple[int, bytes, bytes, bool, bool]:
        seen.append(cmd)
        return 0, b"", b"", False, False

    monkeypatch.setattr(docker_mod, "run_process", fake_run)
    box = DockerSandbox(SandboxConfig(), "docker")
    asyncio.run(box._exec(ExecCall(["true"], timeout_s=5, env={"A": "1"}, max_output=9)))
    (cmd,) = seen
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "-e"] == ["A=1"]
    assert "runtime-token-sentinel" not in " ".join(cmd)


def test_scratch_goes_under_a_mounted_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(docker_mod, "_mounts", lambda docker: ((str(tmp_path), "/host/tmp"),))
    monkeypatch.setenv("RUNNER_TEMP", str(tmp_path))
    assert docker_mod.scratch_root("docker") == str(tmp_path)
    monkeypatch.setattr(docker_mod, "_mounts", lambda docker: None)
    assert docker_mod.scratch_root("docker") is None  # on a host: the default temp dir


def test_kill_all_cannot_reach_the_containers_own_processes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`kill -9 -1` as the sandbox user must not end `sleep infinity` (the container would stop:
    "is not running" for every later exec, the agent task's check included)."""
    seen: list[list[str]] = []

    async def fake_run(cmd: list[str], **kw: object) -> tuple[int, bytes, bytes, bool, bool]:
        seen.append(cmd)
        return 0, b"", b"", False, False

    monkeypatch.setattr(docker_mod, "run_process", fake_run)
    box = DockerSandbox(SandboxConfig(), "docker")
    run_user = box.run_argv()[box.run_argv().index("--user") + 1]
    asyncio.run(box.kill_all())
    (cmd,) = seen
    exec_user = cmd[cmd.index("--user") + 1]
    assert run_user.split(":")[0] != exec_user.split(":")[0] != "0"

"""The container test's fixtures: a Docker daemon, the image under test, a git remote.

Opt-in (it builds the image and runs the embedded model in it: minutes): ``pytest -m container
tests/container`` or ``EVALGATE_IMAGE=<tag>``; .ci/run does the former with a daemon it starts.
Skipped, with the reason, when no daemon answers.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "github"))  # fake_github, shared with the GitHub tests


def _opted_in(config: pytest.Config) -> bool:
    return "container" in (config.option.markexpr or "") or bool(os.environ.get("EVALGATE_IMAGE"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _opted_in(config):
        return
    skip = pytest.mark.skip(
        reason="container test: opt in with `pytest -m container tests/container` (.ci/run does)"
    )
    for item in items:
        if "container" in item.keywords:
            item.add_marker(skip)


def docker_socket() -> str:
    """The daemon's socket on this host (mounted into the Action's container, as the runner
    mounts its own)."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        pytest.skip(f"container test: DOCKER_HOST={host} is not a local socket to mount")
    return host.removeprefix("unix://")


@pytest.fixture(scope="session")
def docker() -> str:
    found = shutil.which("docker")
    if found is None:
        pytest.skip("container test: the docker CLI is not installed")
    out = subprocess.run([found, "info", "--format", "{{.ServerVersion}}"], capture_output=True)
    if out.returncode != 0:
        pytest.skip(f"container test: no Docker daemon: {out.stderr.decode().strip()[:200]}")
    return found


@pytest.fixture(scope="session")
def image(docker: str) -> str:
    """EVALGATE_IMAGE, or this checkout's Dockerfile built now (cached layers make a rebuild
    after a source change cost one layer)."""
    named = os.environ.get("EVALGATE_IMAGE")
    if named:
        return named
    tag = "evalgate:container-test"
    done = subprocess.run(
        [docker, "build", "--network", "host", "-t", tag, str(ROOT)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return tag


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def git_remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A bare origin served by `git daemon` on loopback: a remote as the runner's checkout has
    one (another owner's files, reached over the network), so neither the container's root nor
    the runner's uid 1001 trips git's ownership check on it. (bare repo path, URL)."""
    base = tmp_path_factory.mktemp("remote")
    origin = base / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    port = _free_port()
    proc = subprocess.Popen(
        ["git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack",
         f"--base-path={base}", "--listen=127.0.0.1", f"--port={port}", str(base)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:  # readiness of a server we started: poll its port
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"git daemon did not start (exit {proc.poll()})")
                time.sleep(0.05)
        yield origin, f"git://127.0.0.1:{port}/origin.git"
    finally:
        proc.terminate()
        proc.wait(10)

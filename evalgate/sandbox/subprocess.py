"""The reference backend: plain subprocesses in a temporary folder. It contains NOTHING.

For tests and benchmarks only (the contract suite runs against it; the latency bench compares
bubblewrap with it). It is not selectable in evals.yaml. The sandbox's ``/workspace`` is a
fresh temporary folder: the working directory and path arguments under ``/workspace`` are
mapped to it, text inside scripts is not, so tests use relative paths.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile

from evalgate.sandbox._io import Drain, Feed, wait_exit
from evalgate.sandbox.base import WORKDIR, ExecCall, Sandbox, SandboxBackend, SandboxConfig

__all__ = ["SubprocessBackend", "SubprocessSandbox", "run_process"]


async def run_process(
    argv: list[str],
    *,
    timeout_s: float,
    stdin: bytes | None,
    max_output: int,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
) -> tuple[int, bytes, bytes, bool, bool]:
    """Run a host process in its own session; at the deadline kill its process group.

    Returns (exit_code, stdout, stderr, timed_out, truncated), exit codes as the shell reports
    them (128 + N for signal N). Returns when the process exits, even if a background child of
    it still holds the output pipes (what it wrote so far is kept).
    """
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        proc = subprocess.Popen(
            argv, stdin=in_r, stdout=out_w, stderr=err_w, env=env, cwd=cwd, start_new_session=True
        )
    except OSError as exc:
        for fd in (in_w, out_r, err_r):
            os.close(fd)
        return 127, b"", f"cannot run {argv[0]!r}: {exc}\n".encode(), False, False
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    out, err = Drain(out_r, max_output), Drain(err_r, max_output)
    feed = Feed(in_w, stdin or b"")
    timed_out = False
    try:
        await asyncio.wait_for(wait_exit(proc.pid), timeout_s)
    except TimeoutError:
        timed_out = True
    finally:
        if proc.poll() is None:  # timed out, or we were cancelled
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        code = proc.wait()  # exited or killed: immediate
        feed.close()
        await asyncio.wait([out.done, err.done], timeout=0.25)
        out.close()
        err.close()
    code = 128 - code if code < 0 else code
    return code, bytes(out.buf), bytes(err.buf), timed_out, out.truncated or err.truncated


class SubprocessSandbox(Sandbox):
    backend = "subprocess"

    def __init__(self, config: SandboxConfig) -> None:
        super().__init__(config)
        self.id = "proc-" + secrets.token_hex(4)
        self.root = tempfile.mkdtemp(prefix="evalgate-proc-")
        self.scratch = tempfile.mkdtemp(prefix="evalgate-proc-tmp-")

    def _path(self, cwd: str) -> str:
        if cwd == WORKDIR or cwd.startswith(WORKDIR + "/"):
            return self.root + cwd[len(WORKDIR) :]
        return cwd

    async def _exec(self, call: ExecCall) -> tuple[int, bytes, bytes, bool, bool]:
        argv, timeout_s, stdin, env, cwd, max_output = call.unpack()
        self._check_alive()
        # Path arguments naming the workspace are mapped; text inside scripts is not.
        argv = [self._path(a) if a.startswith(WORKDIR) else a for a in argv]
        return await run_process(
            argv,
            timeout_s=timeout_s,
            stdin=stdin,
            max_output=max_output,
            env={**env, "HOME": self.scratch, "TMPDIR": self.scratch},
            cwd=self._path(cwd),
        )

    async def kill_all(self) -> None:
        # Never the base class's `kill -9 -1`: here that would be the host's every process.
        # Left-over background processes of earlier execs are not tracked; nothing is killed.
        return None

    async def destroy(self) -> None:
        if not self._destroyed:
            self._destroyed = True
            shutil.rmtree(self.root, ignore_errors=True)
            shutil.rmtree(self.scratch, ignore_errors=True)


class SubprocessBackend(SandboxBackend):
    name = "subprocess"
    isolating = False

    @classmethod
    def unavailable(cls) -> str | None:
        return None

    async def create(self, config: SandboxConfig) -> SubprocessSandbox:
        return SubprocessSandbox(config)

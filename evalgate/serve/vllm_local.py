"""``vllm serve`` as a child process on this (GPU) machine, on a loopback port.

vLLM is not a dependency of evalgate (it pins its own CUDA build of torch): the runner installs
it, and evalgate only needs the ``vllm`` executable on PATH. The server runs in its own process
group, so stopping it reaches the engine-core and tensor-parallel worker processes it spawns:
SIGTERM to the group, a grace period for vLLM's own shutdown, then SIGKILL to whatever is left.

vLLM runs code the candidate names (a model's ``trust_remote_code``, a ``--tool-parser-plugin``
file), so it is repository code too (``evalgate._repo_code``). It cannot run in the bubblewrap jail
the inspect and verifiers workers use: it needs the GPU's device files and driver libraries and
writes the weights into the Hugging Face cache. What it gets instead: a scrubbed environment
(:func:`server_env`: what a program needs, the GPU runtime's and vLLM's own settings, the Hugging
Face cache and token it downloads with, its per-run key — no job token, no model or judge key),
no capability beyond root's file access when evalgate is root, no way into the gate's memory,
and its own process group, stopped with the run.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from evalgate._repo_code import RESERVED, repo_env, spawn_options
from evalgate.errors import InfraError
from evalgate.serve._health import NotReady, wait_until_ready
from evalgate.serve._process import die_with_parent, spawn_group, stop_group
from evalgate.serve._vllm_args import serve_command
from evalgate.serve.base import Endpoint
from evalgate.serve.chat_template import ChatTemplate, resolve_chat_template

if TYPE_CHECKING:
    from typing import Unpack

    from evalgate.config.spec import VLLMModel
    from evalgate.serve.base import ServeOptions

__all__ = ["VLLMServer", "server_env"]

INSTALL_HINT = "install vLLM on the GPU runner (pip install vllm) so that `vllm` is on PATH"
HOST = "127.0.0.1"


# What vLLM and the GPU stack read (settings, not credentials); VLLM_API_KEY is set per run.
_SERVER_PREFIXES = (
    "CUDA_",
    "NVIDIA_",
    "NCCL_",
    "VLLM_",
    "TORCH",
    "PYTORCH_",
    "TRITON_",
    "HF_HUB_",
    "HF_DATASETS_",
    "TRANSFORMERS_",
    "OMP_",
    "MKL_",
)
# The download credential of the weights (a gated model): the one secret vLLM needs.
_SERVER_NAMES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT", "LD_LIBRARY_PATH",
                 "VIRTUAL_ENV", "CONDA_PREFIX")  # fmt: skip


def server_env(environ: dict[str, str], api_key: str) -> dict[str, str]:
    """The vLLM process's environment: ``repo_code.repo_env``'s (what any program needs), the
    names vLLM and the GPU runtime read, the Hugging Face token, and its own ``api_key``; never
    the job's tokens (``GITHUB_*``, ``INPUT_*``, ``ACTIONS_*``, ``RUNNER_*``) or another key."""
    names = [k for k in environ if k.startswith(_SERVER_PREFIXES) or k in _SERVER_NAMES]
    env = repo_env([k for k in names if not k.startswith(RESERVED)], environ=environ)
    env.update({"VLLM_API_KEY": api_key, "PYTHONUNBUFFERED": "1"})
    return env


def _preexec(*steps: Callable[[], None] | None) -> Callable[[], None]:
    def run() -> None:
        for step in steps:
            if step is not None:
                step()

    return run


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _port_taken(path: Path, offset: int) -> bool:
    """Whether the log written since ``offset`` reports a port already in use."""
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            return b"address already in use" in fh.read().lower()
    except OSError:
        return False


def _tail(path: Path, lines: int = 5) -> str:
    """The last lines of the server log, for an error message that names the cause."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    last = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(last)


class VLLMServer:
    """A local vLLM OpenAI-compatible server, health-checked, always stopped."""

    stop_grace_s = 30.0  # vLLM drains requests and joins its workers on SIGTERM
    poll_interval_s = 0.5

    def __init__(self, model: VLLMModel, **ctx: Unpack[ServeOptions]) -> None:
        self.model = model
        self.environ = ctx["environ"]
        self.config_dir = ctx.get("config_dir") or Path.cwd()
        self.benchmarks = tuple(ctx.get("benchmarks", ()))
        # Absolute: nothing the server is told may depend on the directory it runs in.
        self.log_path: Path | None = ctx["log_dir"].absolute() / f"model_server-{model.name}.log"
        self.chat_template: ChatTemplate | None = None  # set by __enter__, for run_config.json
        self._proc: subprocess.Popen[bytes] | None = None
        # The port is on loopback, but other users of a shared GPU box can reach it too: a
        # per-run key keeps them off (vLLM reads VLLM_API_KEY; /health stays open).
        self._api_key = secrets.token_urlsafe(24)

    def executable(self) -> str:
        found = shutil.which("vllm", path=self.environ.get("PATH", os.defpath))
        if found is None:
            raise InfraError(f"model {self.model.name!r}: `vllm` is not on PATH; {INSTALL_HINT}")
        return found

    def command(self, port: int, *, executable: str = "vllm") -> list[str]:
        template = self.chat_template.server_arg if self.chat_template else None
        return serve_command(
            self.model,
            served_model_name=self.model.name,
            host=HOST,
            port=port,
            chat_template=template,
            executable=executable,
        )

    def __enter__(self) -> Endpoint:
        exe = self.executable()
        # Before the server starts: a model without a usable template fails here, not with a
        # 400 on every request after the weights are loaded.
        self.chat_template = resolve_chat_template(
            self.model, config_dir=self.config_dir, benchmarks=self.benchmarks, environ=self.environ
        )
        assert self.log_path is not None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # A free port can be taken before vLLM binds it. Only that is retried (on another
        # port): a start that failed for any other reason would fail again, minutes later.
        attempts = 1 if self.model.port else 3
        last = "no attempt"
        try:
            for _ in range(attempts):
                port = self.model.port or _free_port()
                offset = self.log_path.stat().st_size if self.log_path.exists() else 0
                self._start(exe, port)
                try:
                    wait_until_ready(
                        f"http://{HOST}:{port}",
                        served_model=self.model.name,
                        api_key=self._api_key,
                        timeout_s=self.model.startup_timeout_s,
                        interval_s=self.poll_interval_s,
                        check_alive=self._exited,
                    )
                except NotReady as exc:
                    last = str(exc)
                    self._stop()
                    if _port_taken(self.log_path, offset):
                        continue
                    break
                return Endpoint(
                    base_url=f"http://{HOST}:{port}/v1",
                    model=self.model.name,
                    api_key=self._api_key,
                    model_id=self.model.model_id,
                )
        except BaseException:
            self._stop()  # Ctrl-C during a ten-minute start must not leave a GPU server behind
            raise
        tail = _tail(self.log_path)
        raise InfraError(
            f"model {self.model.name!r}: vLLM did not start: {last}"
            + (f"; log ends: {tail}" if tail else "")
            + f" (log: {self.log_path})"
        )

    def _exited(self) -> str | None:
        code = self._proc.poll() if self._proc is not None else None
        return None if code is None else f"vllm exited with code {code}"

    def _start(self, exe: str, port: int) -> None:
        cmd = self.command(port, executable=exe)
        assert self.log_path is not None  # set in __init__: this server always logs
        self._proc = spawn_group(
            cmd,
            self.log_path,
            env=server_env(self.environ, self._api_key),
            # The kernel kills it if evalgate dies first; a root gate's capabilities (but its
            # file access) are dropped, and the gate made unreadable to it (repo_code).
            preexec_fn=_preexec(die_with_parent(), spawn_options().get("preexec_fn")),
            note=f"[evalgate] {' '.join(cmd)}",
        )

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        stop_group(proc, grace_s=self.stop_grace_s)

    def __exit__(self, *exc: object) -> None:
        self._stop()

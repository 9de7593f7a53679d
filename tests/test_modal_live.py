"""Live: a real ephemeral vLLM server on Modal, one chat completion, torn down at the end; and
`stop --all` stopping a live ephemeral app by its id.

Runs only when Modal credentials are in the environment (MODAL_TOKEN_ID and MODAL_TOKEN_SECRET,
optionally MODAL_ENVIRONMENT); skipped otherwise. It costs a few GPU-minutes (an L4 by default;
EVALGATE_LIVE_MODAL_GPU picks another) and, on a cold image cache, 10+ minutes of image build.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import time
from pathlib import Path

import pytest

from evalgate.config.spec import ModalVLLMModel, Sampling
from evalgate.serve.client import ChatClient

# Read at import: the autouse fixture in conftest.py removes *_SECRET variables from os.environ
# before each test (no test may see a real token by accident); this one asks for it explicitly.
_CREDENTIALS = {
    name: os.environ[name]
    for name in ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "MODAL_ENVIRONMENT")
    if os.environ.get(name)
}

pytestmark = [
    pytest.mark.skipif(
        not {"MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"} <= set(_CREDENTIALS),
        reason="needs Modal credentials (MODAL_TOKEN_ID / MODAL_TOKEN_SECRET)",
    ),
    pytest.mark.skipif(importlib.util.find_spec("modal") is None, reason="needs modal"),
]


def test_ephemeral_server_answers_and_is_torn_down(tmp_path: Path) -> None:
    from evalgate.serve.modal_vllm import ModalOps, ModalVLLMServer

    model = ModalVLLMModel(
        name="live-qwen",
        backend="modal-vllm",
        model="Qwen/Qwen2.5-0.5B-Instruct",
        gpu=os.environ.get("EVALGATE_LIVE_MODAL_GPU", "L4"),
        max_model_len=2048,
        gpu_memory_utilization=0.85,
        scaledown_window_s=60,
        app_name="evalgate-live-test",
    )
    environ = {**os.environ, **_CREDENTIALS}
    server = ModalVLLMServer(model, log_dir=tmp_path, environ=environ, config_dir=tmp_path)
    with server as endpoint:

        async def ask() -> str:
            async with ChatClient(endpoint, Sampling(max_tokens=8), timeout_s=600) as client:
                reply = await client.chat([{"role": "user", "content": "Say OK."}])
                return reply.text

        assert asyncio.run(ask()).strip()
    # Torn down: the ephemeral app is no longer among the live managed apps.
    ops = ModalOps(environ)
    try:
        deadline = time.monotonic() + 120  # stopping takes a moment
        while "evalgate-live-test" in [label for _, label, _ in ops.managed_apps()]:
            assert time.monotonic() < deadline, "the ephemeral app is still live"
            time.sleep(5)
    finally:
        ops.close()


def test_stop_all_finds_a_live_ephemeral_app(tmp_path: Path) -> None:
    """An ephemeral app (no deployment name) tagged as evalgate's, left running as a killed CI
    job would leave it: `stop --all` finds it by app id and stops it. CPU only, seconds."""
    import modal

    from evalgate.serve import lifecycle
    from evalgate.serve.modal_vllm import ModalOps

    environ = {**os.environ, **_CREDENTIALS}
    tags = {"managed-by": "evalgate", "evalgate-model": "live-leftover"}
    app = modal.App("evalgate-live-leftover", tags=tags, include_source=False)

    def idle() -> None:
        pass

    app.function(serialized=True, name="idle")(idle)
    ops = ModalOps(environ, show_output=False)
    try:
        with app.run(client=ops.client, environment_name=ops.environment):
            app_id = app.app_id
            assert app_id in [found for found, _, _ in ops.managed_apps()]
            results = lifecycle.stop(None, environ=environ, all_apps=True)
            assert any(r.state == "stopped" and r.model == "live-leftover" for r in results)
            assert app_id not in [found for found, _, _ in ops.managed_apps()]
    finally:
        ops.close()

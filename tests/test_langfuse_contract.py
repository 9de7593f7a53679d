"""A run's Langfuse traces, as Langfuse's ingestion API defines them: `evalgate local` on the
`litellm` backend with Langfuse keys set sends its traces to a loopback stand-in, which checks
each request as Langfuse's server would (POST /api/public/ingestion, Basic auth with the
project's keys, answered 207 per event) and keeps the batches; every event is then parsed by the
API's own types as Langfuse's v2 SDK ships them (Fern-generated from Langfuse's API definition,
the source of its published OpenAPI description), in the proxy's interpreter where that SDK is.
Not Langfuse's OpenAPI document itself: no package on the registries ships it (see README).

Skipped without LiteLLM's proxy venv or without the SDK there."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from evalgate.cli import main
from evalgate.serve import tracing
from evalgate.serve.litellm import litellm_python
from evalgate.serve.tracing import LANGFUSE_ENV
from tests.conftest import answer_arith, write_config

pytestmark = pytest.mark.skipif(
    litellm_python(os.environ) is None or not tracing._langfuse_installed(os.environ),
    reason="needs LiteLLM's proxy (EVALGATE_LITELLM_PYTHON) with the Langfuse v2 SDK",
)

PUBLIC, SECRET = "pk-lf-contract", "sk-lf-contract"

# Parsed by the API's own types, in the interpreter that has the SDK.
VALIDATE = """
import json, sys
from langfuse.api.core.pydantic_utilities import pydantic_v1
from langfuse.api.resources.ingestion.types import IngestionEvent
events = json.load(sys.stdin)
parsed = pydantic_v1.parse_obj_as(list[IngestionEvent], events)
print(json.dumps([type(e).__name__ for e in parsed]))
"""


@pytest.fixture
def langfuse() -> Iterator[tuple[str, list[dict[str, Any]], list[str]]]:
    """(host, batches received, violations of the ingestion contract)."""
    received: list[dict[str, Any]] = []
    violations: list[str] = []
    expected_auth = "Basic " + base64.b64encode(f"{PUBLIC}:{SECRET}".encode()).decode()

    async def ingest(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != expected_auth:
            violations.append(f"auth: {request.headers.get('Authorization')!r}")
            return web.json_response({"message": "Invalid credentials"}, status=401)
        if request.content_type != "application/json":
            violations.append(f"content type {request.content_type!r}")
        body = await request.json()
        if not isinstance(body, dict) or not isinstance(body.get("batch"), list):
            violations.append(f"body without a batch list: {str(body)[:200]}")
            return web.json_response({"message": "Invalid request data"}, status=400)
        extra = set(body) - {"batch", "metadata"}
        if extra:
            violations.append(f"unknown request fields {sorted(extra)}")
        received.append(body)
        ok = [{"id": e.get("id"), "status": 201} for e in body["batch"]]
        return web.json_response({"successes": ok, "errors": []}, status=207)

    async def other(request: web.Request) -> web.Response:
        violations.append(f"{request.method} {request.path}: not the ingestion API")
        return web.json_response({"message": "Not found"}, status=404)

    app = web.Application()
    app.router.add_post("/api/public/ingestion", ingest)
    app.router.add_route("*", "/{tail:.*}", other)
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
    yield f"http://127.0.0.1:{port}", received, violations
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


@pytest.mark.slow
def test_a_runs_traces_follow_langfuses_ingestion_api(
    tmp_path: Path, scripted_server: Any, langfuse: tuple[str, list[dict[str, Any]], list[str]]
) -> None:
    host, received, violations = langfuse
    upstream = scripted_server(answer_arith)
    config = write_config(
        tmp_path,
        f"""
models:
  - name: traced
    backend: litellm
    model: openai/scripted
    api_base: "{upstream.base_url}"
    api_key_env: EVALGATE_TEST_UPSTREAM_KEY
benchmarks: [{{name: arith, kind: arith, size: 3}}]
""",
    )
    env = {k: v for k, v in os.environ.items() if k not in LANGFUSE_ENV}
    env |= {
        "CI": "1",
        "EVALGATE_TEST_UPSTREAM_KEY": "sk-upstream",
        "LANGFUSE_PUBLIC_KEY": PUBLIC,
        "LANGFUSE_SECRET_KEY": SECRET,
        "LANGFUSE_HOST": host,
    }
    code = main(["local", str(config), "--output", str(tmp_path / "out")], environ=env)
    assert code == 0
    deadline = time.monotonic() + 30  # the SDK flushes from a background thread
    while sum("generation-create" in json.dumps(b) for b in received) < 3:
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not violations, violations
    events = [event for batch in received for event in batch["batch"]]
    done = subprocess.run(
        [str(litellm_python(os.environ)), "-c", VALIDATE],
        input=json.dumps(events),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    kinds = json.loads(done.stdout)
    assert kinds.count("IngestionEvent_GenerationCreate") >= 3, kinds
    generations = [e["body"] for e in events if e["type"] == "generation-create"]
    traces = {e["body"]["id"] for e in events if e["type"] == "trace-create"}
    assert all(g["traceId"] in traces for g in generations)  # every generation has its trace
    traced = " ".join(json.dumps(g.get("input")) for g in generations)
    (results,) = (tmp_path / "out" / "evals").glob("*/*/results.jsonl")
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(records) == 3
    for rec in records:  # each of the run's own prompts has its generation
        assert json.dumps(rec["prompt"][-1]["content"]) in traced, (rec["prompt"], traced)

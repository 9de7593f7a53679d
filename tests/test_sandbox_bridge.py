"""The model bridge: what a sandbox may send to the model endpoint, and how much.

The bridge runs on the host, in front of the real endpoint; these tests speak to its unix socket
directly (as the relay inside a sandbox does) and record what reaches a fake upstream.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from evalgate.sandbox import ModelRoute
from evalgate.sandbox.bridge import MAX_JSON_DEPTH, ModelBridge


def run(coro: Any) -> Any:
    return asyncio.run(coro)


class Upstream:
    """A fake OpenAI endpoint that records every request and answers with fixed usage."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.usage: dict[str, int] | None = {"prompt_tokens": 10, "completion_tokens": 5}

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.seen.append(
            {
                "method": request.method,
                "path": request.path,
                "query": request.query_string,
                "headers": {k.lower(): v for k, v in request.headers.items()},
                "body": json.loads(body) if body else None,
            }
        )
        reply: dict[str, Any] = {"choices": [{"message": {"content": "hi"}}]}
        if self.usage is not None:
            reply["usage"] = self.usage
        return web.json_response(reply)

    async def start(self) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}/v1"


async def _with_bridge(
    tmp_path: Path, test: Any, upstream: Upstream | None = None, **caps: Any
) -> Upstream:
    upstream = upstream or Upstream()
    base = await upstream.start()
    route = ModelRoute(base_url=base, model="under-test", api_key="sk-real", **caps)
    bridge = ModelBridge(route, str(tmp_path / "model.sock"))
    await bridge.start()
    try:
        conn = aiohttp.UnixConnector(path=bridge.socket_path)
        async with aiohttp.ClientSession(connector=conn) as session:

            async def call(method: str, path: str, **kw: Any) -> tuple[int, str]:
                headers = {"Authorization": f"Bearer {bridge.token}", **kw.pop("headers", {})}
                url = f"http://sandbox/v1/{path}"
                async with session.request(method, url, headers=headers, **kw) as resp:
                    return resp.status, await resp.text()

            await test(call, bridge)
    finally:
        await bridge.close()
        await upstream.runner.cleanup()
    return upstream


CHAT = {"model": "gpt-4", "messages": [{"role": "user", "content": "hi"}]}


def test_model_forced_and_odd_methods_and_bodies_refused(tmp_path: Path) -> None:
    async def test(call: Any, bridge: ModelBridge) -> None:
        assert (await call("POST", "chat/completions", json=CHAT))[0] == 200
        for method in ("PUT", "PATCH", "DELETE"):
            status, text = await call(method, "chat/completions", json=CHAT)
            assert status == 405, (method, text)
        for body in ([CHAT], "not json", 3, None):
            status, text = await call("POST", "chat/completions", data=json.dumps(body))
            assert status == 400 and "JSON object" in text, (body, text)
        status, _ = await call("POST", "completions", data=b"\xff\xfe")
        assert status == 400
        assert (await call("GET", "chat/completions"))[0] == 405  # GET only for models
        assert (await call("GET", "models"))[0] == 200

    upstream = run(_with_bridge(tmp_path, test))
    assert [(s["method"], s["path"]) for s in upstream.seen] == [
        ("POST", "/v1/chat/completions"),
        ("GET", "/v1/models"),
    ]
    assert upstream.seen[0]["body"]["model"] == "under-test"


def test_headers_allow_listed_and_query_strings_dropped(tmp_path: Path) -> None:
    sneaky = {
        "OpenAI-Organization": "org-other",
        "OpenAI-Project": "proj-other",
        "api-key": "sk-other",
        "X-Api-Key": "sk-other",
        "Cookie": "session=1",
        "X-Forwarded-For": "1.2.3.4",
        "Accept": "application/json",
        "User-Agent": "agent/1.0",
    }

    async def test(call: Any, bridge: ModelBridge) -> None:
        status, _ = await call(
            "POST",
            "chat/completions?api-version=1&model=other&api_key=x",
            json=CHAT,
            headers=sneaky,
        )
        assert status == 200

    (seen,) = run(_with_bridge(tmp_path, test)).seen
    assert seen["query"] == ""
    headers = seen["headers"]
    assert headers["authorization"] == "Bearer sk-real"
    assert headers["user-agent"] == "agent/1.0" and headers["accept"] == "application/json"
    for name in ("openai-organization", "openai-project", "api-key", "x-api-key", "cookie"):
        assert name not in headers, name
    assert "x-forwarded-for" not in headers


def test_deep_json_is_refused_not_a_crash(tmp_path: Path) -> None:
    deep = b'{"model": "m", "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    nested_ok = {
        "model": "m",
        "x": json.loads("[" * (MAX_JSON_DEPTH - 2) + "]" * (MAX_JSON_DEPTH - 2)),
    }

    async def test(call: Any, bridge: ModelBridge) -> None:
        status, text = await call("POST", "chat/completions", data=deep)
        assert status == 400 and "nested" in text, text
        # Brackets inside strings are text, not depth.
        text_body = {"model": "m", "messages": [{"role": "user", "content": "[" * 10_000}]}
        assert (await call("POST", "chat/completions", json=text_body))[0] == 200
        assert (await call("POST", "chat/completions", json=nested_ok))[0] == 200

    upstream = run(_with_bridge(tmp_path, test))
    assert len(upstream.seen) == 2


def test_request_and_token_caps_per_sandbox(tmp_path: Path) -> None:
    async def requests(call: Any, bridge: ModelBridge) -> None:
        for _ in range(3):
            assert (await call("POST", "chat/completions", json=CHAT))[0] == 200
        status, text = await call("POST", "chat/completions", json=CHAT)
        assert status == 429 and "3 requests" in text, text
        assert bridge.usage["refused"] == 1

    assert len(run(_with_bridge(tmp_path, requests, max_requests=3)).seen) == 3

    async def tokens(call: Any, bridge: ModelBridge) -> None:
        # 15 tokens per answer: the cap of 20 is reached by the second, the third is refused.
        for _ in range(2):
            assert (await call("POST", "chat/completions", json=CHAT))[0] == 200
        status, text = await call("POST", "chat/completions", json=CHAT)
        assert status == 429 and "20 tokens" in text, text
        assert bridge.usage["prompt_tokens"] + bridge.usage["completion_tokens"] == 30

    assert len(run(_with_bridge(tmp_path, tokens, max_tokens=20)).seen) == 2


def test_usage_without_a_report_is_estimated_and_negative_usage_refused(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    async def test(call: Any, bridge: ModelBridge) -> None:
        assert (await call("POST", "chat/completions", json=CHAT))[0] == 200
        seen.update(bridge.usage)

    silent = Upstream()
    silent.usage = None
    run(_with_bridge(tmp_path, test, silent))
    assert seen["estimated"] == 1 and seen["prompt_tokens"] > 0 and seen["completion_tokens"] > 0
    seen.clear()
    liar = Upstream()
    liar.usage = {"prompt_tokens": -1_000_000, "completion_tokens": 3}
    run(_with_bridge(tmp_path, test, liar))
    assert seen["prompt_tokens"] == 0 and seen["completion_tokens"] == 3


# Requests that reach past the model under test, or multiply what it is asked: refused.
BEYOND = {
    "responses MCP server": ("responses", {"input": "hi", "tools": [
        {"type": "mcp", "server_label": "x", "server_url": "https://example.invalid/mcp"}]}),
    "a server_url anywhere": ("responses", {"input": "hi", "tools": [
        {"type": "function", "name": "f", "server_url": "https://example.invalid"}]}),
    "responses web_search": ("responses", {"input": "hi", "tools": [{"type": "web_search"}]}),
    "chat web_search_preview": ("chat/completions", {**CHAT, "tools": [
        {"type": "web_search_preview"}]}),
    "chat web_search_options": ("chat/completions", {**CHAT, "web_search_options": {}}),
    "n=128": ("chat/completions", {**CHAT, "n": 128}),
    "best_of": ("completions", {"prompt": "hi", "best_of": 4}),
    "image_url": ("chat/completions", {**CHAT, "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.invalid/a.png"}}]}]}),
    "input_image": ("responses", {"input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": "https://example.invalid/a.png"}]}]}),
    "background": ("responses", {"input": "hi", "background": True}),
    "audio out": ("chat/completions", {**CHAT, "modalities": ["text", "audio"], "audio": {}}),
    "input_file": ("responses", {"input": [{"role": "user", "content": [
        {"type": "input_file", "file_url": "https://example.invalid/a.pdf"}]}]}),
}  # fmt: skip


def test_requests_beyond_the_model_are_refused(tmp_path: Path) -> None:
    async def test(call: Any, bridge: ModelBridge) -> None:
        for name, (path, body) in BEYOND.items():
            status, text = await call("POST", path, json={"model": "m", **body})
            assert status == 400 and "not allowed" in text, (name, status, text)
        # What an agent needs passes: function tools, n=1, text parts.
        tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
        ok = {**CHAT, "n": 1, "tools": tools, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "hi"}]}]}  # fmt: skip
        assert (await call("POST", "chat/completions", json=ok))[0] == 200

    upstream = run(_with_bridge(tmp_path, test))
    assert len(upstream.seen) == 1


def test_only_the_fields_an_agent_needs_go_upstream(tmp_path: Path) -> None:
    extra = {"service_tier": "priority", "prediction": {"type": "content", "content": "x"}}
    ask = {**CHAT, "temperature": 0.5, "tools": [{"type": "function", "function": {"name": "f"}}]}

    async def test(call: Any, bridge: ModelBridge) -> None:
        assert (await call("POST", "chat/completions", json={**ask, **extra}))[0] == 200
        body = {"input": "hi", "prompt": {"id": "pmpt_1"}, "conversation": "conv_1"}
        assert (await call("POST", "responses", json=body))[0] == 200

    upstream = run(_with_bridge(tmp_path, test))
    chat, responses = (s["body"] for s in upstream.seen)
    assert chat == {**ask, "model": "under-test"}
    assert responses == {"input": "hi", "model": "under-test"}

"""The host half of a sandbox's model bridge: an HTTP proxy on a unix socket, to one endpoint.

A ``model-only`` sandbox has no network at all (an empty network namespace, or docker's
``none``). Its only way out is a unix socket, bind-mounted in from the host, behind which this
proxy forwards a fixed set of OpenAI API paths to the model under test and nowhere else:

- the upstream URL is fixed, so the sandbox cannot reach any other host through it;
- the real API key is added here; the sandbox holds a per-sandbox token that is worthless
  outside the bridge;
- the request's ``model`` is forced to the model under test (an agent cannot swap models);
- usage is counted from the responses, so a command agent's token use is measured, not taken
  from the agent's word.

The inner half (a TCP listener inside the sandbox relaying to this socket) is in
``_sandboxd.py``.
"""

from __future__ import annotations

import json
import secrets
from collections import Counter
from typing import Any

import aiohttp
from aiohttp import web

from evalgate.sandbox.base import MODEL_PORT, ModelRoute

__all__ = ["ALLOWED_PATHS", "ModelBridge"]

# Paths under /v1 a sandbox may call; everything else (files, fine-tuning, admin) is refused.
ALLOWED_PATHS = frozenset({"chat/completions", "completions", "responses", "models"})
_HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "authorization"}
)


class ModelBridge:
    """Serve the proxy on ``socket_path`` until :meth:`close`."""

    def __init__(self, route: ModelRoute, socket_path: str) -> None:
        self.route = route
        self.socket_path = socket_path
        self.token = "sk-evalgate-sandbox-" + secrets.token_urlsafe(18)
        self.usage: Counter[str] = Counter()
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def sandbox_env(self) -> dict[str, str]:
        """What sandboxed code needs to reach the model through the bridge."""
        return {
            "OPENAI_BASE_URL": f"http://127.0.0.1:{MODEL_PORT}/v1",
            "OPENAI_API_BASE": f"http://127.0.0.1:{MODEL_PORT}/v1",
            "OPENAI_API_KEY": self.token,
            "EVAL_MODEL": self.route.model,
        }

    async def start(self) -> None:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=900)
        )
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.UnixSite(self._runner, self.socket_path).start()

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["tail"]
        if not path.startswith("v1/") or path[3:] not in ALLOWED_PATHS:
            return web.json_response(
                {"error": {"message": f"evalgate sandbox: /{path} is not a model API path"}},
                status=403,
            )
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response({"error": {"message": "bad sandbox token"}}, status=401)
        body = await request.read()
        if body and request.method == "POST":
            try:
                payload = json.loads(body)
                payload["model"] = self.route.model
                body = json.dumps(payload).encode()
            except (ValueError, TypeError):
                pass  # not JSON: let the upstream answer it
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        if self.route.api_key:
            headers["Authorization"] = f"Bearer {self.route.api_key}"
        url = f"{self.route.base_url.rstrip('/')}/{path[3:]}"
        assert self._session is not None
        self.usage["requests"] += 1
        try:
            async with self._session.request(
                request.method, url, data=body or None, headers=headers, params=request.query
            ) as upstream:
                response = web.StreamResponse(status=upstream.status)
                for key, value in upstream.headers.items():
                    if key.lower() not in _HOP_HEADERS and key.lower() != "content-encoding":
                        response.headers[key] = value
                await response.prepare(request)
                tail = b""
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                    tail = (tail + chunk)[-65536:]
                await response.write_eof()
                self._count(tail)
                return response
        except aiohttp.ClientError as exc:
            self.usage["errors"] += 1
            return web.json_response(
                {"error": {"message": f"evalgate sandbox bridge: upstream failed: {exc}"}},
                status=502,
            )

    def _count(self, tail: bytes) -> None:
        """Add the response's token usage (plain JSON, or the last SSE event that has one)."""
        usage: Any = None
        text = tail.decode("utf-8", "replace").strip()
        try:
            usage = json.loads(text).get("usage")
        except (ValueError, AttributeError):
            for line in reversed(text.splitlines()):
                if line.startswith("data:") and '"usage"' in line:
                    try:
                        usage = json.loads(line[5:]).get("usage")
                    except (ValueError, AttributeError):
                        usage = None
                    if usage:
                        break
        if isinstance(usage, dict):
            for ours, theirs in (
                ("prompt_tokens", ("prompt_tokens", "input_tokens")),
                ("completion_tokens", ("completion_tokens", "output_tokens")),
            ):
                value = next((usage[k] for k in theirs if isinstance(usage.get(k), int)), 0)
                self.usage[ours] += value

"""The host half of a sandbox's model bridge: an HTTP proxy on a unix socket, to one endpoint.

A ``model-only`` sandbox has no network at all (an empty network namespace, or docker's
``none``). Its only way out is a unix socket, bind-mounted in from the host, behind which this
proxy forwards a fixed set of OpenAI API paths to the model under test and nowhere else:

- the upstream URL is fixed, so the sandbox cannot reach any other host through it;
- the real API key is added here; the sandbox holds a per-sandbox token that is worthless
  outside the bridge;
- the request's ``model`` is forced to the model under test (an agent cannot swap models):
  POST bodies must be JSON objects (arrays, other JSON and non-JSON are refused), ``GET`` is
  allowed for ``/v1/models`` only, other methods are refused;
- only the top-level request fields a benchmark's agent needs go upstream (:data:`FIELDS`, per
  path: messages or input, sampling, tools, streaming…); others (``service_tier``, stored
  ``prompt`` or ``conversation`` references, ``prediction``…) are dropped;
- nothing that reaches past the model or multiplies what it is asked passes (:func:`beyond`):
  no tool but ``function`` tools (no ``web_search``, ``mcp``, ``file_search``…), no
  ``server_url`` or ``web_search_options`` anywhere, no image, file or audio input, no ``n`` or
  ``best_of`` above 1;
- only an allow-list of headers passes (no ``OpenAI-Organization``/``-Project``, no ``api-key``,
  no cookies), query strings are dropped, and JSON nested deeper than :data:`MAX_JSON_DEPTH` is
  refused before it is parsed;
- usage is counted from the responses, so a command agent's token use is measured, not taken
  from the agent's word (a response without usage, e.g. a stream without ``include_usage``, is
  estimated from its bytes, four to a token, and counted as ``estimated``; negative counts are
  refused); past the route's ``max_requests`` or ``max_tokens`` the bridge answers 429
  (counted as ``refused``).

The inner half (a TCP listener inside the sandbox relaying to this socket) is in
``_sandboxd.py``.
"""

from __future__ import annotations

import json
import re
import secrets
from collections import Counter
from collections.abc import Mapping

import aiohttp
from aiohttp import web

from evalgate.sandbox.base import MODEL_PORT, ModelRoute

__all__ = ["ALLOWED_PATHS", "FIELDS", "MAX_JSON_DEPTH", "ModelBridge", "beyond", "json_depth"]

# Paths under /v1 a sandbox may call; everything else (files, fine-tuning, admin) is refused.
MAX_JSON_DEPTH = 64
ALLOWED_PATHS = frozenset({"chat/completions", "completions", "responses", "models"})
_HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "authorization"}
)
# Request headers passed upstream; everything else (organisation, project, other keys, cookies,
# forwarding headers) stays in the sandbox.
_PASS_HEADERS = frozenset({"content-type", "accept", "user-agent", "openai-beta"})
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_BRACKETS = re.compile(rb"[\[\]{}]")


_SAMPLING = frozenset(
    {"model", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "stream",
     "stream_options", "presence_penalty", "frequency_penalty", "repetition_penalty",
     "logit_bias", "logprobs", "top_logprobs", "n", "user", "metadata"}
)  # fmt: skip
# The top-level request fields forwarded, per path; the rest is dropped.
FIELDS: dict[str, frozenset[str]] = {
    "chat/completions": _SAMPLING
    | {"messages", "max_tokens", "max_completion_tokens", "tools", "tool_choice",
       "parallel_tool_calls", "response_format", "reasoning_effort", "verbosity",
       "chat_template_kwargs", "modalities", "audio", "web_search_options"},
    "completions": _SAMPLING | {"prompt", "max_tokens", "echo", "suffix", "best_of"},
    "responses": _SAMPLING
    | {"input", "instructions", "max_output_tokens", "tools", "tool_choice",
       "parallel_tool_calls", "reasoning", "text", "truncation", "include", "store",
       "previous_response_id", "max_tool_calls", "prompt_cache_key", "background",
       "modalities", "audio"},
}  # fmt: skip
# (audio, modalities, web_search_options, n, best_of and background are kept here so that
# :func:`beyond` refuses them with a reason rather than dropping them unseen.)

# Keys that make the upstream fetch or search on the sandbox's behalf, anywhere in a request.
_FETCHING_KEYS = frozenset({"server_url", "web_search_options", "image_url", "file_url", "file_id"})
# Content parts that carry more than text (images, files, audio): a benchmark's agent sends text.
_MEDIA_PARTS = frozenset({"image_url", "input_image", "input_file", "file", "input_audio"})


def beyond(payload: Mapping[str, object]) -> str | None:
    """Why ``payload`` asks for more than the model under test answering text, or None.

    ``payload`` is a parsed request (its depth already bounded by :data:`MAX_JSON_DEPTH`).
    """
    for key in ("n", "best_of"):
        value = payload.get(key)
        if value is not None and value != 1:
            return f"{key}={value!r} (one completion per request)"
    if payload.get("background"):
        return "a background request (it would outlive the sandbox)"
    modalities = payload.get("modalities") or ["text"]
    if "audio" in payload or not isinstance(modalities, list) or modalities != ["text"]:
        return "output other than text (modalities, audio)"
    tools = payload.get("tools")
    for tool in tools if isinstance(tools, list) else []:
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind != "function":
            return f"tool type {kind!r} (function tools only)"
        if "server_url" in tool:
            return "'server_url'"
    # The messages, not the tools' parameter schemas (a parameter may well be named image_url).
    stack: list[object] = [{k: v for k, v in payload.items() if k != "tools"}]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key in _FETCHING_KEYS:
                    return f"{key!r}"
                if key == "type" and value in _MEDIA_PARTS:
                    return f"content of type {value!r} (text only)"
                stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    return None


def json_depth(body: bytes, limit: int) -> int:
    """How deeply ``body``'s arrays and objects nest, counted without parsing, up to ``limit``+1.

    json.loads recurses per level, so a body of a million ``[`` would raise RecursionError
    inside the bridge; this scan (strings removed first: brackets in text are not depth) is
    linear and cannot recurse.
    """
    depth = deepest = 0
    for match in _BRACKETS.finditer(_STRINGS.sub(b"", body)):
        depth += 1 if match.group() in b"[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                break
    return deepest


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
        app = web.Application(client_max_size=16 << 20)
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

    def _refuse(self, status: int, message: str) -> web.Response:
        if status == 429:
            self.usage["refused"] += 1
        return web.json_response(
            {"error": {"message": f"evalgate sandbox: {message}"}}, status=status
        )

    def _over_cap(self) -> str | None:
        route, used = self.route, self.usage
        if used["requests"] >= route.max_requests:
            return f"this sandbox's cap of {route.max_requests} requests is reached"
        if used["prompt_tokens"] + used["completion_tokens"] >= route.max_tokens:
            return f"this sandbox's cap of {route.max_tokens} tokens is reached"
        return None

    async def _body(self, request: web.Request, path: str) -> bytes | web.Response:
        """The body to send upstream (``model`` forced), or the refusal."""
        if request.method == "GET":
            if path != "models":
                return self._refuse(405, f"GET /v1/{path} is not allowed; POST a JSON object")
            return b""
        if request.method != "POST":
            return self._refuse(405, f"method {request.method} is not allowed")
        body = await request.read()
        if json_depth(body, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
            return self._refuse(400, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            payload = None
        if not isinstance(payload, dict):
            return self._refuse(400, "the request body must be a JSON object")
        why = beyond(payload)
        if why is not None:
            return self._refuse(400, f"{why} is not allowed through the model bridge")
        allowed = FIELDS.get(path)
        if allowed is not None:
            payload = {k: v for k, v in payload.items() if k in allowed}
        payload["model"] = self.route.model
        return json.dumps(payload).encode()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.match_info["tail"]
        if not path.startswith("v1/") or path[3:] not in ALLOWED_PATHS:
            return self._refuse(403, f"/{path} is not a model API path")
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return self._refuse(401, "bad sandbox token")
        body = await self._body(request, path[3:])
        if isinstance(body, web.Response):
            return body
        over = self._over_cap()
        if over is not None:
            return self._refuse(429, over)
        headers = {k: v for k, v in request.headers.items() if k.lower() in _PASS_HEADERS}
        if self.route.api_key:
            headers["Authorization"] = f"Bearer {self.route.api_key}"
        url = f"{self.route.base_url.rstrip('/')}/{path[3:]}"  # the query string is dropped
        assert self._session is not None
        self.usage["requests"] += 1
        try:
            async with self._session.request(
                request.method, url, data=body or None, headers=headers
            ) as upstream:
                response = web.StreamResponse(status=upstream.status)
                for key, value in upstream.headers.items():
                    if key.lower() not in _HOP_HEADERS and key.lower() != "content-encoding":
                        response.headers[key] = value
                await response.prepare(request)
                tail, size = b"", 0
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                    tail = (tail + chunk)[-65536:]
                    size += len(chunk)
                await response.write_eof()
                if upstream.status < 400 and not self._count(tail):
                    # No usage in the answer: what crossed the bridge, four bytes to a token
                    # (a budget then over-counts, never under-counts).
                    self.usage["prompt_tokens"] += len(body) // 4
                    self.usage["completion_tokens"] += size // 4
                    self.usage["estimated"] += 1
                return response
        except aiohttp.ClientError as exc:
            self.usage["errors"] += 1
            return self._refuse(502, f"bridge: upstream failed: {exc}")

    def _count(self, tail: bytes) -> bool:
        """Add the response's token usage (plain JSON, or the last SSE event that has one);
        whether it had one."""
        usage: object = None
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
                self.usage[ours] += max(0, value)  # a negative count would lift the cap
            return True
        return False

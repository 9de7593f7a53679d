"""Chat completions with tools, through a ChatClient's endpoint, sampling and retry policy.

``ChatClient.chat`` sends text messages and returns text; an agent needs ``tools`` in the request
and ``tool_calls`` in the reply. This module builds the request from the client's own
``body()`` (model, sampling, per-rollout seed) and posts it with the same retry rules: 408, 409,
425, 429 and 5xx, connection errors and timeouts are retried with full-jitter backoff, honouring
``Retry-After``; a request that fails for good raises ``RequestFailed`` (an errored rollout,
never a 0).
"""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from evalgate.serve.client import RequestFailed, retry_after

__all__ = ["ToolCall", "ToolChat", "ToolReply"]

_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as the API carries it


@dataclass(frozen=True)
class ToolReply:
    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: dict[str, int]
    finish_reason: str | None = None
    message: dict[str, Any] = field(default_factory=dict)  # the assistant message, to append


def _parse(raw: bytes) -> ToolReply:
    try:
        data = json.loads(raw)
        choice = data["choices"][0]
        msg = choice["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise RequestFailed("bad_response", raw[:200].decode("utf-8", "replace")) from None
    calls = []
    for i, call in enumerate(msg.get("tool_calls") or []):
        fn = call.get("function") or {}
        args = fn.get("arguments", "")
        if not isinstance(args, str):  # some servers send an object, not its JSON text
            args = json.dumps(args)
        calls.append(
            ToolCall(id=str(call.get("id") or f"call_{i}"), name=fn.get("name", ""), arguments=args)
        )
    usage = data.get("usage") or {}
    message: dict[str, Any] = {"role": "assistant", "content": msg.get("content") or ""}
    if calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]
    return ToolReply(
        text=msg.get("content") or "",
        tool_calls=tuple(calls),
        usage={
            "prompt_tokens": int(usage.get("prompt_tokens") or 0),
            "completion_tokens": int(usage.get("completion_tokens") or 0),
        },
        finish_reason=choice.get("finish_reason"),
        message=message,
    )


class ToolChat:
    """Tool-calling requests for one agent run; use as ``async with ToolChat(client):``."""

    def __init__(self, client: Any, *, backoff_base_s: float = 0.5, backoff_cap_s: float = 30.0):
        self.client = client
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        endpoint = client.endpoint
        self._url = f"{endpoint.base_url}/chat/completions"
        self._headers = {"Content-Type": "application/json"}
        if endpoint.api_key:
            self._headers["Authorization"] = f"Bearer {endpoint.api_key}"
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> ToolChat:
        timeout = getattr(self.client, "timeout", None) or aiohttp.ClientTimeout(total=120)
        self._session = aiohttp.ClientSession(timeout=timeout, headers=self._headers)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, rollout: int = 0
    ) -> ToolReply:
        assert self._session is not None, "use `async with ToolChat(client)`"
        body = self.client.body(messages, rollout)
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        payload = json.dumps(body)
        max_retries = int(getattr(self.client, "max_retries", 4))
        attempt = 0
        while True:
            hint: float | None = None
            retryable = True
            try:
                async with self._session.post(self._url, data=payload) as resp:
                    raw = await resp.read()
                    if resp.status == 200:
                        return _parse(raw)
                    error = RequestFailed(
                        f"http_{resp.status}", raw[:200].decode("utf-8", "replace")
                    )
                    retryable = resp.status in _RETRY_STATUS
                    hint = retry_after(resp.headers)
            except RequestFailed as exc:
                error = exc
            except TimeoutError:
                error = RequestFailed("timeout", "no answer in time")
            except aiohttp.ClientError as exc:
                error = RequestFailed("connection", str(exc) or type(exc).__name__)
            if not retryable or attempt >= max_retries:
                raise error
            delay = (
                hint
                if hint is not None
                else random.uniform(0, min(self.backoff_cap_s, self.backoff_base_s * 2**attempt))
            )
            await asyncio.sleep(min(delay, 60.0))
            attempt += 1

"""Chat completions with tools, through the run's ChatClient.

``ChatClient.chat`` sends text messages and returns text; an agent needs ``tools`` in the request
and ``tool_calls`` in the reply. This module builds the request from the client's own
``body()`` (model, sampling, per-rollout seed) and sends it through ``ChatClient.send``: the
same connection pool, concurrency limit (AIMD on 429), retries, ``Retry-After``, redirects,
breaker and deadline as every other request of the run, counted in the same stats. A request
that fails for good raises ``RequestFailed`` (an errored rollout, never a 0).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from evalgate.serve.client import ChatClient, RequestFailed
from evalgate.serve.served import token_count

__all__ = ["ToolCall", "ToolChat", "ToolReply"]


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
    message: dict[str, object] = field(default_factory=dict)  # the assistant message, to append


def _parse(raw: bytes) -> ToolReply:
    try:
        data = json.loads(raw)
        choice = data["choices"][0]
        msg = choice["message"]
        usage = data.get("usage") or {}
        counts = {key: token_count(usage, key) for key in ("prompt_tokens", "completion_tokens")}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, OverflowError):
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
    message: dict[str, object] = {"role": "assistant", "content": msg.get("content") or ""}
    if calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]
    return ToolReply(
        text=msg.get("content") or "",
        tool_calls=tuple(calls),
        usage=counts,
        finish_reason=choice.get("finish_reason"),
        message=message,
    )


class ToolChat:
    """Tool-calling requests for one agent run; use as ``async with ToolChat(client):`` inside
    the client's own ``async with`` (its session carries the requests)."""

    def __init__(self, client: ChatClient) -> None:
        self.client = client

    async def __aenter__(self) -> ToolChat:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def complete(
        self,
        messages: Sequence[Mapping[str, object]],
        tools: Sequence[Mapping[str, object]],
        *,
        rollout: int = 0,
    ) -> ToolReply:
        body = self.client.body(messages, rollout)
        if tools:
            body["tools"] = list(tools)
            body["tool_choice"] = "auto"
        return await self.client.send(json.dumps(body).encode(), lambda raw, _attempts: _parse(raw))

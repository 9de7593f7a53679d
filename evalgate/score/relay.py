"""The judge of code that grades in another process: a loopback endpoint in front of its client.

inspect's model-graded scorers (the ``grader`` role) and verifiers' judges (``JudgeRubric``,
``vf.Judge``) call a judge model themselves, from their own process (the judge never shares a
process with the judged, and neither does the gate). They are pointed at this relay instead of
the judge's server: an OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1, in the gate's
process, that sends each request through the judge's bound
:class:`~evalgate.serve.client.ChatClient`. So their calls get what evalgate's own judge calls
get, counted where they are made rather than taken from the grading code's word:

- the judge's model and sampling are the exam's (``grader:`` / ``judge:``): the request's
  ``model`` and sampling fields are ignored, only its messages are asked;
- retries with backoff, the concurrency limit and the response cache under the judge's identity
  (the n-th identical request of one tab is sample n, as ``judge_samples`` would be);
- tokens, cost, calls and cache hits per *tab* (one rollout, or one inspect task run), which the
  suite turns into the record's ``judge`` entry: summed into metadata.json, added to the budget;
- a judge that fails after evalgate's retries answers 502 and marks the tab: the suite makes the
  rollout an error of kind ``judge_*`` even when the grading code caught the exception and
  scored 0.

Every request carries the relay's bearer token, and the tab's key is in its path; anything else
is refused. Only text replies (no streaming, no tools): what a judge needs.
"""

from __future__ import annotations

import json
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from evalgate.config.spec.judge import GraderSpec
from evalgate.score.base import JudgeBase, JudgeRecord, failure, no_usage

if TYPE_CHECKING:  # aiohttp is imported when a relay starts: `validate` builds suites without it
    from aiohttp import web


__all__ = ["Grader", "JudgeRelay", "RelayEndpoint", "Tab"]


class RelayEndpoint(TypedDict):
    """Where grading code in another process sends one tab's judge calls (OpenAI-style)."""

    base_url: str
    model: str
    api_key: str


@dataclass
class Grader(JudgeBase[GraderSpec]):
    """The judge of code that grades in its own process (inspect's ``grader`` role, a verifiers
    environment's judge): served and bound by the run like a ``scorer: {type: judge}`` judge,
    reached through :class:`JudgeRelay` (``relay``, set by the run while the client is bound).
    No labelled set or pairwise mode: the grading code decides."""

    relay: JudgeRelay | None = None


@dataclass
class Tab:
    """What one rollout's (or one task run's) judge calls came to."""

    usage: dict[str, int] = field(default_factory=no_usage)
    calls: int = 0
    cache_hits: int = 0
    replies: list[str] = field(default_factory=list)
    failed: tuple[str, str] | None = None  # (kind, detail) of the first call that failed for good
    seen: Counter[str] = field(default_factory=Counter)  # request digest → times asked

    def judgement(self, grader: Grader) -> JudgeRecord:
        """The record's ``judge`` entry: usage and cost (at the judge's price), calls, replies."""
        return {
            "usage": dict(self.usage),
            "cost_usd": grader.cost(self.usage),
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "replies": list(self.replies),
            "samples": [],  # the grading code read the verdicts, not evalgate
        }


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: the text ones
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _messages(body: object) -> list[dict[str, str]] | None:
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return None
    out = []
    for m in body["messages"]:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            return None
        out.append({"role": m["role"], "content": _text(m.get("content"))})
    return out or None


class JudgeRelay:
    """An OpenAI-compatible loopback endpoint in front of ``grader.client``; an async context
    manager (started inside the run's event loop)."""

    def __init__(self, grader: Grader) -> None:
        self.grader = grader
        self.token = secrets.token_urlsafe(24)
        self._tabs: dict[str, Tab] = {}
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def __aenter__(self) -> JudgeRelay:
        from aiohttp import web

        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/{tab}/v1/chat/completions", self._chat)
        app.router.add_get("/{tab}/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def open(self) -> str:
        """A new tab: its key goes in the endpoint's path (:meth:`endpoint`)."""
        key = secrets.token_hex(8)
        self._tabs[key] = Tab()
        return key

    def close(self, key: str) -> Tab:
        """The tab's calls, and no further calls on it."""
        return self._tabs.pop(key, Tab())

    def endpoint(self, key: str) -> RelayEndpoint:
        """Where the grading code sends the judge's calls for tab ``key``."""
        return {
            "base_url": f"http://127.0.0.1:{self.port}/{key}/v1",
            "model": self._model(),
            "api_key": self.token,
        }

    def _model(self) -> str:
        assert self.grader.client is not None, "the run binds the judge's client first"
        return self.grader.client.endpoint.model

    def _refuse(self, status: int, message: str, kind: str = "invalid_request") -> web.Response:
        from aiohttp import web

        return web.json_response({"error": {"message": message, "type": kind}}, status=status)

    def _tab(self, request: web.Request) -> Tab | web.Response:
        if request.headers.get("Authorization", "") != f"Bearer {self.token}":
            return self._refuse(401, "evalgate's judge relay: wrong or missing key")
        tab = self._tabs.get(request.match_info["tab"])
        if tab is None:
            return self._refuse(404, "evalgate's judge relay: no such tab (the rollout ended)")
        return tab

    async def _models(self, request: web.Request) -> web.Response:
        from aiohttp import web

        tab = self._tab(request)
        if isinstance(tab, web.Response):
            return tab
        model = self._model()
        return web.json_response({"object": "list", "data": [{"id": model, "object": "model"}]})

    async def _chat(self, request: web.Request) -> web.Response:
        from aiohttp import web

        from evalgate.serve.client import RequestFailed  # the run has loaded it already

        tab = self._tab(request)
        if isinstance(tab, web.Response):
            return tab
        try:
            body = await request.json()
        except ValueError:
            return self._refuse(400, "the body is not JSON")
        messages = _messages(body)
        if messages is None:
            return self._refuse(400, "a judge request needs `messages` (role, content)")
        if body.get("stream"):
            return self._refuse(400, "evalgate's judge relay does not stream")
        # Structured output is the grading code's to ask for (it parses the verdict); the model
        # and sampling stay the exam's. The body is forwarded as the OpenAI field, nothing else.
        response_format = body.get("response_format")
        if response_format is not None and not (
            isinstance(response_format, dict) and isinstance(response_format.get("type"), str)
        ):
            return self._refuse(400, "`response_format` must be an object with a `type`")
        # The n-th identical request of a tab is the judge's sample n (its own cache entry and
        # seed), as with judge_samples: k asks are k judgements, not one replayed.
        digest = json.dumps([messages, response_format], sort_keys=True)
        sample = tab.seen[digest]
        tab.seen[digest] += 1
        try:
            reply = await self.grader.ask(
                messages, rollout=sample, usage=tab.usage, response_format=response_format
            )
        except RequestFailed as exc:
            if tab.failed is None:
                tab.failed = failure(exc)
            return self._refuse(502, f"the judge failed: {exc}", f"judge_{exc.kind}")
        tab.calls += 1
        tab.cache_hits += int(reply.cached)
        tab.replies.append(reply.text)
        usage = {k: int(reply.usage.get(k) or 0) for k in ("prompt_tokens", "completion_tokens")}
        return web.json_response(
            {
                "id": f"evalgate-judge-{tab.calls}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": self._model(),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply.text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {**usage, "total_tokens": sum(usage.values())},
            }
        )

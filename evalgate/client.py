"""The hot path: chat completions over aiohttp, with retries that honour the server.

aiohttp rather than the ``openai`` SDK: on a 2-core runner the SDK's per-request overhead caps a
run at a few hundred requests/s, while a vLLM server answers short prompts by the thousand. The
request and response are the plain OpenAI chat-completions JSON, so any compatible server works.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from evalgate.serve.base import Endpoint

__all__ = ["ChatClient", "Reply", "RequestFailed"]

_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Reply:
    text: str
    usage: dict[str, int]
    latency_s: float
    attempts: int


class RequestFailed(Exception):
    """A request failed for good (after retries). The rollout is recorded as an error, not a 0."""

    def __init__(self, kind: str, detail: str) -> None:
        self.kind = kind  # short category: "http_400", "timeout", "connection", "bad_response"
        super().__init__(f"{kind}: {detail}")


@dataclass
class ClientStats:
    requests: int = 0
    retries: int = 0
    failures: Counter[str] = field(default_factory=Counter)


def _retry_after(headers: Any) -> float | None:
    value = headers.get("Retry-After") if headers else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


class ChatClient:
    """Send chat requests to one endpoint with fixed sampling; use as ``async with``."""

    def __init__(
        self,
        endpoint: Endpoint,
        sampling: Any,
        *,
        timeout_s: float = 120.0,
        max_retries: int = 4,
        max_concurrent: int = 8,
        backoff_base_s: float = 0.5,
        backoff_cap_s: float = 30.0,
    ) -> None:
        self.endpoint = endpoint
        self.sampling = sampling
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.max_retries = max_retries
        self.max_concurrent = max_concurrent
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.stats = ClientStats()
        self._session: aiohttp.ClientSession | None = None
        self._url = f"{endpoint.base_url}/chat/completions"
        self._headers = {"Content-Type": "application/json"}
        if endpoint.api_key:
            self._headers["Authorization"] = f"Bearer {endpoint.api_key}"

    async def __aenter__(self) -> ChatClient:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self.max_concurrent, ttl_dns_cache=300),
            timeout=self.timeout,
            headers=self._headers,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    def body(self, messages: list[dict[str, str]], rollout: int) -> dict[str, Any]:
        s = self.sampling
        body: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": messages,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_tokens": s.max_tokens,
        }
        if s.seed is not None:
            body["seed"] = s.seed + rollout
        return body

    def _delay(self, attempt: int, server_hint: float | None) -> float:
        if server_hint is not None:
            return min(server_hint, 60.0)
        # Full jitter (AWS architecture blog): spreads retries of a burst of 429s apart.
        return random.uniform(0, min(self.backoff_cap_s, self.backoff_base_s * 2**attempt))

    async def chat(self, messages: list[dict[str, str]], *, rollout: int = 0) -> Reply:
        assert self._session is not None, "use `async with ChatClient(...)`"
        payload = json.dumps(self.body(messages, rollout))
        start = time.perf_counter()
        attempt = 0
        while True:
            self.stats.requests += 1
            hint: float | None = None
            retryable = True
            try:
                async with self._session.post(self._url, data=payload) as resp:
                    raw = await resp.read()
                    if resp.status == 200:
                        return self._parse(raw, start, attempt + 1)
                    detail = raw[:200].decode("utf-8", "replace")
                    error = RequestFailed(f"http_{resp.status}", detail)
                    retryable = resp.status in _RETRY_STATUS
                    hint = _retry_after(resp.headers)
            except RequestFailed as exc:  # a 200 whose body is not a chat completion
                error = exc
            except TimeoutError:
                error = RequestFailed("timeout", f"no answer within {self.timeout.total:.0f} s")
            except aiohttp.ClientError as exc:
                error = RequestFailed("connection", str(exc) or type(exc).__name__)
            if not retryable or attempt >= self.max_retries:
                self.stats.failures[error.kind] += 1
                raise error
            self.stats.retries += 1
            await asyncio.sleep(self._delay(attempt, hint))
            attempt += 1

    def _parse(self, raw: bytes, start: float, attempts: int) -> Reply:
        try:
            data = json.loads(raw)
            text = data["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise RequestFailed("bad_response", raw[:200].decode("utf-8", "replace")) from None
        usage = data.get("usage") or {}
        return Reply(
            text=text or "",
            usage={
                "prompt_tokens": int(usage.get("prompt_tokens") or 0),
                "completion_tokens": int(usage.get("completion_tokens") or 0),
            },
            latency_s=time.perf_counter() - start,
            attempts=attempts,
        )

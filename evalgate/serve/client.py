"""The hot path: chat completions over aiohttp, with retries that honour the server.

aiohttp rather than the ``openai`` SDK: on a 2-core runner the SDK's per-request overhead caps a
run at a few hundred requests/s, while a vLLM server answers short prompts by the thousand. The
request and response are the plain OpenAI chat-completions JSON, so any compatible server works.

Under load and faults:

- transient failures (429, 408/409/425, 5xx, timeouts, connection errors, truncated or malformed
  bodies) are retried with full-jitter exponential backoff, or after the server's ``Retry-After``;
- concurrency adapts (AIMD): a 429 halves the number of requests in flight, successes add one
  back per window, between 1 and ``max_concurrent``;
- a request that fails for good raises :class:`RequestFailed` with a short ``kind``; the engine
  records the rollout as an error, never as a 0. ``ChatClient.stats`` counts every error by kind,
  retried or final, for the scorecard;
- with a :class:`~evalgate.run.cache.ResponseCache`, a request already answered is not sent again;
- a reply with no text (``content: null``, no choices, tool calls only) is the error kind
  ``empty_reply``, not a 0, unless the benchmark allows empty answers (``allow_empty``);
- an endpoint that stops answering at all (dead, hung) stops the run (:mod:`.breaker`), and one
  request gives up retrying once ``deadline_s`` has passed;
- redirects are followed here, hop by hop, each hop with the full timeout: Modal answers a
  request still running after 150 s with ``303`` to a result URL that blocks until the result is
  ready. Once a request has a result URL, a retry (a hop that timed out, a dropped connection)
  polls that URL instead of POSTing again, so one item never runs twice on the GPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from yarl import URL

from evalgate._tls import aiohttp, load_ca_bundle
from evalgate.serve import served
from evalgate.serve._pacing import AdaptiveLimit, parse_retry_after, retry_after
from evalgate.serve.base import Endpoint
from evalgate.serve.breaker import RESTART_GRACE_S, Breaker
from evalgate.serve.keys import check_api_key

__all__ = [
    "MAX_REDIRECTS",
    "MAX_REPLY_BYTES",
    "PROBE_MESSAGE",
    "AdaptiveLimit",
    "ChatClient",
    "ClientStats",
    "Reply",
    "ReplyCache",
    "RequestFailed",
    "dumps",
    "loads",
    "parse_retry_after",
    "retry_after",
]

# The breaker's probe request asks this, for one token (a server's log can tell it apart).
PROBE_MESSAGE = "evalgate health probe: reply with OK."

# One encoder, built once: json.dumps with non-default arguments builds a new one per call.
_STD_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _std_dumps(value: object) -> bytes:
    """Compact UTF-8 JSON with the stdlib (``dumps`` where orjson is not installed)."""
    return _STD_ENCODER.encode(value).encode("utf-8")


try:  # orjson: 5-10x faster encode/decode on the per-request path; the stdlib is the fallback.
    import orjson

    def dumps(value: object) -> bytes:
        """Compact UTF-8 JSON: the stdlib's ``separators=(",", ":")``, ``ensure_ascii=False``
        form, byte for byte, except the exponent spelling of tiny or huge floats (1e-07 vs
        1e-7). Cache keys hash these bytes, so a cache is shared only between installs that
        agree on orjson."""
        try:
            return orjson.dumps(value)
        except TypeError:  # integers beyond 64 bits and the like: the stdlib handles them
            return _std_dumps(value)

    loads = orjson.loads
except ImportError:  # pragma: no cover - exercised only where orjson is not installed
    dumps = _std_dumps
    # json.loads's signature has keyword options orjson's lacks; both take one str or bytes.
    loads = json.loads  # type: ignore[assignment]


_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_REDIRECT_STATUS = frozenset({301, 302, 303, 307, 308})
# A 200 that fails this way fails again if asked again: not retried.
_FINAL_KINDS = frozenset({"redirect_limit", "empty_reply", "too_large"})
_T = TypeVar("_T")
_COUNT_END = served.COUNT_END  # a token count is below it (64-bit columns)
_MAX_RETRY_AFTER_S = 60.0  # a server asking for longer is treated as asking for a minute
# Redirect hops one request may take. Modal answers every 150 s with a 303 until the function's
# timeout (evalgate's Modal apps: 3600 s, i.e. 24 hops); past this the request fails as
# `redirect_limit`, without a retry (it would only wait on the same result again).
MAX_REDIRECTS = 30
MAX_REPLY_BYTES = 4 << 20  # eval.max_reply_mib's default
_HOP_MARGIN_S = 30.0


# init=False: the class writes its own __init__ (below); the dataclass's would be compiled
# at import only to be discarded.
@dataclass(frozen=True, init=False)
class Reply:
    text: str
    usage: dict[str, int]
    latency_s: float
    attempts: int  # HTTP attempts this reply took; 0 when it came from the cache
    cached: bool = False
    served_by: str | None = None  # the model that answered, when not the one asked (fallbacks)
    finish_reason: str | None = None  # the server's; None from the cache (or when not sent)
    # Never hashable: the generated __hash__ hashed `usage`, a dict, and always raised. Said here,
    # it is not compiled at every start-up (dataclasses exec each generated method).
    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self,
        text: str,
        usage: dict[str, int],
        latency_s: float,
        attempts: int,
        cached: bool = False,
        served_by: str | None = None,
        finish_reason: str | None = None,
    ) -> None:
        # The dataclass's own __init__ of a frozen class sets each field through
        # object.__setattr__, about 1 µs for these seven, once a request: the fields go into
        # the instance's dict instead (frozen all the same: assignment still raises).
        # tests/test_engine.py holds this signature to the fields.
        fields = self.__dict__
        fields["text"] = text
        fields["usage"] = usage
        fields["latency_s"] = latency_s
        fields["attempts"] = attempts
        fields["cached"] = cached
        fields["served_by"] = served_by
        fields["finish_reason"] = finish_reason


class RequestFailed(Exception):
    """A request failed for good (after retries). The rollout is recorded as an error, not a 0."""

    def __init__(self, kind: str, detail: str) -> None:
        # Short category, the part before ":" in results.jsonl's "error" (the scorecard groups on
        # it): "http_429", "http_500", "timeout", "connection", "truncated", "bad_response",
        # "too_large".
        self.kind = kind
        super().__init__(f"{kind}: {detail}")


# eq=False: never compared (an identity, not a value); the generated methods would be
# compiled from source at every start-up (dataclasses exec each one: issue #36).
@dataclass(eq=False)
class ClientStats:
    """What the client did, for metadata.json and the scorecard's error table."""

    requests: int = 0  # HTTP attempts sent (cache hits excluded)
    retries: int = 0  # attempts that were followed by another attempt
    cache_hits: int = 0
    retried: Counter[str] = field(default_factory=Counter)  # transient errors, retried, by kind
    failures: Counter[str] = field(default_factory=Counter)  # requests failed for good, by kind
    redirects: int = 0  # 303 hops followed (Modal answers past 150 s with one)
    throttle_decreases: int = 0  # times AIMD halved the concurrency limit
    min_concurrency: int = 0  # lowest concurrency limit AIMD reached (max_concurrent if none)
    # The first name a reply gave that is not the requested one (a deployment's own, or a
    # router's fallback): said once in metadata, not per rollout.
    server_model: str | None = None

    def as_dict(self) -> dict[str, object]:
        named = {"server_model": self.server_model} if self.server_model else {}
        return {
            **named,
            "requests": self.requests,
            "retries": self.retries,
            "cache_hits": self.cache_hits,
            "redirects": self.redirects,
            "retried_errors": dict(sorted(self.retried.items())),
            "failed_requests": dict(sorted(self.failures.items())),
            "throttle_decreases": self.throttle_decreases,
            "min_concurrency": self.min_concurrency,
        }


def _too_large(cap: int) -> RequestFailed:
    # Built only when a reply is too large: an exception and its message per request cost more
    # than the rest of the size check.
    return RequestFailed("too_large", f"the reply is over {cap} bytes (eval.max_reply_mib)")


class SamplingParams(Protocol):
    """What a request's body takes from the sampling config (``config.spec.Sampling``, or a
    verifiers rollout's own); a ``stop`` list is read when there is one."""

    @property
    def temperature(self) -> float: ...
    @property
    def top_p(self) -> float: ...
    @property
    def max_tokens(self) -> int: ...
    @property
    def seed(self) -> int | None: ...


class ReplyCache(Protocol):
    """What the client asks of a response cache; the run stage's
    :class:`~evalgate.run.cache.ResponseCache` is the one a run passes in (serving comes first
    in the stage order, so it names the shape, not the class)."""

    def key(self, identity: str, body: bytes, rollout: int) -> bytes: ...

    def get(self, key: bytes) -> tuple[str, dict[str, int]] | None: ...

    def put(self, key: bytes, text: str, usage: Mapping[str, int]) -> None: ...

    def flush(self) -> None: ...


class ChatClient:
    """Send chat requests to one endpoint with fixed sampling; use as ``async with``.

    ``cache``: a :class:`ReplyCache` (the run's response cache), or None (``--no-cache``).
    ``cache_identity``: what identifies the endpoint in cache keys; default base_url + model.
    Backends whose base_url changes from run to run (an embedded server on a random port) should
    pass something stable that changes with the model, e.g. a digest of the model config.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        sampling: SamplingParams,
        *,
        timeout_s: float = 120.0,
        max_retries: int = 4,
        max_concurrent: int = 8,
        backoff_base_s: float = 0.5,
        backoff_cap_s: float = 30.0,
        adaptive: bool = True,
        cache: ReplyCache | None = None,
        cache_identity: str | None = None,
        max_redirects: int = MAX_REDIRECTS,
        allow_empty: bool = False,
        max_consecutive_failures: int = 10,
        deadline_s: float | None = None,
        max_reply_bytes: int = MAX_REPLY_BYTES,
        restart_grace_s: float = RESTART_GRACE_S,
        replay: Mapping[tuple[bytes, int], tuple[str, dict[str, int]]] | None = None,
    ) -> None:
        self.endpoint = endpoint
        # Replies the model already gave, by (messages as sent, rollout): a `resume
        # --retry-errors` whose scorer failed after the model answered asks only the scorer.
        self.replay = dict(replay or {})
        self.max_reply_bytes = max_reply_bytes
        self.sampling = sampling
        self.timeout_s = timeout_s
        # Per HTTP exchange. A server that answers long requests with a redirect after a fixed
        # time (Modal: 303 at 150 s) gets at least that plus a margin per hop, or no request
        # would ever reach the redirect.
        hop_floor = endpoint.redirect_after_s + _HOP_MARGIN_S if endpoint.redirect_after_s else 0
        self.hop_timeout_s = max(timeout_s, hop_floor)
        self.timeout = aiohttp.ClientTimeout(total=self.hop_timeout_s)
        self.max_redirects = max_redirects
        self.max_retries = max_retries
        self.max_concurrent = max_concurrent
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.limit = AdaptiveLimit(max_concurrent) if adaptive else None
        self.cache = cache
        self.cache_identity = cache_identity or f"{endpoint.base_url}\n{endpoint.model}"
        self.stats = ClientStats(min_concurrency=max_concurrent)
        self._session: aiohttp.ClientSession | None = None
        self._url = URL(f"{endpoint.base_url}/chat/completions")  # parsed once, not per request
        self._headers = {"Content-Type": "application/json"}
        if endpoint.api_key:  # checked here too: every backend's key ends up in this header
            key = check_api_key(endpoint.api_key, where=f"endpoint {endpoint.base_url}")
            self._headers["Authorization"] = f"Bearer {key}"
        self._sleep = asyncio.sleep  # tests substitute a recorder
        self.allow_empty = allow_empty
        # A request's time over all its attempts and waits; None: only the retry count bounds it.
        self.deadline_s = deadline_s
        self.breaker = Breaker(
            max_consecutive_failures,
            alive=endpoint.alive,
            probe=self._probe,
            restart_s=restart_grace_s,
        )

    async def __aenter__(self) -> ChatClient:
        if self.endpoint.base_url[:6].lower() == "https:":
            load_ca_bundle()  # now, not on the loop with the first requests waiting
        self._session = aiohttp.ClientSession(
            # One keep-alive connection per concurrent request; DNS looked up once per run. Idle
            # connections are dropped after 4 s, before uvicorn's (vLLM, llama.cpp: 5 s) drops
            # them: reusing a connection the server is closing costs a retry.
            connector=aiohttp.TCPConnector(
                limit=self.max_concurrent, ttl_dns_cache=300, keepalive_timeout=4.0
            ),
            timeout=self.timeout,
            headers=self._headers,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.breaker.close()
        if self._session is not None:
            await self._session.close()
        if self.cache is not None:
            self.cache.flush()

    def body(self, messages: Sequence[Mapping[str, object]], rollout: int) -> dict[str, object]:
        s = self.sampling
        body: dict[str, object] = {
            "model": self.endpoint.model,
            "messages": messages,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_tokens": s.max_tokens,
        }
        if s.seed is not None:
            body["seed"] = s.seed + rollout
        stop = getattr(s, "stop", None)
        if stop:
            body["stop"] = list(stop)
        return body

    def _delay(self, attempt: int, server_hint: float | None) -> float:
        if server_hint is not None:
            return min(server_hint, _MAX_RETRY_AFTER_S)
        # Full jitter (AWS architecture blog): spreads retries of a burst of 429s apart.
        return random.uniform(0, min(self.backoff_cap_s, self.backoff_base_s * 2**attempt))

    async def chat(
        self,
        messages: list[dict[str, str]],
        *,
        rollout: int = 0,
        keep: Callable[[str], bool] | None = None,
        response_format: Mapping[str, object] | None = None,
        complete_only: bool = False,
    ) -> Reply:
        """One chat completion. ``keep``: whether a reply's text may be cached (and a cached
        one used): a judge's unreadable verdict is asked again on the next run, not replayed.
        ``response_format``: the OpenAI field, sent as given (a judge's structured output); it
        is part of the request, so of the cache key too. ``complete_only``: a reply cut off at
        max_tokens (finish_reason "length") is not cached (a judge's verdict must be whole)."""
        if self.replay:
            again = self.replay.pop((dumps(messages), rollout), None)
            if again is not None:
                self.stats.cache_hits += 1
                return Reply(text=again[0], usage=again[1], latency_s=0.0, attempts=0, cached=True)
        body = self.body(messages, rollout)
        if response_format is not None:
            body["response_format"] = response_format
        payload = dumps(body)
        key = None
        if self.cache is not None:
            # The rollout index is in the key even when the body has no seed: k rollouts of one
            # item at temperature > 0 are k independent samples, not one sample k times.
            key = self.cache.key(self.cache_identity, payload, rollout)
            hit = self.cache.get(key)
            # An empty reply is asked again (unless allowed), and so is one `keep` refuses.
            if hit is not None and (hit[0] or self.allow_empty) and (keep is None or keep(hit[0])):
                self.stats.cache_hits += 1
                return Reply(text=hit[0], usage=hit[1], latency_s=0.0, attempts=0, cached=True)
        start = time.perf_counter()
        reply = await self.send(payload, lambda raw, attempts: self._parse(raw, start, attempts))
        # A fallback's answer is never replayed as the configured model's.
        cut = complete_only and reply.finish_reason == "length"
        if (
            key is not None
            and reply.served_by is None
            and not cut
            and (keep is None or keep(reply.text))
        ):
            self.cache.put(key, reply.text, reply.usage)  # type: ignore[union-attr]
        return reply

    async def send(self, payload: bytes, parse: Callable[[bytes, int], _T]) -> _T:
        """POST one request body under this client's policy: the concurrency limit (AIMD on
        429), retries with backoff and ``Retry-After``, redirects, the breaker and the deadline,
        all counted in ``stats``. ``parse(body, attempts)`` turns a 200's body into the result,
        raising :class:`RequestFailed` for one that is not (retried, except the kinds in
        ``_FINAL_KINDS``). Every request to the model goes through here (text and tool calls)."""
        session = self._session
        assert session is not None, "use `async with ChatClient(...)`"
        limit = self.limit
        start = time.perf_counter()
        attempt = 0
        # Set once the server answered 303 (Modal, past 150 s): the generation runs there, and a
        # retry polls its result rather than POSTing again, which would start another one.
        result: list[URL] = []
        breaker = self.breaker
        while True:
            hint: float | None = None
            retryable = True
            timed_out = False
            if breaker.waiting is not None:  # the endpoint is restarting: wait for it
                await breaker.wait()
            if breaker.error is not None:  # breaker.check(), inline: once a request
                raise breaker.error
            if limit is None:
                epoch = 0
            elif limit.in_flight < limit._cap and not limit._waiters:  # acquire()'s fast path,
                limit.in_flight += 1  # inline: no coroutine per request when a slot is free
                epoch = limit.epoch
            else:
                epoch = await limit.acquire()
            self.stats.requests += 1
            try:
                status, raw, headers = await self._exchange(session, payload, result)
                breaker.consecutive = 0  # breaker.answered(): the server is there
                if status == 200:
                    parsed = parse(raw, attempt + 1)
                    if limit is not None and limit.limit < limit.maximum:  # else a no-op
                        limit.succeeded()
                    # The common reply, served by the model asked for (its body names no
                    # other, and no LiteLLM fallback header at all) is returned as it is:
                    # _note_served's no-op, without its call and fell_back's once a request.
                    if getattr(parsed, "served_by", None) is None and not (
                        headers and headers.get(served.FALLBACK_HEADER)
                    ):
                        return parsed
                    return self._note_served(parsed, raw, headers)
                error = RequestFailed(f"http_{status}", raw[:200].decode("utf-8", "replace"))
                retryable = status in _RETRY_STATUS
                hint = retry_after(headers)
                if status == 429 and limit is not None:
                    limit.throttled(epoch)
                    self.stats.throttle_decreases = limit.decreases
                    self.stats.min_concurrency = limit.lowest
            except (RequestFailed, TimeoutError, aiohttp.ClientError) as exc:
                error, retryable, timed_out = self._failed(exc)
            finally:
                if limit is not None:  # limit.release(), inline: once a request
                    limit.in_flight -= 1
                    if limit._waiters:  # its _wake(): only a request waiting for a slot
                        limit._wake()
            if timed_out:
                await breaker.timed_out(str(error), self.endpoint.base_url)
            delay = self._delay(attempt, hint) if retryable else 0.0
            late = (
                self.deadline_s is not None
                and time.perf_counter() - start + delay >= self.deadline_s
            )
            if not retryable or attempt >= self.max_retries or late:
                self.stats.failures[error.kind] += 1
                if late and retryable and attempt < self.max_retries:
                    raise RequestFailed(
                        error.kind,
                        f"{str(error).split(': ', 1)[-1]} (gave up after "
                        f"{time.perf_counter() - start:.0f} s: eval.request_deadline_s)",
                    )
                raise error
            self.stats.retried[error.kind] += 1
            self.stats.retries += 1
            await self._sleep(delay)
            attempt += 1

    def _failed(self, exc: Exception) -> tuple[RequestFailed, bool, bool]:
        """What a failed exchange was: (the error, whether a retry may help, whether it timed
        out: then the breaker asks the server, outside the concurrency slot)."""
        if isinstance(exc, RequestFailed):  # a 200 whose body is no chat completion; too many hops
            return exc, exc.kind not in _FINAL_KINDS, False
        if isinstance(exc, TimeoutError):  # before ClientError: aiohttp's timeouts are both
            return (
                RequestFailed("timeout", f"no answer within {self.hop_timeout_s:g} s"),
                True,
                True,
            )
        detail = str(exc) or type(exc).__name__
        if isinstance(exc, aiohttp.ClientPayloadError):  # body cut short, Content-Length lied
            return RequestFailed("truncated", detail), True, False
        if isinstance(exc, aiohttp.ClientConnectionError):  # refused, reset, closed before reply
            error = RequestFailed("connection", detail)
            # Refused: nobody listens. Reset or closed: a live server dropped this one request,
            # which counts only when the server's owner says it is gone.
            refused = isinstance(exc, aiohttp.ClientConnectorError)
            self.breaker.no_answer("connection", str(error), self.endpoint.base_url, counts=refused)
            return error, True, False
        return RequestFailed("bad_response", detail), True, False  # a response aiohttp can't parse

    async def _probe(self) -> str | None:
        """Is the server there? One chat request for one token (the generation path, not only
        the HTTP front: a wedged engine can still list its models); None when it answered,
        with any status, within the hop timeout, else why not. The breaker's evidence."""
        if self._session is None:
            return "no session"
        body = {
            "model": self.endpoint.model,
            "messages": [{"role": "user", "content": PROBE_MESSAGE}],
            "max_tokens": 1,
        }
        try:
            async with self._session.post(
                self._url, data=dumps(body), allow_redirects=False
            ) as resp:
                await resp.read()
        except TimeoutError:
            return f"no answer within {self.hop_timeout_s:g} s"
        except aiohttp.ClientError as exc:
            return str(exc) or type(exc).__name__
        return None

    async def _exchange(
        self, session: aiohttp.ClientSession, payload: bytes, result: list[URL]
    ) -> tuple[int, bytes, Mapping[str, str]]:
        """POST the request (or GET its result URL when ``result`` holds one), following
        redirects here rather than in aiohttp: each hop gets the full timeout, the result URL
        is remembered in ``result`` for a retry, and the hop budget is ours (aiohttp's is 10)."""
        hops = 0
        url = self._url
        while True:
            if result:
                request = session.get(result[0], allow_redirects=False)
            else:
                request = session.post(url, data=payload, allow_redirects=False)
            async with request as resp:
                status = resp.status
                location = resp.headers.get("Location") if status in _REDIRECT_STATUS else None
                if not location:
                    length = resp.content_length
                    if length is not None and length <= self.max_reply_bytes:
                        # The common reply, sized and under the cap, read here: a coroutine
                        # less per request (_read_capped: the rest, and the refusals).
                        return status, await resp.read(), resp.headers
                    return status, await self._read_capped(resp), resp.headers
                await resp.release()
            target = resp.url.join(URL(location))
            if resp.status in (307, 308) and not result:
                url = target  # the request itself moved: POST it there, body and all
            else:
                result[:] = [target]  # 301/302/303: GET the result there
            hops += 1
            self.stats.redirects += 1
            if hops > self.max_redirects:
                raise RequestFailed(
                    "redirect_limit",
                    f"no result after {self.max_redirects} redirects ({target})",
                )

    async def _read_capped(self, resp: aiohttp.ClientResponse) -> bytes:
        """The body, read no further than ``max_reply_bytes`` (a 50 MiB completion is an error,
        never a 50 MiB string in memory, in results.jsonl and in every report)."""
        cap = self.max_reply_bytes
        length = resp.content_length
        if length is not None:
            if length > cap:
                raise _too_large(cap)
            # aiohttp's parser stops at Content-Length: read() cannot go past it, and it is the
            # per-request path (no async iterator, no chunk list) every sized reply takes.
            return await resp.read()
        chunks, size = [], 0  # chunked or close-delimited: counted as it arrives
        async for chunk in resp.content.iter_chunked(1 << 16):
            size += len(chunk)
            if size > cap:
                raise _too_large(cap)
            chunks.append(chunk)
        return b"".join(chunks)

    def _note_served(self, parsed: _T, raw: bytes, headers: Mapping[str, str] | None) -> _T:
        """A reply another model served (a router's fallback) is noted for the rollout (its
        tokens priced as that model) and marked on a :class:`Reply` (never cached as the
        configured model's answer). The body is read again only on LiteLLM's fallback header,
        for a result that is not a Reply (tool calls)."""
        named = other = getattr(parsed, "served_by", None)  # what the reply's body named
        if other is None and served.fell_back(headers):
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                other = served.other_model(
                    self.endpoint.model,
                    loads(raw).get("model"),
                    headers,
                    router=self.endpoint.router,
                )
        if other is None:
            return parsed
        usage = getattr(parsed, "usage", None)
        if usage is None:
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                usage = loads(raw).get("usage") or {}
        served.note(other, usage or {}, served.response_cost(headers))  # a fallback's only
        if other != named and isinstance(parsed, Reply):  # only the header named it
            return dataclasses.replace(parsed, served_by=other)
        return parsed

    def _parse(self, raw: bytes, start: float, attempts: int) -> Reply:
        try:
            data = loads(raw)
            choices = data["choices"]
            first = choices[0] if isinstance(choices, list) and choices else {"message": {}}
            message = first["message"]
            # A tool-call reply may leave "content" out; any other reply must carry it.
            text = (
                message.get("content")
                if choices == [] or "tool_calls" in message
                else (message["content"])
            )
            usage = data.get("usage") or {}
            prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
            # Two counts a server gives as they are (non-negative ints under 2^63) are taken
            # as they are; anything else is checked, or refused, by token_count.
            if type(prompt) is not int or not 0 <= prompt < _COUNT_END:
                prompt = served.token_count(usage, "prompt_tokens")
            if type(completion) is not int or not 0 <= completion < _COUNT_END:
                completion = served.token_count(usage, "completion_tokens")
            usage = {"prompt_tokens": prompt, "completion_tokens": completion}
        except (ValueError, KeyError, IndexError, TypeError, AttributeError, OverflowError):
            raise RequestFailed("bad_response", raw[:200].decode("utf-8", "replace")) from None
        if text is not None and not isinstance(text, str):
            raise RequestFailed("bad_response", f"content is {type(text).__name__}, not text")
        if not text and not self.allow_empty:
            if choices == []:
                raise RequestFailed("empty_reply", "the reply has no choices")
            what = (
                "tool calls only, no text"
                if message.get("tool_calls")
                else ("content is null" if text is None else "content is empty")
            )
            finish = first.get("finish_reason")
            raise RequestFailed("empty_reply", f"{what} (finish_reason: {finish})")
        named = data.get("model")
        endpoint = self.endpoint
        served_by = None  # a reply naming the model asked for (the common one) was served by it
        if named != endpoint.model and named:
            if self.stats.server_model is None:
                self.stats.server_model = str(named)  # noted once: the deployment's own name
            served_by = served.other_model(endpoint.model, named, None, router=endpoint.router)
        # Positional, in field order (text, usage, latency_s, attempts, cached, served_by,
        # finish_reason): once per request, and keywords cost a third more.
        finish = first.get("finish_reason") if isinstance(first, dict) else None
        return Reply(
            text or "", usage, time.perf_counter() - start, attempts, False, served_by, finish
        )

"""How fast the client may go: the AIMD bound on requests in flight, and a server's
``Retry-After`` hint (what :class:`evalgate.serve.client.ChatClient` and the GitHub client read)."""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections import deque
from collections.abc import Mapping

__all__ = ["AdaptiveLimit", "parse_retry_after", "retry_after"]


class AdaptiveLimit:
    """AIMD bound on requests in flight: halve on throttling, +1 per window of successes.

    Like TCP congestion avoidance: a 429 means the server is saturated, so the limit is halved
    (never below ``minimum``) — but only once per window: requests that were already in flight
    when the limit dropped carry no news, or one burst of 429s would collapse the limit to 1.
    Each success adds ``1 / limit``, i.e. about one slot per window of successes, up to
    ``maximum``. Waiters are served first-in first-out. Not thread-safe: one event loop.
    """

    def __init__(self, maximum: int, *, minimum: int = 1, decrease: float = 0.5) -> None:
        self.maximum = max(1, maximum)
        self.minimum = max(1, min(minimum, self.maximum))
        self.decrease_factor = decrease
        self.limit = float(self.maximum)
        self.epoch = 0  # bumped on every decrease; requests remember the epoch they started in
        self.in_flight = 0
        self.lowest = self.maximum
        self.decreases = 0
        self._cap = self.maximum  # int(limit), cached: the fast path reads it per request
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> int:
        """Wait for a slot; returns the epoch to pass to :meth:`throttled`."""
        if self.in_flight < self._cap and not self._waiters:
            self.in_flight += 1
            return self.epoch
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut  # release() hands the slot over: in_flight already counts it
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # the slot was handed over just as we were cancelled: pass it on
            else:
                self._waiters.remove(fut)
            raise
        return self.epoch

    def release(self) -> None:
        # ChatClient.send inlines this (once a request), as it does acquire's fast path.
        self.in_flight -= 1
        self._wake()

    def succeeded(self) -> None:
        if self.limit < self.maximum:
            self.limit = min(float(self.maximum), self.limit + 1.0 / self.limit)
            self._cap = int(self.limit)
            self._wake()

    def throttled(self, epoch: int) -> None:
        """The server said 429 to a request that acquired its slot in ``epoch``."""
        if epoch != self.epoch:
            return  # started before the last decrease: that decrease already answered it
        self.epoch += 1
        self.decreases += 1
        self.limit = max(float(self.minimum), self.limit * self.decrease_factor)
        self._cap = int(self.limit)
        self.lowest = min(self.lowest, self._cap)

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self._cap:
            fut = self._waiters.popleft()
            if not fut.done():
                self.in_flight += 1
                fut.set_result(None)


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value: delta-seconds or an HTTP date (RFC 9110).
    None when absent or unparseable (the caller falls back to its own backoff)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, parsed.timestamp() - (time.time() if now is None else now))


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """The server's wait hint from response headers (chat servers and LiteLLM's proxy)."""
    if not headers:
        return None
    # A LiteLLM proxy passes an upstream 429's header on as llm_provider-retry-after.
    return parse_retry_after(headers.get("Retry-After") or headers.get("llm_provider-retry-after"))

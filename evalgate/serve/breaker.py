"""When to stop sending requests to an endpoint that is gone: a circuit breaker.

A retried request hides one bad answer; it cannot hide a dead or hung server. Without a breaker
every remaining rollout spends its full retry budget on it (120 s × 5 attempts per item against a
server that accepts connections and never answers; ~30 min for 2,000 items against one that
died). But a slow item is not a dead server: items that never answer on a live server are those
items' errors, counted against ``eval.max_error_rate`` by the request deadline, and a server that
restarts is back in seconds. So the breaker trips only on evidence that the server is gone:

- **a refused connection** (nobody listens) counts. After ``threshold`` in a row the breaker
  does not trip at once: every request waits while it probes the endpoint for ``restart_s``
  (:data:`RESTART_GRACE_S`, 15 s), and a server back within it is ridden through;
- **a timeout** counts only when a probe request (:attr:`Breaker.probe`, a one-token chat
  request) gets no answer either: the server is hung, not this item;
- any HTTP answer, an error status included, proves the server is there and resets the count.

Tripped, the run stops as an infrastructure error (:class:`EndpointDown`) naming the cause, and
the journal keeps what finished, so ``evalgate resume`` goes on once the server is back.

A backend that owns its server process (the embedded llama.cpp server) also gives the endpoint a
liveness probe (:attr:`evalgate.serve.base.Endpoint.alive`): a failed attempt asks it first, so a
server that died ends the run at once, with its exit code, instead of after the threshold.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from evalgate.errors import InfraError

__all__ = ["RESTART_GRACE_S", "Breaker", "EndpointDown"]

RESTART_GRACE_S = 15.0
"""How long an endpoint that refuses connections is waited for (a restart) before the run
stops."""
_PROBE_INTERVAL_S = 0.5


class EndpointDown(InfraError):
    """The endpoint is gone for good (dead server, or no answer to many attempts in a row): the
    run stops; it is not one rollout's error."""


class Breaker:
    """Consecutive no-answer attempts across one client; trips at ``threshold`` (0: never).

    ``probe()``: one request to the endpoint; None when the server answered (any status), else
    why not. Without one, timeouts count as they come and refusals trip at the threshold."""

    def __init__(
        self,
        threshold: int,
        *,
        alive: Callable[[], str | None] | None = None,
        probe: Callable[[], Awaitable[str | None]] | None = None,
        restart_s: float = RESTART_GRACE_S,
    ) -> None:
        self.threshold = threshold
        self.alive = alive
        self.probe = probe
        self.restart_s = restart_s
        self.consecutive = 0
        self.error: EndpointDown | None = None
        # Set while requests wait for a restarting endpoint (every sender awaits it).
        self.waiting: asyncio.Task[None] | None = None
        self._probing: asyncio.Task[str | None] | None = None  # one probe shared by timeouts

    def answered(self) -> None:
        """The server sent an HTTP response (any status): it is there."""
        self.consecutive = 0

    def check(self) -> None:
        """Raise the trip's error, if tripped: requests that start later don't wait on it."""
        if self.error is not None:
            raise self.error

    async def wait(self) -> None:
        """Before an attempt: wait while the endpoint is being waited for, then :meth:`check`."""
        if self.waiting is not None:
            await asyncio.shield(self.waiting)
        self.check()

    def _gone(self) -> str | None:
        return self.alive() if self.alive is not None else None

    def no_answer(self, kind: str, detail: str, url: str, *, counts: bool = True) -> None:
        """An attempt got no answer (``kind``: timeout, connection): trip when it is the last
        straw, or at once when the server's owner says its process is gone. ``counts``: False
        for a failure a live server also causes (a dropped connection): only the probe decides."""
        if self.error is None:
            gone = self._gone()
            if gone:
                self.error = EndpointDown(f"the model server died mid-run: {gone}")
            elif counts:
                self.consecutive += 1
                if self.threshold and self.consecutive >= self.threshold:
                    if kind == "connection" and self.probe is not None and self.restart_s > 0:
                        if self.waiting is None:  # a restart looks like this: wait for it
                            self.waiting = asyncio.get_running_loop().create_task(
                                self._ride_through(url, detail)
                            )
                    else:
                        self.error = EndpointDown(
                            f"{url} gave no answer to {self.consecutive} requests in a row "
                            f"(last: {kind}: {detail}); the endpoint is down or hung, so the run "
                            "stopped (eval.max_consecutive_failures; `evalgate resume` goes on "
                            "from here)"
                        )
        self.check()

    async def timed_out(self, detail: str, url: str) -> None:
        """An attempt timed out: it counts only when the server does not answer a probe either
        (a hung server); a live server's slow item is that item's error, not the endpoint's."""
        self.check()
        if self.probe is not None and self.threshold and not self._gone():
            why = await self._probe_once()
            if why is None:
                self.consecutive = 0  # it answered: the server is there
                return
            detail = f"{detail}; a probe request got no answer either ({why})"
        self.no_answer("timeout", detail, url)

    async def _probe_once(self) -> str | None:
        """The running probe's result, or a new probe's: timeouts that end together share one."""
        if self._probing is None or self._probing.done():
            assert self.probe is not None
            self._probing = asyncio.get_running_loop().create_task(self._safe_probe())
        return await asyncio.shield(self._probing)

    async def _safe_probe(self) -> str | None:
        assert self.probe is not None
        try:
            return await self.probe()
        except Exception as exc:  # the probe's own failure is a failed probe, not a crash
            return f"{type(exc).__name__}: {exc}"

    async def _ride_through(self, url: str, detail: str) -> None:
        """Probe the endpoint until it answers (a restart: go on) or ``restart_s`` has passed
        (the endpoint is down: trip)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.restart_s
        try:
            while True:
                why = await self._safe_probe()
                if why is None:
                    self.consecutive = 0
                    return
                gone = self._gone()
                if gone:
                    self.error = EndpointDown(f"the model server died mid-run: {gone}")
                    return
                if loop.time() >= deadline:
                    self.error = EndpointDown(
                        f"{url} refused connections for {self.restart_s:g} s after "
                        f"{self.consecutive} failed requests in a row (last: {detail}); the "
                        "endpoint is down, so the run stopped (`evalgate resume` goes on from "
                        "here)"
                    )
                    return
                await asyncio.sleep(_PROBE_INTERVAL_S)
        finally:
            self.waiting = None

    async def close(self) -> None:
        """Cancel a probe still running (the run is over)."""
        for task in (self.waiting, self._probing):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

"""When to stop sending requests to an endpoint that is gone: a circuit breaker.

A retried request hides one bad answer; it cannot hide a dead or hung server. Without a breaker
every remaining rollout spends its full retry budget on it (120 s × 5 attempts per item against a
server that accepts connections and never answers; ~30 min for 2,000 items against one that
died). :class:`Breaker` counts the attempts that got no HTTP answer at all (a timeout, a refused
connection), in the order they end, across all requests in flight; any HTTP answer, an error
status included, proves the server is there and resets the count. After ``threshold`` in a row
the run stops as an infrastructure error (:class:`EndpointDown`) naming the cause, and the
journal keeps what finished, so ``evalgate resume`` goes on once the server is back.

A backend that owns its server process (the embedded llama.cpp server) also gives the endpoint a
liveness probe (:attr:`evalgate.serve.base.Endpoint.alive`): a failed attempt asks it first, so a
server that died ends the run at once, with its exit code, instead of after the threshold.
"""

from __future__ import annotations

from collections.abc import Callable

from evalgate.errors import InfraError

__all__ = ["Breaker", "EndpointDown"]


class EndpointDown(InfraError):
    """The endpoint is gone for good (dead server, or no answer to many attempts in a row): the
    run stops; it is not one rollout's error."""


class Breaker:
    """Consecutive no-answer attempts across one client; trips at ``threshold`` (0: never)."""

    def __init__(self, threshold: int, *, alive: Callable[[], str | None] | None = None) -> None:
        self.threshold = threshold
        self.alive = alive
        self.consecutive = 0
        self.error: EndpointDown | None = None

    def answered(self) -> None:
        """The server sent an HTTP response (any status): it is there."""
        self.consecutive = 0

    def check(self) -> None:
        """Raise the trip's error, if tripped: requests that start later don't wait on it."""
        if self.error is not None:
            raise self.error

    def no_answer(self, kind: str, detail: str, url: str, *, counts: bool = True) -> None:
        """An attempt got no answer (``kind``: timeout, connection): trip when it is the last
        straw, or at once when the server's owner says its process is gone. ``counts``: False
        for a failure a live server also causes (a dropped connection): only the probe decides."""
        if self.error is None:
            gone = self.alive() if self.alive is not None else None
            if gone:
                self.error = EndpointDown(f"the model server died mid-run: {gone}")
            elif counts:
                self.consecutive += 1
                if self.threshold and self.consecutive >= self.threshold:
                    self.error = EndpointDown(
                        f"{url} gave no answer to {self.consecutive} requests in a row (last: "
                        f"{kind}: {detail}); the endpoint is down or hung, so the run stopped "
                        "(eval.max_consecutive_failures; `evalgate resume` goes on from here)"
                    )
        self.check()

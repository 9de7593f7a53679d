"""Wait until an OpenAI-compatible server is ready: ``/health``, then ``/v1/models``.

vLLM answers ``/health`` as soon as its engine is up, but a cold server (weights downloading, CUDA
graphs compiling, a Modal container starting) refuses connections or answers 503 for minutes
first. ``/health`` says nothing about the API key or the served name, so readiness also needs
``/v1/models`` to list the model we will ask for. Plain ``urllib``: this runs before any event
loop, and a poll every few seconds needs no connection pool.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["NotReady", "Ready", "wait_until_ready"]


class NotReady(Exception):
    """The server did not become ready; the message says why (one line)."""


@dataclass(frozen=True)
class Ready:
    health_polls: int  # /health requests made, the successful one included
    models: tuple[str, ...]  # ids listed by /v1/models
    elapsed_s: float


def _get(url: str, *, api_key: str | None, timeout_s: float) -> tuple[int, bytes]:
    """Status and body; a connection failure is status 0."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read() if exc.fp is not None else b""
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return 0, b""


def wait_until_ready(
    root_url: str,
    *,
    served_model: str,
    api_key: str | None,
    timeout_s: float,
    poll_timeout_s: float = 2.0,
    interval_s: float = 0.5,
    max_interval_s: float = 5.0,
    check_alive: Callable[[], str | None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Ready:
    """Poll ``{root_url}/health`` until 200, then ``{root_url}/v1/models`` until it lists
    ``served_model``. ``check_alive`` returns a reason when the server is gone for good (a local
    process that exited), which ends the wait at once instead of at the deadline.
    """
    root = root_url.rstrip("/")
    start = clock()
    deadline = start + timeout_s
    polls = 0
    wait = interval_s
    last = "no answer yet"
    phase = "health"
    while True:
        if check_alive is not None:
            gone = check_alive()
            if gone:
                raise NotReady(gone)
        if phase == "health":
            polls += 1
            status, _ = _get(f"{root}/health", api_key=None, timeout_s=poll_timeout_s)
            if status == 200:
                phase = "models"
                continue
            last = f"/health answered {status}" if status else "/health: connection failed"
        else:
            status, body = _get(f"{root}/v1/models", api_key=api_key, timeout_s=poll_timeout_s)
            if status in (401, 403):
                raise NotReady(f"/v1/models answered {status}: the server rejected the API key")
            if status == 200:
                ids = _model_ids(body)
                if served_model in ids:
                    return Ready(health_polls=polls, models=ids, elapsed_s=clock() - start)
                raise NotReady(
                    f"the server lists {', '.join(ids) or 'no models'}, not {served_model!r}"
                )
            last = f"/v1/models answered {status}" if status else "/v1/models: connection failed"
        now = clock()
        if now >= deadline:
            raise NotReady(f"not ready within {timeout_s:.0f} s (last: {last})")
        sleep(min(wait, max(0.0, deadline - now)))
        # Back off gently: a cold start takes minutes, and each poll of a Modal endpoint is a
        # request that queues behind the container start.
        wait = min(max_interval_s, wait * 1.5)


def _model_ids(body: bytes) -> tuple[str, ...]:
    try:
        data = json.loads(body)
        return tuple(str(m["id"]) for m in data.get("data", []) if isinstance(m, dict))
    except (ValueError, TypeError, KeyError, AttributeError):
        return ()

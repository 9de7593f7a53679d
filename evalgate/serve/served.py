"""Which model answered: a router (LiteLLM's fallbacks) may serve a request with a model other
than the one configured, and says so in the response's ``model`` (and LiteLLM in its
``x-litellm-attempted-fallbacks`` header). The client notes each such reply here; the engine
collects the notes per rollout (a context variable: rollouts run concurrently in one loop), so a
record, its price and the comparison can name the model that really answered.

A fallback's reply is priced at what the proxy says it cost (``x-litellm-response-cost``:
:func:`response_cost`), the fallback's own price, custom prices included; read only for a reply
already known to be a fallback's. (LiteLLM's other kind of fallback, ``fallbacks`` in a
deployment's ``litellm_params``, says nothing of it in the reply, not even in
``x-litellm-model-api-base``, which names the primary: evalgate's own proxy turns the model's
``params.fallbacks`` into router fallbacks, :func:`evalgate.serve.litellm.proxy_config`.)"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from contextvars import ContextVar

__all__ = [
    "COUNT_END",
    "FALLBACK_HEADER",
    "collect",
    "fell_back",
    "note",
    "open_notes",
    "other_model",
    "response_cost",
    "token_count",
]

# A reply's token counts are kept as 64-bit integers (the journal's columns, run._columns.LIMIT,
# a later stage that this one cannot import; the cache).
COUNT_END = 2**63


def token_count(usage: Mapping[str, object], key: str) -> int:
    """``usage[key]`` as a count of tokens (absent: 0). ValueError for what no server can mean
    (negative, past 64 bits, not a number): a reply's word never lowers a budget's count or
    writes a journal line that cannot be read back."""
    value = usage.get(key) or 0
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"usage.{key} is not a number")
    count = int(value)  # ValueError for text, OverflowError for infinity
    if not 0 <= count < COUNT_END:
        raise ValueError(f"usage.{key} = {count} is not a token count")
    return count


# LiteLLM's count of the fallbacks it tried for a reply (fell_back).
FALLBACK_HEADER = "x-litellm-attempted-fallbacks"

_NOTES: ContextVar[dict[str, dict[str, float]] | None] = ContextVar("evalgate_served", default=None)


def fell_back(headers: Mapping[str, str] | None) -> bool:
    """LiteLLM's own word that a fallback answered (``x-litellm-attempted-fallbacks`` > 0)."""
    if headers is None:
        return False
    try:
        return int(headers.get(FALLBACK_HEADER) or 0) > 0
    except (TypeError, ValueError):
        return False


def other_model(
    requested: str, responded: object, headers: Mapping[str, str] | None, *, router: bool = True
) -> str | None:
    """The responding model when it is not the requested one, else None. A dated variant of the
    requested name (``gpt-4o`` → ``gpt-4o-2024-08-06``) is the same model; LiteLLM's fallback
    header counts even where the names look alike. Only a ``router`` (or that header) answers
    with another model: elsewhere the reply's name is the deployment's own."""
    if not isinstance(responded, str) or not responded:
        return None
    if fell_back(headers):
        return responded
    if not router or responded == requested or responded.startswith(requested + "-"):
        return None
    return responded


def response_cost(headers: Mapping[str, str] | None) -> float | None:
    """The proxy's own price of this reply in US dollars (``x-litellm-response-cost``)."""
    if headers is None:
        return None
    try:
        cost = float(headers.get("x-litellm-response-cost") or "nan")
    except (TypeError, ValueError):
        return None
    return cost if cost >= 0.0 else None  # NaN (absent) compares False too


def note(model: str, usage: Mapping[str, int], cost: float | None = None) -> None:
    """Counts one reply's tokens against ``model`` for the rollout being run (if one is), and
    the price the server put on it (``cost``, when it said: ``cost_usd`` over ``priced``
    replies)."""
    notes = _NOTES.get()
    if notes is None:
        return
    seen = notes.setdefault(model, {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0})
    seen["requests"] += 1
    for key in ("prompt_tokens", "completion_tokens"):
        with contextlib.suppress(ValueError, OverflowError):  # a count no server can mean: none
            seen[key] += token_count(usage, key)
    if cost is not None:
        seen["priced"] = seen.get("priced", 0) + 1
        seen["cost_usd"] = seen.get("cost_usd", 0.0) + cost


def open_notes() -> dict[str, dict[str, float]]:
    """A new, empty notes dict for the calling task's context, returned: what :func:`note`
    counts in this task (and in tasks it starts) from now until the next call.

    The engine's worker is one task that runs rollouts one after another: it opens its notes
    once, and again only after a rollout that some other model served, whose record keeps the
    dict. A rollout's notes are then what :func:`collect` would have gathered around it, without
    setting and resetting the context variable twice a rollout (asyncio gives each task its own
    copy of the context, so workers never see each other's notes)."""
    notes: dict[str, dict[str, float]] = {}
    _NOTES.set(notes)
    return notes


class collect:  # lower case: used as a function, ``with served.collect() as notes``
    """The replies another model served during this block: {model: requests and tokens}.

    A class, not a ``@contextmanager`` generator: it is entered once per rollout, and the
    generator machinery cost more than the rest of the rollout's bookkeeping."""

    __slots__ = ("_token", "notes")

    def __enter__(self) -> dict[str, dict[str, float]]:
        self.notes: dict[str, dict[str, float]] = {}
        self._token = _NOTES.set(self.notes)
        return self.notes

    def __exit__(self, *exc: object) -> None:
        _NOTES.reset(self._token)

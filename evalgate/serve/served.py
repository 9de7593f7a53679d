"""Which model answered: a router (LiteLLM's fallbacks) may serve a request with a model other
than the one configured, and says so in the response's ``model`` (and LiteLLM in its
``x-litellm-attempted-fallbacks`` header). The client notes each such reply here; the engine
collects the notes per rollout (a context variable: rollouts run concurrently in one loop), so a
record, its price and the comparison can name the model that really answered."""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

__all__ = ["collect", "fell_back", "note", "other_model"]

_NOTES: ContextVar[dict[str, dict[str, int]] | None] = ContextVar("evalgate_served", default=None)


def fell_back(headers: Mapping[str, str] | None) -> bool:
    """LiteLLM's own word that a fallback answered (``x-litellm-attempted-fallbacks`` > 0)."""
    if headers is None:
        return False
    try:
        return int(headers.get("x-litellm-attempted-fallbacks") or 0) > 0
    except (TypeError, ValueError):
        return False


def other_model(
    requested: str, responded: Any, headers: Mapping[str, str] | None, *, router: bool = True
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


def note(model: str, usage: Mapping[str, int]) -> None:
    """Counts one reply's tokens against ``model`` for the rollout being run (if one is)."""
    notes = _NOTES.get()
    if notes is None:
        return
    seen = notes.setdefault(model, {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0})
    seen["requests"] += 1
    seen["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
    seen["completion_tokens"] += int(usage.get("completion_tokens") or 0)


class collect:  # lower case: used as a function, ``with served.collect() as notes``
    """The replies another model served during this block: {model: requests and tokens}.

    A class, not a ``@contextmanager`` generator: it is entered once per rollout, and the
    generator machinery cost more than the rest of the rollout's bookkeeping."""

    __slots__ = ("_token", "notes")

    def __enter__(self) -> dict[str, dict[str, int]]:
        self.notes: dict[str, dict[str, int]] = {}
        self._token = _NOTES.set(self.notes)
        return self.notes

    def __exit__(self, *exc: object) -> None:
        _NOTES.reset(self._token)

"""The model-server interface: start something that speaks the OpenAI API, yield its endpoint.

Every backend (embedded llama.cpp, an existing endpoint, later LiteLLM, vLLM, Modal) is a context
manager yielding an :class:`Endpoint`; the pipeline never knows which one it got.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, Protocol, TypedDict

if TYPE_CHECKING:
    from evalgate.serve.chat_template import ChatTemplate

__all__ = ["Endpoint", "ModelServer", "ServeContext", "ServeOptions"]


# eq=False: never compared (an identity, not a value); the generated methods would be
# compiled from source at every start-up (dataclasses exec each one: issue #36).
@dataclass(frozen=True, eq=False)
class Endpoint:
    """Where to send chat requests."""

    base_url: str  # up to and including /v1
    model: str  # the id sent in the request's "model" field
    api_key: str | None = field(default=None, repr=False)
    model_id: str = ""  # the underlying model (HF id), for output paths and fingerprints
    # Seconds after which the server answers a still-running request with a redirect to its
    # result (Modal: 150); the client's per-hop timeout stays above it. None: no such limit.
    redirect_after_s: float | None = None
    # Liveness of a server evalgate started: None while it runs, else why it is gone (its exit
    # code, its log). The client asks it when a request gets no answer (serve.breaker).
    alive: Callable[[], str | None] | None = field(default=None, repr=False, compare=False)
    # A router (LiteLLM) may answer with another model (a fallback): a reply naming another
    # model is that model's. Elsewhere the name a reply gives is the deployment's own (vLLM
    # started on a path, llama.cpp, Azure): the configured model answered.
    router: bool = False


# eq=False: never compared (an identity, not a value); the generated methods would be
# compiled from source at every start-up (dataclasses exec each one: issue #36).
@dataclass(frozen=True, eq=False)
class ServeContext:
    """What a run gives every model server, whichever backend: where its logs go, the
    environment (keys by reference), and what chat-template resolution looks at."""

    log_dir: Path
    environ: dict[str, str] = field(repr=False)
    config_dir: Path | None = None  # evals.yaml's folder: relative chat_template files
    benchmarks: tuple[str, ...] = ()  # benchmark names: a benchmark's template fallback


class ServeOptions(TypedDict):
    """Every backend constructor's keyword arguments after the model (``**ctx:
    Unpack[ServeOptions]``): the fields of :class:`ServeContext`, which :func:`open_server`
    passes to any backend alike; a backend reads those it needs."""

    log_dir: Path
    environ: dict[str, str]
    config_dir: NotRequired[Path | None]  # evals.yaml's folder; None: the working directory
    benchmarks: NotRequired[Sequence[str]]


class ModelServer(Protocol):
    """Serve one model for the duration of a ``with`` block.

    Every backend's constructor is ``(model, *, log_dir, environ, config_dir=None,
    benchmarks=())`` — the fields of :class:`ServeContext` — so :func:`open_server` builds any
    of them the same way.
    """

    """Serve one model for the duration of a ``with`` block."""

    def __enter__(self) -> Endpoint:
        """Start (or connect), wait until healthy, return the endpoint. InfraError on failure."""
        ...

    def __exit__(self, *exc: object) -> None:
        """Stop whatever was started, always (errors and Ctrl-C included)."""
        ...

    log_path: Path | None  # the server's own log, when it has one
    # The chat template the server was started with, when evalgate resolved one (vLLM
    # backends); None when the server applies its own (llama.cpp, an API, LiteLLM).
    chat_template: ChatTemplate | None

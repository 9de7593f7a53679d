"""Backend name → server class, imported only when used (a missing extra names its install)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from evalgate._lazy import load_entry
from evalgate.errors import ConfigError
from evalgate.serve.base import ModelServer

__all__ = ["BACKENDS", "open_server"]

BACKENDS: dict[str, str] = {
    "local": "evalgate.serve.llama_cpp:LlamaCppServer",
    "openai": "evalgate.serve.openai_compat:OpenAICompatServer",
    "litellm": "evalgate.serve.litellm:LiteLLMServer",
    "vllm": "evalgate.serve.vllm_local:VLLMServer",
    "modal-vllm": "evalgate.serve.modal_vllm:ModalVLLMServer",
}


def open_server(
    model: Any, *, log_dir: Path, environ: dict[str, str], **context: Any
) -> ModelServer:
    """The (not yet started) server for a model config.

    ``context`` carries what only some backends use (``config_dir``, ``benchmarks`` for chat
    template resolution); each backend gets the keywords its constructor accepts.
    """
    target = BACKENDS.get(model.backend)
    if target is None:
        raise ConfigError(f"unknown model backend {model.backend!r}; known: {', '.join(BACKENDS)}")
    cls = load_entry(
        target, what=f"model {model.name!r}: backend {model.backend!r}", error=ConfigError
    )
    accepted = inspect.signature(cls).parameters
    extra = {k: v for k, v in context.items() if k in accepted}
    return cls(model, log_dir=log_dir, environ=environ, **extra)

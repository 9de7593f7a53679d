"""Backend name → server class, imported only when used (a missing extra names its install)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from evalgate.errors import ConfigError
from evalgate.serve.base import ModelServer

__all__ = ["BACKENDS", "open_server"]

BACKENDS: dict[str, str] = {
    "local": "evalgate.serve.llama_cpp:LlamaCppServer",
    "openai": "evalgate.serve.openai_compat:OpenAICompatServer",
}


def open_server(model: Any, *, log_dir: Path, environ: dict[str, str]) -> ModelServer:
    """The (not yet started) server for a model config."""
    target = BACKENDS.get(model.backend)
    if target is None:
        raise ConfigError(f"unknown model backend {model.backend!r}; known: {', '.join(BACKENDS)}")
    module_name, _, cls_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    return cls(model, log_dir=log_dir, environ=environ)

"""Backend name → server class, imported only when used (a missing extra names its install)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

from evalgate._lazy import load_entry
from evalgate.errors import ConfigError
from evalgate.serve.base import ModelServer, ServeContext

if TYPE_CHECKING:
    from evalgate.config.spec import Model

__all__ = ["BACKENDS", "ServerFactory", "open_server"]

# What opens a model's server: open_server, or a test's stand-in with the same signature.
ServerFactory: TypeAlias = "Callable[[Model, ServeContext], ModelServer]"

BACKENDS: dict[str, str] = {
    "local": "evalgate.serve.llama_cpp:LlamaCppServer",
    "openai": "evalgate.serve.openai_compat:OpenAICompatServer",
    "litellm": "evalgate.serve.litellm:LiteLLMServer",
    "vllm": "evalgate.serve.vllm_local:VLLMServer",
    "modal-vllm": "evalgate.serve.modal_vllm:ModalVLLMServer",
}


def open_server(model: Model, ctx: ServeContext) -> ModelServer:
    """The (not yet started) server for a model config."""
    target = BACKENDS.get(model.backend)
    if target is None:
        raise ConfigError(f"unknown model backend {model.backend!r}; known: {', '.join(BACKENDS)}")
    cls = load_entry(
        target, what=f"model {model.name!r}: backend {model.backend!r}", error=ConfigError
    )
    return cls(
        model,
        log_dir=ctx.log_dir,
        environ=ctx.environ,
        config_dir=ctx.config_dir,
        benchmarks=ctx.benchmarks,
    )

"""An OpenAI-compatible endpoint that already runs: nothing to start, a key to look up."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalgate.errors import ConfigError
from evalgate.serve.base import Endpoint

__all__ = ["OpenAICompatServer"]


class OpenAICompatServer:
    chat_template = None  # the server applies its own (ModelServer.chat_template)
    log_path: Path | None = None

    def __init__(
        self,
        model: Any,
        *,
        log_dir: Path,
        environ: dict[str, str],
        config_dir: Path | None = None,  # the ServeContext fields every backend accepts
        benchmarks: Sequence[str] = (),
    ) -> None:
        self.model = model
        self.environ = environ

    def __enter__(self) -> Endpoint:
        key = None
        if self.model.api_key_env:
            key = self.environ.get(self.model.api_key_env)
            if not key:
                raise ConfigError(
                    f"model {self.model.name!r}: no API key found; set the environment variable "
                    f"{self.model.api_key_env} (named by api_key_env)"
                )
        return Endpoint(
            base_url=self.model.base_url.rstrip("/"),
            model=self.model.model_id,
            api_key=key,
            model_id=self.model.model_id,
        )

    def __exit__(self, *exc: object) -> None:
        return None

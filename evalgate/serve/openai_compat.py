"""An OpenAI-compatible endpoint that already runs: nothing to start, a key to look up."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from evalgate.errors import ConfigError, InfraError
from evalgate.serve.base import Endpoint
from evalgate.serve.keys import api_key_from_env

if TYPE_CHECKING:
    from typing import Unpack

    from evalgate.config.spec import OpenAIModel
    from evalgate.serve.base import ServeOptions

__all__ = ["OpenAICompatServer"]


class OpenAICompatServer:
    chat_template = None  # the server applies its own (ModelServer.chat_template)
    log_path: Path | None = None

    def __init__(self, model: OpenAIModel, **ctx: Unpack[ServeOptions]) -> None:
        self.model = model
        self.environ = ctx["environ"]

    def __enter__(self) -> Endpoint:
        key = None
        if self.model.api_key_env:
            key = api_key_from_env(self.environ, self.model.api_key_env, model=self.model.name)
            if not key:
                raise ConfigError(
                    f"model {self.model.name!r}: no API key found; set the environment variable "
                    f"{self.model.api_key_env} (named by api_key_env)"
                )
        self._probe()
        return Endpoint(
            base_url=self.model.base_url.rstrip("/"),
            model=self.model.model_id,
            api_key=key,
            model_id=self.model.model_id,
        )

    def _probe(self) -> None:
        """One TCP connect before any request: a wrong URL or a stopped server is named at once,
        not after every rollout has spent its retries on it."""
        url = self.model.base_url
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        host = parts.hostname or ""
        # An ASCII host goes to the resolver as the bytes its `idna` encoding would be: as text,
        # the socket module encodes it with that codec, whose import (Unicode tables) is ~1 ms
        # of every run's start, and the client never loads it for an IP address. (The stubs
        # type the host as text; the socket module takes bytes, as getaddrinfo does.)
        address = host.encode("ascii") if host.isascii() else host
        try:
            with socket.create_connection((address, port), timeout=10):  # type: ignore[arg-type]
                pass
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            raise InfraError(
                f"model {self.model.name!r}: cannot reach {url} ({reason}); is the server "
                "running, and is base_url right?"
            ) from exc

    def __exit__(self, *exc: object) -> None:
        return None

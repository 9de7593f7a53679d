"""Model servers, by backend name, imported lazily."""

from __future__ import annotations

from evalgate.serve.base import Endpoint, ModelServer, ServeContext
from evalgate.serve.registry import open_server

__all__ = ["Endpoint", "ModelServer", "ServeContext", "open_server"]

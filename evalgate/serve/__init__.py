"""Model servers, by backend name, imported lazily."""

from __future__ import annotations

from evalgate.serve.base import Endpoint, ModelServer
from evalgate.serve.registry import open_server

__all__ = ["Endpoint", "ModelServer", "open_server"]

"""aiohttp, imported without loading the system's CA bundle until a connection needs it (#36).

``import aiohttp`` builds two default TLS contexts at import (``aiohttp.connector``'s verified and
unverified ones), each loading the system's CA bundle: ~45 ms of CPU, 14% of a run's start-up
and 7% of a 2,000-item run at 0 ms latency, paid by every run whether or not it ever opens a TLS
connection. A run against the embedded model, `vllm serve`, a LiteLLM proxy on loopback or any
other ``http://`` endpoint never does. Imported through this module, aiohttp builds the same two
contexts with the same settings, but their ``set_default_verify_paths()`` (the CA load, the one
costly call) is held back and made the first time either context can be used:

- :func:`load_ca_bundle`, which :class:`~evalgate.serve.client.ChatClient` calls before it opens
  a session for an ``https://`` endpoint (so the load happens before its first request, not on
  the event loop while other requests wait);
- otherwise, the first time aiohttp picks a TLS context for a connection
  (``TCPConnector._get_ssl_context``: an ``http://`` endpoint that redirects to ``https://``,
  a proxy, any other session in the process), before it returns one.

So a context is never used without its CA bundle: nothing is ever verified against an empty
trust store (which would only fail closed, but would fail). Only the two calls aiohttp makes
from ``aiohttp.connector._make_ssl_context`` are held back (a frame check: any other caller, on
any thread, loads at once), and only while this module imports aiohttp. Where the installed
aiohttp does not build them that way, or has no ``TCPConnector._get_ssl_context`` to load them
from, nothing is held back, or what was held back is loaded at once: the import is then what it
always was (tests/test_tls.py checks the installed release is the first case).
"""

from __future__ import annotations

import ssl
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["aiohttp", "held_back", "load_ca_bundle"]

_LOAD: Callable[[ssl.SSLContext], None] = ssl.SSLContext.set_default_verify_paths
_pending: list[ssl.SSLContext] = []
_lock = threading.Lock()
_importing = threading.local()


def _from_aiohttp(frame: FrameType | None) -> bool:
    """Whether this call comes from aiohttp.connector's ``_make_ssl_context``, through nothing
    but the ssl module (``create_default_context`` → ``load_default_certs``)."""
    for _ in range(4):
        if frame is None:
            return False
        module = frame.f_globals.get("__name__")
        if module == "aiohttp.connector":
            return frame.f_code.co_name == "_make_ssl_context"
        if module != "ssl":
            return False
        frame = frame.f_back
    return False


def _set_default_verify_paths(context: ssl.SSLContext) -> None:
    # In place of SSLContext.set_default_verify_paths while aiohttp is imported here.
    if getattr(_importing, "active", False) and _from_aiohttp(sys._getframe(1)):
        with _lock:
            _pending.append(context)
        return
    _LOAD(context)


def held_back() -> int:
    """How many default contexts still wait for their CA bundle (tests, diagnostics)."""
    return len(_pending)


def load_ca_bundle() -> None:
    """Load the CA bundle into aiohttp's default contexts, if held back (idempotent, any
    thread): after this, they are exactly what aiohttp's own import makes."""
    if not _pending:
        return
    with _lock:
        while _pending:
            _LOAD(_pending.pop())


def _hold_back() -> bool:
    """Start holding back aiohttp's CA loads; False: aiohttp is imported already (its contexts
    were loaded then)."""
    if "aiohttp.connector" in sys.modules:
        return False
    # SSLContext is ssl's Python subclass of _ssl._SSLContext: the method is set on it for the
    # import's length and deleted after, so the C method shows through again.
    ssl.SSLContext.set_default_verify_paths = _set_default_verify_paths  # type: ignore[method-assign, assignment]
    _importing.active = True
    return True


def _stop_holding_back() -> None:
    _importing.active = False
    del ssl.SSLContext.set_default_verify_paths


def _load_on_first_use(connector: Any) -> None:
    """After the import: load what was held back on the first TLS context aiohttp picks, or at
    once where this aiohttp did not make exactly its two contexts as expected."""
    hook = getattr(connector.TCPConnector, "_get_ssl_context", None)
    made = [getattr(connector, name, None) for name in _CONTEXTS]
    if hook is None or sorted(map(id, _pending)) != sorted(map(id, made)):
        load_ca_bundle()
        return

    def _get_ssl_context(self: Any, req: Any) -> ssl.SSLContext | None:
        context: ssl.SSLContext | None = hook(self, req)
        if context is not None and _pending:
            load_ca_bundle()
        return context

    connector.TCPConnector._get_ssl_context = _get_ssl_context


# The module-level contexts aiohttp.connector builds at import, by name.
_CONTEXTS = ("_SSL_CONTEXT_VERIFIED", "_SSL_CONTEXT_UNVERIFIED")

if _hold_back():
    try:
        import aiohttp
        import aiohttp.connector
    finally:
        _stop_holding_back()
    _load_on_first_use(aiohttp.connector)
else:
    import aiohttp

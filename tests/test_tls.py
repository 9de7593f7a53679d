"""aiohttp imported through evalgate._tls: its default TLS contexts get their CA bundle on first
use, not at import (#36), and are never used without it.

Each case runs in a fresh interpreter (the deferral is an import's), with the trust store pinned
to a test CA (``SSL_CERT_FILE``; ``SSL_CERT_DIR`` an empty folder), so what a context holds is
known: one CA once loaded, nothing before.
"""

from __future__ import annotations

import http.server
import json
import os
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests.conftest import ROOT

# What the child prints about aiohttp's two default contexts: how many CAs each holds.
_STORES = """
def stores():
    import aiohttp.connector as c
    return [
        c._SSL_CONTEXT_VERIFIED.cert_store_stats()["x509_ca"],
        c._SSL_CONTEXT_UNVERIFIED.cert_store_stats()["x509_ca"],
    ]
"""


def _child(script: str, tmp_path: Path, ca: Path, *path: Path) -> Any:
    empty = tmp_path / "no-cert-dir"
    empty.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(p) for p in (*path, ROOT)),
        "SSL_CERT_FILE": str(ca),
        "SSL_CERT_DIR": str(empty),
    }
    proc = subprocess.run(
        [sys.executable, "-c", _STORES + script],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> Path:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return path


@pytest.fixture
def https_url(ca: trustme.CA) -> Iterator[str]:
    """An HTTPS server on loopback whose certificate the test CA issued (for 127.0.0.1)."""

    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_importing_aiohttp_loads_no_ca_bundle(tmp_path: Path, ca_file: Path) -> None:
    """The installed aiohttp builds its two contexts at import; through evalgate._tls neither
    loads the bundle then, and ssl itself is left as it was (another context loads at once)."""
    got = _child(
        """
import json, ssl
from evalgate._tls import held_back
held, before = held_back(), stores()
own = "set_default_verify_paths" in vars(ssl.SSLContext)
other = ssl.create_default_context().cert_store_stats()["x509_ca"]
print(json.dumps([held, before, own, other]))
""",
        tmp_path,
        ca_file,
    )
    assert got == [2, [0, 0], False, 1]


def test_a_tls_connection_loads_the_bundle_first_and_verifies(
    tmp_path: Path, ca_file: Path, https_url: str, ca: trustme.CA
) -> None:
    """aiohttp's own session, with no context of its own, picks a held-back context: the bundle
    is loaded before the handshake, the server's certificate is verified against it (and,
    with a bundle that lacks the server's CA, refused: nothing connects unverified)."""
    script = """
import asyncio, json, sys
from evalgate._tls import aiohttp, held_back
async def get():
    async with aiohttp.ClientSession() as session:
        try:
            async with session.get(sys.argv[1]) as reply:
                return reply.status
        except aiohttp.ClientConnectorCertificateError:
            return "refused"
status = asyncio.run(get())
print(json.dumps([status, held_back(), stores()]))
"""
    script = script.replace("sys.argv[1]", repr(https_url))
    assert _child(script, tmp_path, ca_file) == [200, 0, [1, 1]]

    stranger = tmp_path / "stranger.pem"
    trustme.CA().cert_pem.write_to_path(str(stranger))
    assert _child(script, tmp_path, stranger) == ["refused", 0, [1, 1]]


def test_a_client_for_an_https_endpoint_loads_the_bundle_before_its_first_request(
    tmp_path: Path, ca_file: Path
) -> None:
    """Not on the event loop with the run's first requests waiting: as the client opens."""
    got = _child(
        """
import asyncio, json
from evalgate._tls import held_back
from evalgate.config.spec import Sampling
from evalgate.serve.base import Endpoint
from evalgate.serve.client import ChatClient
async def enter(url):
    async with ChatClient(Endpoint(base_url=url, model="m"), Sampling()):
        return held_back()
print(json.dumps([asyncio.run(enter("http://127.0.0.1:9/v1")),
                  asyncio.run(enter("HTTPS://127.0.0.1:9/v1")), stores()]))
""",
        tmp_path,
        ca_file,
    )
    assert got == [2, 0, [1, 1]]


# Two stand-ins for other aiohttp releases, each a package of its own on the child's path.
_UNLIKE = {
    # contexts built at import, but not by _make_ssl_context: nothing is held back
    "inline": """
import ssl
_SSL_CONTEXT_VERIFIED = ssl.create_default_context()
_SSL_CONTEXT_UNVERIFIED = ssl.create_default_context()
class TCPConnector:
    def _get_ssl_context(self, req):
        return _SSL_CONTEXT_VERIFIED
""",
    # built by _make_ssl_context, but no _get_ssl_context to load them from: loaded at once
    "no hook": """
import ssl
def _make_ssl_context(verified):
    return ssl.create_default_context()
_SSL_CONTEXT_VERIFIED = _make_ssl_context(True)
_SSL_CONTEXT_UNVERIFIED = _make_ssl_context(False)
class TCPConnector:
    pass
""",
}


@pytest.mark.parametrize("release", sorted(_UNLIKE))
def test_another_aiohttp_gets_its_contexts_loaded_at_import(
    tmp_path: Path, ca_file: Path, release: str
) -> None:
    """Where the installed aiohttp does not build its contexts as this one does, or has no
    hook to load them from, the import is what it always was: both loaded."""
    package = tmp_path / "site" / "aiohttp"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from . import connector\n", encoding="utf-8")
    (package / "connector.py").write_text(_UNLIKE[release], encoding="utf-8")
    got = _child(
        """
import json
from evalgate._tls import held_back
print(json.dumps([held_back(), stores()]))
""",
        tmp_path,
        ca_file,
        tmp_path / "site",
    )
    assert got == [0, [1, 1]]


def test_only_aiohttps_own_calls_are_held_back(tmp_path: Path, ca_file: Path) -> None:
    """While aiohttp imports, a context anything else makes (another thread, a library aiohttp
    imports) loads its bundle as always: only calls from aiohttp.connector's _make_ssl_context
    wait."""
    got = _child(
        """
import json, ssl
from evalgate import _tls
_tls._importing.active = True  # as during the import, on this thread
ssl.SSLContext.set_default_verify_paths = _tls._set_default_verify_paths
try:
    made = ssl.create_default_context().cert_store_stats()["x509_ca"]
finally:
    _tls._importing.active = False
    del ssl.SSLContext.set_default_verify_paths
print(json.dumps([made, _tls.held_back()]))
""",
        tmp_path,
        ca_file,
    )
    assert got == [1, 2]

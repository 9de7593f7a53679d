"""A least-connections TCP relay: one loopback port in front of the embedded model's replicas.

The embedded server runs one single-thread llama.cpp server per usable CPU rather than one server
with a thread per CPU (:mod:`evalgate.serve._llama_server`): llama.cpp's threads meet at a barrier
for every layer of every token, so a server whose threads share a core with another process
stalls (over 6x slower beside one busy core), while single-thread replicas have no barrier
between them and each keeps a core busy (the quickstart's 100 requests on 2 cores: 22.8 s on one
server, 12.5 s on two replicas, the same CPU time and the same completions).

Each accepted connection goes to the replica with the fewest open connections and stays with it
(HTTP keep-alive): evalgate's client holds one connection per request in flight, so its
``max_concurrent`` connections split evenly across the replicas. Bytes are relayed as they come,
never parsed: the replicas answer the health check, the API key and every error themselves.
"""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["Balancer"]

_CHUNK = 1 << 16


class Balancer:
    """Relays each connection to the least-loaded of ``backends`` ((host, port) pairs)."""

    def __init__(self, backends: list[tuple[str, int]]) -> None:
        if not backends:
            raise ValueError("a balancer needs at least one backend")
        self.backends = backends
        self.open = [0] * len(backends)  # connections open to each backend, now
        self._clients: set[asyncio.StreamWriter] = set()

    def _pick(self) -> int:
        return min(range(len(self.open)), key=self.open.__getitem__)

    async def relay(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        """One client connection, relayed both ways until both sides are done."""
        k = self._pick()
        self.open[k] += 1
        self._clients.add(client_w)
        try:
            try:
                backend_r, backend_w = await asyncio.open_connection(*self.backends[k])
            except OSError:  # the replica is gone: the client sees the connection close
                return
            try:
                await asyncio.gather(_pump(client_r, backend_w), _pump(backend_r, client_w))
            finally:
                backend_w.close()
        finally:
            self.open[k] -= 1
            self._clients.discard(client_w)
            client_w.close()

    async def serve(self, host: str, port: int, stop: asyncio.Event) -> None:
        """Listen on (host, port) until ``stop`` is set, then close every connection: a client's
        idle keep-alive connection must not hold the shutdown (``Server.wait_closed`` waits for
        them from Python 3.12 on)."""
        server = await asyncio.start_server(self.relay, host, port)
        try:
            await stop.wait()
        finally:
            server.close()
            for writer in list(self._clients):
                writer.close()


async def _pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copy ``src`` to ``dst``; at its end, half-close ``dst`` (the other way may go on)."""
    try:
        while data := await src.read(_CHUNK):
            dst.write(data)
            await dst.drain()
        if dst.can_write_eof():
            dst.write_eof()
    except (ConnectionError, OSError):  # a side reset: the other way ends with it
        with contextlib.suppress(Exception):
            dst.close()

"""The embedded model's relay (serve/_balancer.py): connections split evenly over the replicas
and bytes pass both ways untouched, against real loopback servers standing in for llama.cpp."""

from __future__ import annotations

import asyncio
import contextlib
import socket

from evalgate.serve._balancer import Balancer


class _Backend:
    """A stand-in replica: answers each line with its name and the line; counts connections."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> tuple[str, int]:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[:2]

    async def _serve(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        self.connections += 1
        while line := await r.readline():
            w.write(f"{self.name}:".encode() + line)
            await w.drain()
        w.write(b"bye\n")  # after the client's half-close: the way back still works
        await w.drain()
        w.close()


async def _relay(backends: list[tuple[str, int]]) -> tuple[Balancer, int, asyncio.Event]:
    balancer = Balancer(backends)
    stop = asyncio.Event()
    server = await asyncio.start_server(balancer.relay, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]

    async def close_on_stop() -> None:
        await stop.wait()
        server.close()

    asyncio.get_running_loop().create_task(close_on_stop())
    return balancer, port, stop


def test_connections_split_evenly_and_stay_with_their_replica() -> None:
    async def scenario() -> None:
        a, b = _Backend("a"), _Backend("b")
        balancer, port, stop = await _relay([await a.start(), await b.start()])
        conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(4)]
        seen: dict[int, list[str]] = {i: [] for i in range(4)}
        for round_ in range(3):  # keep-alive: every request on a connection reaches one replica
            for i, (r, w) in enumerate(conns):
                w.write(f"req{round_}-{i}\n".encode())
                await w.drain()
                seen[i].append((await r.readline()).decode())
        assert (a.connections, b.connections) == (2, 2)
        assert balancer.open == [2, 2]
        for i, lines in seen.items():
            name = lines[0].split(":")[0]
            assert lines == [f"{name}:req{n}-{i}\n" for n in range(3)]
        assert sorted(lines[0].split(":")[0] for lines in seen.values()) == ["a", "a", "b", "b"]
        # A client's half-close reaches the replica, whose last words still come back.
        r, w = conns[0]
        w.write_eof()
        assert await r.read() == b"bye\n"
        for _, w in conns[1:]:
            w.close()
        for _ in range(100):  # closed connections leave the counts (the next go elsewhere)
            if balancer.open == [0, 0]:
                break
            await asyncio.sleep(0.02)
        assert balancer.open == [0, 0]
        stop.set()

    asyncio.run(scenario())


def test_a_replica_that_is_gone_closes_the_connection() -> None:
    async def scenario() -> None:
        probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        gone = probe.sockets[0].getsockname()[:2]
        probe.close()
        await probe.wait_closed()
        balancer, port, stop = await _relay([gone])
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"hello\n")
        with contextlib.suppress(ConnectionError):
            assert await asyncio.wait_for(r.read(), 30) == b""  # closed, not left hanging
        assert balancer.open == [0]
        w.close()
        stop.set()

    asyncio.run(scenario())


def test_stopping_closes_the_connections_a_client_keeps_open() -> None:
    """A client's idle keep-alive connection does not hold the relay's shutdown."""

    async def scenario() -> None:
        backend = _Backend("a")
        balancer = Balancer([await backend.start()])
        with socket.socket() as probe:  # a free port for serve() to bind
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        stop = asyncio.Event()
        serving = asyncio.create_task(balancer.serve("127.0.0.1", port, stop))
        for _ in range(500):
            try:
                r, w = await asyncio.open_connection("127.0.0.1", port)
                break
            except OSError:
                await asyncio.sleep(0.01)
        w.write(b"ping\n")
        assert await r.readline() == b"a:ping\n"  # relayed, and the connection stays open
        stop.set()
        await asyncio.wait_for(serving, 30)
        assert await asyncio.wait_for(r.read(), 30) == b""  # closed by the relay
        w.close()

    asyncio.run(scenario())

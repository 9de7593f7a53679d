"""A chat-completions server that misbehaves on purpose, byte by byte, over real HTTP.

aiohttp.web can't lie about Content-Length or reset a socket mid-request, so this is a minimal
HTTP/1.1 keep-alive server on raw asyncio streams, in a background thread. Each request is keyed
by (prompt, seed) — one (item, rollout) pair — and ``script(key, attempt, n)`` picks what to do
with it: answer, or one of the faults below; an async script can hold a request as long as it
likes. The server logs what it actually did per key, which is the ground truth the tests hold
every rollout to (:func:`expected_outcome`).

Run as a script (``python -m tests.fault_server``) to print the fault matrix: each fault, once
transient (then answered) and once persistent, and how evalgate ended up recording the rollout.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import socket
import struct
import threading
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from evalgate.serve.client import PROBE_MESSAGE

__all__ = [
    "FAULTS",
    "Answer",
    "Fault",
    "FaultServer",
    "expected_outcome",
]


@dataclass(frozen=True)
class Answer:
    """A well-formed completion with this text."""

    text: str


@dataclass(frozen=True)
class Fault:
    """One way to fail a request. ``kind``: the error kind evalgate must record for it."""

    name: str
    kind: str
    retryable: bool = True
    status: int = 0  # for HTTP-status faults
    retry_after: str | None = None


# Every fault the server can inject, by name.
FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        Fault("429 + Retry-After", "http_429", status=429, retry_after="0"),
        Fault("500", "http_500", status=500),
        Fault("503", "http_503", status=503),
        Fault("400 (not retryable)", "http_400", retryable=False, status=400),
        Fault("malformed JSON", "bad_response"),
        Fault("200, not a completion", "bad_response"),
        # Token counts no server can mean: the budget and the journal never take them.
        Fault("negative token count", "bad_response"),
        Fault("token count past 64 bits", "bad_response"),
        Fault("Content-Length lies", "truncated"),
        Fault("chunked body cut", "truncated"),
        Fault("closed mid-body", "truncated"),
        Fault("hang past timeout", "timeout"),
        Fault("connection reset", "connection"),
        Fault("closed before reply", "connection"),
    )
}

Key = tuple[str, Any]  # (last user message, seed)
Action = Answer | Fault


def expected_outcome(actions: list[Action], max_retries: int) -> tuple[str, str]:
    """What evalgate must record, given what the server did to one request's attempts.

    ``("ok", text)``: scored on ``text``; ``("error", kind)``: counted as an error of ``kind``.
    """
    assert actions, "the server never saw this request"
    last = actions[-1]
    if isinstance(last, Answer):
        assert all(isinstance(a, Fault) and a.retryable for a in actions[:-1])
        return "ok", last.text
    assert isinstance(last, Fault)
    assert not last.retryable or len(actions) == max_retries + 1, actions
    return "error", last.kind


def _completion(text: str, prompt_tokens: int = 5) -> bytes:
    return json.dumps(
        {
            "id": "cmpl-fault",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1, "total_tokens": 6},
        }
    ).encode()


def _head(status: int, length: int | None, extra: str = "") -> bytes:
    reason = {200: "OK", 400: "Bad Request", 429: "Too Many Requests"}.get(status, "Error")
    size = f"Content-Length: {length}\r\n" if length is not None else ""
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n{size}{extra}\r\n"
    ).encode()


@dataclass
class FaultServer:
    """Start with :meth:`start`, stop with :meth:`stop` (or use as a context manager)."""

    script: Callable[[Key, int, int], Action | Awaitable[Action]]
    log: dict[Key, list[Action]] = field(default_factory=lambda: defaultdict(list))
    requests: int = 0
    probes: int = 0  # the breaker's health probes: answered at once, kept out of the log
    answer_probes: bool = True  # False: probes go to the script like any request (a hung server)
    in_flight: int = 0
    max_in_flight: int = 0
    base_url: str = ""

    def start(self) -> FaultServer:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._writers: set[asyncio.StreamWriter] = set()

        async def boot() -> int:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            return self._server.sockets[0].getsockname()[1]

        port = asyncio.run_coroutine_threadsafe(boot(), self._loop).result(10)
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    def stop(self) -> None:
        async def shutdown() -> None:
            self._server.close()
            for writer in list(self._writers):
                writer.close()
            # Requests a script still holds end here, not as "task destroyed" noise at exit.
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def pause(self, seconds: float) -> None:
        """A restart, from inside a script: stop listening and drop every connection, then
        listen again on the same port after ``seconds`` (connections are refused meanwhile)."""

        async def restart() -> None:
            port = self._server.sockets[0].getsockname()[1]
            self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            await self._server.wait_closed()
            await asyncio.sleep(seconds)
            self._server = await asyncio.start_server(
                self._serve, "127.0.0.1", port, reuse_address=True
            )

        self._restart = self._loop.create_task(restart())

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return  # the client closed the connection
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = json.loads(await reader.readexactly(length)) if length else {}
                if not await self._respond(body, reader, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._writers.discard(writer)
            if not writer.is_closing():
                writer.close()

    async def _respond(
        self, body: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Answer one request; False when the connection is finished."""
        key = (body["messages"][-1]["content"], body.get("seed"))
        if key[0] == PROBE_MESSAGE and self.answer_probes:  # the breaker asking: is it there?
            self.probes += 1
            return await self._act(Answer("OK"), reader, writer)
        attempt = len(self.log[key])
        n = self.requests
        self.requests += 1
        action = self.script(key, attempt, n)
        if inspect.isawaitable(action):  # a script may take its time (or never answer)
            action = await action
        self.log[key].append(action)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._act(action, reader, writer)
        finally:
            self.in_flight -= 1

    async def _act(
        self, action: Action, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        if isinstance(action, Answer):
            payload = _completion(action.text)
            writer.write(_head(200, len(payload)) + payload)
            await writer.drain()
            return True
        name = action.name
        if action.status:
            payload = json.dumps({"error": {"message": name}}).encode()
            extra = f"Retry-After: {action.retry_after}\r\n" if action.retry_after else ""
            writer.write(_head(action.status, len(payload), extra) + payload)
            await writer.drain()
            return True
        if name in ("malformed JSON", "200, not a completion"):  # whole responses: keep-alive
            payload = b'{"choices": [{"message": {"content": "4' if name[0] == "m" else b'{"a": 4}'
            writer.write(_head(200, len(payload)) + payload)
            await writer.drain()
            return True
        if name in ("negative token count", "token count past 64 bits"):
            payload = _completion("4", -5 if name[0] == "n" else 2**70)
            writer.write(_head(200, len(payload)) + payload)
            await writer.drain()
            return True
        if name == "Content-Length lies":  # promises more than it sends, then closes
            payload = _completion("4")
            writer.write(_head(200, len(payload) + 64) + payload)
        elif name == "chunked body cut":  # one whole chunk, then a cut-off one, no terminator
            payload = _completion("4")
            half = len(payload) // 2
            chunks = b"%x\r\n%s\r\n%x\r\n%s" % (half, payload[:half], half, payload[half:][:8])
            writer.write(_head(200, None, "Transfer-Encoding: chunked\r\n") + chunks)
        elif name == "closed mid-body":
            payload = _completion("4")
            writer.write(_head(200, len(payload)) + payload[: len(payload) // 2])
        elif name == "hang past timeout":
            await reader.read()  # until the client gives up and closes
            return False
        elif name == "connection reset":  # RST instead of FIN: SO_LINGER with a zero timeout
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        elif name == "closed before reply":
            pass
        else:  # pragma: no cover - a typo in a test's script
            raise ValueError(f"unknown fault {name!r}")
        await writer.drain()
        writer.close()
        return False


def matrix(max_retries: int = 2, timeout_s: float = 0.5) -> list[tuple[str, str, str, str]]:
    """Run every fault once transient and once persistent; (fault, kind, transient, persistent)."""
    from tests.test_faults import run_script  # the same harness the tests use

    names = list(FAULTS)
    plans: dict[str, list[Action]] = {}
    for name in names:
        plans[f"{name}|transient"] = [FAULTS[name], Answer("ANSWER")]
        plans[f"{name}|persistent"] = [FAULTS[name]] * (max_retries + 1)
    outcome, _, _ = run_script(plans, max_retries=max_retries, timeout_s=timeout_s)
    rows = []
    for name in names:
        cells = []
        for mode in ("transient", "persistent"):
            rec = outcome[f"{name}|{mode}"]
            if rec["error"] is None:
                cells.append(f"retried-ok (scored {rec['reward']:g})")
            else:
                cells.append(f"counted-error `{rec['error'].split(':', 1)[0]}`")
        rows.append((name, FAULTS[name].kind, *cells))
    return rows


def _main() -> None:
    import sys
    from pathlib import Path

    # Run as a script, this file is __main__; the harness must see the same classes it imports.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.fault_server import matrix as shared_matrix

    print("| fault | error kind | transient (1 fault, then an answer) | persistent (3 tries) |")
    print("|---|---|---|---|")
    for row in shared_matrix(max_retries=2):
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    _main()

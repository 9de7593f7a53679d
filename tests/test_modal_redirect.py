"""Modal's 150-second limit, against the real ChatClient: a request that runs longer is answered
``303 See Other`` to a result URL (the same path plus ``__modal_function_call_id``), and a GET
there blocks until the original request's result is ready, or 303s again after another 150 s.

The ChatClient follows a 303 with a GET, without the body and with the Authorization header
(same origin): exactly what the result URL wants. Each hop gets the full timeout, so a chain
longer than ``request_timeout_s`` completes; a retry polls the result URL rather than POSTing
again, so one request starts exactly one generation; past ``max_redirects`` it fails for good.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web

from evalgate.config.spec import Sampling
from evalgate.serve.base import Endpoint
from evalgate.serve.client import PROBE_MESSAGE, ChatClient, RequestFailed


class ModalLikeServer:
    """POST → 303; each GET on the result URL → 303 again ``hops - 1`` times, then the reply."""

    def __init__(self, hops: int, delay_s: float = 0.0, hang_on_get: int = 0) -> None:
        self.hops = hops
        self.delay_s = delay_s  # each answer takes this long (a hop of Modal's 150 s, shrunk)
        self.hang_on_get = hang_on_get  # this GET (1-based) never answers: the hop times out
        self.release = asyncio.Event()
        self.log: list[tuple[str, str, str | None, int]] = []  # method, query, auth, body bytes
        self.gets = 0
        self.probes = 0  # kept out of the log: a probe is not a retry of the request

    async def post(self, request: web.Request) -> web.Response:
        body = await request.read()
        if PROBE_MESSAGE.encode() in body:  # the breaker asking whether the server is there
            self.probes += 1
            raise web.HTTPSeeOther(location="/v1/chat/completions?__modal_function_call_id=probe")
        self.log.append(
            ("POST", request.query_string, request.headers.get("Authorization"), len(body))
        )
        call = f"fc-{sum(1 for entry in self.log if entry[0] == 'POST')}"
        await asyncio.sleep(self.delay_s)
        raise web.HTTPSeeOther(location=f"/v1/chat/completions?__modal_function_call_id={call}")

    async def moved(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.log.append(("MOVED", request.query_string, None, len(body)))
        raise web.HTTPPermanentRedirect(location="/v1/chat/completions")

    async def get(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.log.append(
            ("GET", request.query_string, request.headers.get("Authorization"), len(body))
        )
        self.gets += 1
        if self.gets == self.hang_on_get:
            await self.release.wait()  # set at teardown; the client's hop timeout ends it first
        await asyncio.sleep(self.delay_s)
        if self.gets < self.hops:
            raise web.HTTPSeeOther(location=str(request.rel_url))
        return web.json_response(
            {
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "42"}}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1},
            }
        )


@pytest.fixture
def modal_like() -> Iterator[Any]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runners: list[web.AppRunner] = []

    servers: list[ModalLikeServer] = []

    def start(hops: int, **kw: Any) -> tuple[ModalLikeServer, str]:
        server = ModalLikeServer(hops, **kw)
        servers.append(server)
        app = web.Application()
        app.router.add_post("/v1/chat/completions", server.post)
        app.router.add_get("/v1/chat/completions", server.get)
        app.router.add_post("/old/v1/chat/completions", server.moved)

        async def boot() -> int:
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            runners.append(runner)
            return site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

        port = asyncio.run_coroutine_threadsafe(boot(), loop).result(10)
        return server, f"http://127.0.0.1:{port}/v1"

    yield start
    for server in servers:
        loop.call_soon_threadsafe(server.release.set)
    for runner in runners:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


async def _ask(base_url: str, max_retries: int = 0, **kw: Any) -> Any:
    endpoint = Endpoint(base_url=base_url, model="m", api_key="sekrit", model_id="org/m")
    kw.setdefault("timeout_s", 30)
    async with ChatClient(
        endpoint, Sampling(), max_retries=max_retries, backoff_base_s=0.0, **kw
    ) as client:
        reply = await client.chat([{"role": "user", "content": "6 x 7?"}])
        return reply, client.stats


def test_a_long_request_follows_the_303_chain_to_its_result(modal_like: Any) -> None:
    server, base_url = modal_like(hops=3)  # as if generation took 3 × 150 s
    reply, _ = asyncio.run(_ask(base_url))
    assert reply.text == "42"
    methods = [entry[0] for entry in server.log]
    assert methods == ["POST", "GET", "GET", "GET"]  # one generation, then polling its result
    for method, query, auth, size in server.log:
        assert auth == "Bearer sekrit"  # same origin: the key survives the redirect
        if method == "GET":
            assert query == "__modal_function_call_id=fc-1" and size == 0


def _methods(server: ModalLikeServer) -> list[str]:
    return [entry[0] for entry in server.log]


def test_a_chain_longer_than_the_request_timeout_starts_one_generation(modal_like: Any) -> None:
    """The timeout is per hop: 6 hops of 0.4 s outlast a 1.5 s timeout, yet no hop does."""
    server, base_url = modal_like(hops=6, delay_s=0.4)
    reply, stats = asyncio.run(_ask(base_url, max_retries=3, timeout_s=1.5))
    assert reply.text == "42"
    assert _methods(server) == ["POST"] + ["GET"] * 6  # exactly one generation started
    assert stats.retries == 0 and stats.redirects == 6


def test_a_hop_that_times_out_polls_the_result_again(modal_like: Any) -> None:
    server, base_url = modal_like(hops=2, hang_on_get=1)
    reply, stats = asyncio.run(_ask(base_url, max_retries=2, timeout_s=1.0))
    assert reply.text == "42"
    assert _methods(server).count("POST") == 1  # the retry did not start a second generation
    assert _methods(server) == ["POST", "GET", "GET"]  # the hung poll, then the result
    assert stats.retried == {"timeout": 1}
    assert {query for method, query, *_ in server.log if method == "GET"} == {
        "__modal_function_call_id=fc-1"
    }


def test_past_the_redirect_limit_the_request_fails_without_re_posting(modal_like: Any) -> None:
    server, base_url = modal_like(hops=100)
    with pytest.raises(RequestFailed) as failed:
        asyncio.run(_ask(base_url, max_retries=3, max_redirects=5))
    assert failed.value.kind == "redirect_limit"
    assert _methods(server) == ["POST"] + ["GET"] * 5


def test_on_modal_each_hop_outlasts_modals_150_s() -> None:
    """request_timeout_s defaults to 120 s, shorter than Modal's first hop: the hop timeout is
    raised above 150 s for an endpoint that redirects, so the chain is ever reached."""
    modal = Endpoint(base_url="http://x/v1", model="m", redirect_after_s=150.0)
    plain = Endpoint(base_url="http://x/v1", model="m")
    assert ChatClient(modal, Sampling(), timeout_s=120).hop_timeout_s > 150
    assert ChatClient(modal, Sampling(), timeout_s=600).hop_timeout_s == 600
    assert ChatClient(plain, Sampling(), timeout_s=120).hop_timeout_s == 120


def test_a_moved_request_is_posted_again_where_it_moved(modal_like: Any) -> None:
    """307/308 move the request itself (a trailing-slash or http→https rule): it is POSTed, body
    and all, to the new place. Only 301/302/303 point at a result to GET."""
    server, base_url = modal_like(hops=1)
    reply, stats = asyncio.run(_ask(base_url.replace("/v1", "/old/v1")))
    assert reply.text == "42"
    assert [(method, size > 0) for method, _, _, size in server.log] == [
        ("MOVED", True),
        ("POST", True),  # re-POSTed with its body
        ("GET", False),  # then Modal's 303: the result
    ]
    assert stats.redirects == 2

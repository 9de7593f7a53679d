"""An endpoint that is gone costs seconds or minutes, never hours: the breaker, the per-request
deadline and the liveness probe of a server evalgate owns, over real loopback sockets."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from evalgate.run.engine import run_suite
from evalgate.serve.base import Endpoint
from evalgate.serve.breaker import EndpointDown
from evalgate.serve.client import ChatClient
from evalgate.suites.base import Item
from evalgate.suites.qa import QASuite
from evalgate.suites.scorers import make_scorer
from tests.conftest import run_pipeline, write_config

SAMPLING = SimpleNamespace(temperature=0.0, top_p=1.0, max_tokens=8, seed=0)


class Silent:
    """Accepts connections and never answers; counts them (one per attempt)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(256)
        self.accepted = 0
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def silent() -> Iterator[Silent]:
    server = Silent()
    yield server
    server.close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed on exit: connections are refused


def _suite(n: int) -> QASuite:
    ids = [f"q{i}" for i in range(n)]
    return QASuite(
        name="down",
        items=[Item(id=i, prompt=i, answer="A") for i in ids],
        scorer=make_scorer(SimpleNamespace(type="exact", case_sensitive=True)),
        messages={i: [{"role": "user", "content": i}] for i in ids},
    )


def _run(endpoint: Endpoint, n: int, **client: Any) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        async with ChatClient(
            endpoint, SAMPLING, backoff_base_s=0.001, backoff_cap_s=0.01, **client
        ) as c:
            return await run_suite(
                _suite(n), c, rollouts=1, max_concurrent=client.get("max_concurrent", 4)
            )

    return asyncio.run(go())


def test_a_hung_endpoint_trips_the_breaker_after_n_attempts(silent: Silent) -> None:
    endpoint = Endpoint(base_url=silent.base_url, model="m")
    with pytest.raises(EndpointDown) as info:  # 50 items × 5 attempts without it
        _run(endpoint, 50, timeout_s=0.2, max_retries=4, max_concurrent=4,
             max_consecutive_failures=6)  # fmt: skip
    assert "6 requests in a row" in str(info.value) and "timeout" in str(info.value)
    assert silent.accepted <= 6 + 4  # the threshold, plus the attempts already in flight


def test_a_dead_endpoint_trips_the_breaker_within_seconds() -> None:
    endpoint = Endpoint(base_url=f"http://127.0.0.1:{_closed_port()}/v1", model="m")
    with pytest.raises(EndpointDown) as info:
        _run(endpoint, 200, timeout_s=5, max_retries=4, max_consecutive_failures=5)
    assert "connection" in str(info.value)


def test_a_server_evalgate_owns_that_died_ends_the_run_at_the_first_failure() -> None:
    endpoint = Endpoint(
        base_url=f"http://127.0.0.1:{_closed_port()}/v1",
        model="m",
        alive=lambda: "the embedded model server exited with code -9 (log: x.log)",
    )
    with pytest.raises(EndpointDown) as info:
        _run(endpoint, 200, timeout_s=5, max_retries=4, max_consecutive_failures=0)
    assert "died mid-run" in str(info.value) and "code -9" in str(info.value)


def test_a_request_gives_up_at_its_deadline(silent: Silent) -> None:
    endpoint = Endpoint(base_url=silent.base_url, model="m")
    (rec,) = _run(endpoint, 1, timeout_s=0.2, max_retries=50, max_concurrent=1,
                  deadline_s=0.5, max_consecutive_failures=0)  # fmt: skip
    assert rec["reward"] is None and rec["error"].startswith("timeout:")
    assert "request_deadline_s" in rec["error"]
    assert silent.accepted <= 3  # not 51 attempts


def test_a_hung_endpoint_ends_the_pipeline_as_error_naming_the_cause(
    silent: Silent, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path,
        f"models: [{{name: m, backend: openai, base_url: '{silent.base_url}', model: org/m}}]\n"
        "benchmarks: [{name: a, kind: arith, size: 40, eval: {cache: false, max_concurrent: 4,"
        " request_timeout_s: 0.2, max_consecutive_failures: 4}}]\n",
    )
    verdict = run_pipeline(config, tmp_path / "out")
    assert verdict.status == "ERROR" and int(verdict.exit_code) == 3
    assert any("in a row" in reason for reason in verdict.reasons), verdict.reasons
    assert silent.accepted <= 4 + 4


def test_one_cause_is_said_once_not_once_per_benchmark(silent: Silent, tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        f"models: [{{name: m, backend: openai, base_url: '{silent.base_url}', model: org/m}}]\n"
        "eval: {cache: false, max_concurrent: 2, request_timeout_s: 0.2,"
        " max_consecutive_failures: 2}\n"
        "benchmarks: [{name: a, kind: arith, size: 5}, {name: b, kind: arith, size: 5},"
        " {name: c, kind: arith, size: 5}]\n",
    )
    verdict = run_pipeline(config, tmp_path / "out")
    assert verdict.status == "ERROR"
    (reason,) = verdict.reasons
    assert reason.startswith("m / a, b, c / -: ") and "in a row" in reason

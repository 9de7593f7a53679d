"""An endpoint that is gone costs seconds or minutes, never hours: the breaker, the per-request
deadline and the liveness probe of a server evalgate owns, over real loopback sockets."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from evalgate.run.engine import run_suite
from evalgate.score.scorers import make_scorer
from evalgate.serve.base import Endpoint
from evalgate.serve.breaker import EndpointDown
from evalgate.serve.client import ChatClient
from evalgate.suites.base import Item
from evalgate.suites.qa import QASuite
from tests.conftest import run_pipeline, write_config
from tests.fault_server import FAULTS, Answer, FaultServer

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


def _run(
    endpoint: Endpoint, n: int, *, backoff: bool = False, **client: Any
) -> list[dict[str, Any]]:
    """``backoff``: the client's default retry backoff (else ~0, to keep the tests short)."""
    waits = {} if backoff else {"backoff_base_s": 0.001, "backoff_cap_s": 0.01}

    async def go() -> list[dict[str, Any]]:
        async with ChatClient(endpoint, SAMPLING, **waits, **client) as c:
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
    assert silent.accepted <= 6 + 4 + 2  # the threshold, the attempts in flight, the probes


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
    assert silent.accepted <= 4 + 4 + 2  # and the breaker's probes (one per wave of timeouts)


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


def test_items_that_never_answer_are_counted_errors_not_a_dead_server() -> None:
    """8 of 200 items hang (4 %, under the default 5 % error budget) on a live server: at the
    default breaker threshold they end as counted timeouts, the run goes on and finishes. A
    timeout alone is no evidence that the server is gone: a probe request asks it."""
    hung = {f"q{i}" for i in range(0, 200, 25)}

    def script(key: Any, attempt: int, n: int) -> Any:
        return FAULTS["hang past timeout"] if key[0] in hung else Answer("A")

    with FaultServer(script) as server:
        records = _run(Endpoint(base_url=server.base_url, model="m"), 200, timeout_s=0.3,
                       deadline_s=0.9, max_concurrent=8)  # fmt: skip
    errored = {r["example_id"] for r in records if r["error"] is not None}
    assert errored == hung
    assert all(r["error"].startswith("timeout") for r in records if r["error"] is not None)
    assert sum(r["reward"] == 1.0 for r in records) == 200 - len(hung)


def test_a_short_restart_is_ridden_through() -> None:
    """The endpoint restarts (connections refused for 3 s, every open one dropped): requests
    wait for it while the breaker probes, then go on; no rollout is lost to the restart."""
    server = FaultServer(lambda key, attempt, n: Answer("A"))

    def script(key: Any, attempt: int, n: int) -> Any:
        if n == 40:
            server.pause(3.0)
        return Answer("A")

    server.script = script
    with server:
        records = _run(Endpoint(base_url=server.base_url, model="m"), 200, max_concurrent=8,
                       backoff=True)  # fmt: skip
    assert [r["example_id"] for r in records if r["error"] is not None] == []
    assert len(records) == 200


def test_a_dead_endpoint_trips_after_the_restart_window() -> None:
    endpoint = Endpoint(base_url=f"http://127.0.0.1:{_closed_port()}/v1", model="m")
    with pytest.raises(EndpointDown) as info:
        _run(endpoint, 200, timeout_s=5, max_retries=4, max_consecutive_failures=5,
             restart_grace_s=1.0)  # fmt: skip
    assert "refused" in str(info.value) and "1 s" in str(info.value)


def _hanger() -> Any:
    """Whether a prompt hangs: ~4 % of the prompts (by a hash of the text), at most 8 (under
    the 5 % error budget of 200 items whatever the prompts' wording)."""
    hung: set[str] = set()

    def hangs(text: str) -> bool:
        if text not in hung and len(hung) < 8 and zlib.crc32(text.encode()) % 25 == 0:
            hung.add(text)
        return text in hung

    return hangs


def _errored(out: Path) -> list[str]:
    (journal,) = out.glob("evals/*/*/results.jsonl")
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    assert len(records) == 200
    return [r["error"] for r in records if r["error"] is not None]


def test_hung_items_at_the_defaults_are_counted_errors_and_the_run_finishes(
    tmp_path: Path,
) -> None:
    """The breaker's defaults (10 in a row), a short request timeout: hung items on a live
    model server are errors within the budget, and the run ends with a verdict, not ERROR."""

    hangs = _hanger()

    def script(key: Any, attempt: int, n: int) -> Any:
        return FAULTS["hang past timeout"] if hangs(key[0]) else Answer("4")

    with FaultServer(script) as server:
        config = write_config(
            tmp_path,
            f"models: [{{name: m, backend: openai, base_url: '{server.base_url}', "
            "model: org/m}]\n"
            "benchmarks: [{name: a, kind: arith, size: 200, "
            "eval: {cache: false, request_timeout_s: 0.3}}]\n",
        )
        verdict = run_pipeline(config, tmp_path / "out")
    errors = _errored(tmp_path / "out")
    assert 0 < len(errors) <= 10 and all(e.startswith("timeout") for e in errors), errors
    assert verdict.status != "ERROR", verdict.reasons


def test_hung_judgements_at_the_defaults_are_counted_errors_and_the_run_finishes(
    tmp_path: Path, scripted_server: Any
) -> None:
    """The same on the judge's endpoint: a judge that never answers some prompts."""
    model = scripted_server(lambda body, n: "4")

    hangs = _hanger()

    def judge(key: Any, attempt: int, n: int) -> Any:
        return FAULTS["hang past timeout"] if hangs(key[0]) else Answer("VERDICT: PASS")

    with FaultServer(judge) as server:
        config = write_config(
            tmp_path,
            f"models: [{{name: m, backend: openai, base_url: '{model.base_url}', "
            "model: org/m}]\n"
            "benchmarks:\n"
            "  - name: a\n"
            "    kind: arith\n"
            "    size: 200\n"
            "    eval: {cache: false, request_timeout_s: 0.3}\n"
            "    scorer:\n"
            "      type: judge\n"
            "      mode: reference\n"
            f"      model: {{name: j, backend: openai, base_url: '{server.base_url}', "
            "model: org/j}\n",
        )
        verdict = run_pipeline(config, tmp_path / "out")
    errors = _errored(tmp_path / "out")
    assert 0 < len(errors) <= 10, errors
    assert verdict.status != "ERROR", verdict.reasons


def test_a_run_stopped_by_the_breaker_reports_what_it_kept(tmp_path: Path) -> None:
    """The server hangs for good after 60 answers: the run stops as ERROR, and the scorecard
    counts the rollouts the journal kept (it said "0 × 1, 0/0")."""

    def script(key: Any, attempt: int, n: int) -> Any:
        return FAULTS["hang past timeout"] if n >= 60 else Answer("4")

    server = FaultServer(script, answer_probes=False)
    with server:
        config = write_config(
            tmp_path,
            f"models: [{{name: m, backend: openai, base_url: '{server.base_url}', "
            "model: org/m}]\n"
            "benchmarks: [{name: a, kind: arith, size: 200, eval: {cache: false, "
            "request_timeout_s: 0.3, max_consecutive_failures: 4, max_concurrent: 4}}]\n",
        )
        verdict = run_pipeline(config, tmp_path / "out")
    assert verdict.status == "ERROR" and any("in a row" in r for r in verdict.reasons)
    (journal,) = (tmp_path / "out").glob("evals/*/*/results.jsonl")
    kept = len(journal.read_text().splitlines())
    (run,) = verdict.runs
    assert kept >= 60 and (run.n_rollouts, run.n_items) == (kept, kept)
    assert run.run_dir == str(journal.parent)
    scorecard = (tmp_path / "out" / "scorecard.md").read_text()
    assert f"| {kept} × 1 |" in scorecard and "| 0 × 1 |" not in scorecard

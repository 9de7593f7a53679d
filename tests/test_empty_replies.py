"""Empty model replies (``content: null``, "", no choices, tool calls only where text was asked)
are the error kind ``empty_reply``, counted against ``eval.max_error_rate``: a model that stops
answering is not a model that answers wrong. Where an empty answer is legitimate
(``eval.allow_empty_replies``) they score 0, and the scorecard counts them on their own."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from evalgate.config.load import GateSettings
from evalgate.config.spec._base import Sampling
from evalgate.gate import decide
from evalgate.report import render_scorecard
from evalgate.run.engine import run_suite
from evalgate.run.summary import summarize
from evalgate.serve.base import Endpoint
from evalgate.serve.client import ChatClient
from evalgate.suites.base import Item, Outcome
from tests.conftest import answer_arith, run_pipeline, write_config


class EchoSuite:
    """One item per prompt; the reward is 1 when the reply is "ok"."""

    name = "echo"

    def __init__(self, n: int) -> None:
        self.items = [Item(id=f"i{k}", prompt=f"p{k}", answer="ok") for k in range(n)]

    async def rollout(self, item: Item, index: int, client: Any) -> Outcome:
        prompt = [{"role": "user", "content": item.prompt}]
        reply = await client.chat(prompt, rollout=index)
        reward = float(reply.text == "ok")
        return Outcome(prompt, reply.text, reward, {"accuracy": reward}, reply.usage)


def _reply(body: dict[str, Any], n: int) -> tuple:
    text = body["messages"][-1]["content"]
    content, finish = {"p0": (None, "length"), "p1": ("", "stop")}.get(text, ("ok", "stop"))
    message = {"role": "assistant", "content": content}
    payload = {"choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    return 200, json.dumps(payload), {"Content-Type": "application/json"}


def test_allowed_empty_replies_are_scored_zero_counted_and_shown(scripted_server) -> None:
    server = scripted_server(_reply)

    async def go() -> list[dict[str, Any]]:
        endpoint = Endpoint(base_url=server.base_url, model="m")
        async with ChatClient(endpoint, Sampling(), max_retries=0, allow_empty=True) as client:
            return await run_suite(EchoSuite(6), client, rollouts=1, max_concurrent=2)

    records = asyncio.run(go())
    assert [r["reward"] for r in records] == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    summary = summarize(
        records,
        benchmark="echo",
        model="m",
        model_id="m",
        run_dir="",
        n_items=6,
        rollouts=1,
        time_s=0.0,
    )
    assert summary.empty_replies == 2 and summary.errors == 0
    verdict = decide([summary], GateSettings(), error_budgets={"echo": 0.05})
    card = render_scorecard(verdict)
    assert "2 empty replies (scored 0)" in card
    summary = summarize(
        records[2:],
        benchmark="echo",
        model="m",
        model_id="m",
        run_dir="",
        n_items=4,
        rollouts=1,
        time_s=0.0,
    )
    assert summary.empty_replies == 0
    card = render_scorecard(decide([summary], GateSettings(), error_budgets={"echo": 0.05}))
    assert "empty repl" not in card


_EMPTY_KINDS = {
    "null": {"choices": [{"index": 0, "message": {"role": "assistant", "content": None},
                          "finish_reason": "length"}]},
    "blank": {"choices": [{"index": 0, "message": {"role": "assistant", "content": ""},
                           "finish_reason": "stop"}]},
    "nochoices": {"choices": []},
    "toolsonly": {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant",
        "tool_calls": [{"id": "c", "type": "function",
                        "function": {"name": "f", "arguments": "{}"}}]}}]},
}  # fmt: skip


def _empty_kinds(body: dict[str, Any], n: int) -> tuple:
    payload = _EMPTY_KINDS.get(body["messages"][-1]["content"])
    if payload is None:
        return (
            200,
            json.dumps(
                _EMPTY_KINDS["blank"]
                | {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]}
            ),
            {},
        )
    return 200, json.dumps(payload), {"Content-Type": "application/json"}


class NamedSuite(EchoSuite):
    def __init__(self, prompts: list[str]) -> None:
        self.items = [Item(id=p, prompt=p, answer="ok") for p in prompts]


def test_every_kind_of_empty_reply_is_an_error_not_a_zero(scripted_server) -> None:
    server = scripted_server(_empty_kinds)
    prompts = [*_EMPTY_KINDS, "fine"]

    async def go() -> tuple[list[dict[str, Any]], Any]:
        endpoint = Endpoint(base_url=server.base_url, model="m")
        async with ChatClient(endpoint, Sampling(), max_retries=3) as client:
            records = await run_suite(NamedSuite(prompts), client, rollouts=1, max_concurrent=2)
        return records, client.stats

    records, stats = asyncio.run(go())
    by = {r["example_id"]: r for r in records}
    for kind in _EMPTY_KINDS:
        assert by[kind]["reward"] is None, kind
        assert by[kind]["error"].startswith("empty_reply:"), by[kind]["error"]
    assert "tool calls only" in by["toolsonly"]["error"]
    assert "no choices" in by["nochoices"]["error"]
    assert by["fine"]["reward"] == 1.0 and by["fine"]["error"] is None
    assert len(server.requests) == len(prompts)  # the model's answer: not retried
    assert stats.failures["empty_reply"] == len(_EMPTY_KINDS)


def _arith_some_null(body: dict[str, Any], n: int) -> Any:
    if n % 10 == 0:  # one reply in ten has no text
        return 200, json.dumps(_EMPTY_KINDS["null"]), {"Content-Type": "application/json"}
    return answer_arith(body, n)


def test_ten_percent_empty_replies_make_the_run_an_error(scripted_server, tmp_path) -> None:
    server = scripted_server(_arith_some_null)
    models = (
        f"models: [{{name: m, backend: openai, base_url: '{server.base_url}', model: org/m}}]\n"
    )
    config = write_config(
        tmp_path, models + "benchmarks: [{name: a, kind: arith, size: 40, eval: {cache: false}}]\n"
    )
    verdict = run_pipeline(config, tmp_path / "out")
    assert verdict.status == "ERROR" and int(verdict.exit_code) == 3
    (run,) = verdict.runs
    assert run.error_kinds.get("empty_reply") == 4
    # Where an empty answer is legitimate, the benchmark says so: scored, not an error.
    config = write_config(
        tmp_path,
        models + "benchmarks: [{name: a, kind: arith, size: 40, "
        "eval: {cache: false, allow_empty_replies: true}}]\n",
    )
    verdict = run_pipeline(config, tmp_path / "out2")
    (run,) = verdict.runs
    assert run.errors == 0 and run.empty_replies == 4

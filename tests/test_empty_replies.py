"""Empty model replies (``content: null`` at ``finish_reason: length``, or "") score 0, and the
scorecard counts them on their own: never silent, never mistaken for errors."""

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


def test_empty_replies_are_counted_and_shown(scripted_server) -> None:
    server = scripted_server(_reply)

    async def go() -> list[dict[str, Any]]:
        endpoint = Endpoint(base_url=server.base_url, model="m")
        async with ChatClient(endpoint, Sampling(), max_retries=0) as client:
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

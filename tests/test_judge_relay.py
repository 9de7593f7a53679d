"""The judge relay: an OpenAI-compatible loopback endpoint in front of the judge's ChatClient.

Real client, real HTTP on loopback, a scripted judge server behind it. What the grading code
may send is narrow (its tab, the relay's key, chat messages); what reaches the judge is the
exam's model and sampling; what it cost is counted per tab.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from evalgate.config.spec import GraderSpec
from evalgate.score.relay import Grader, JudgeRelay
from evalgate.serve import Endpoint
from evalgate.serve.client import ChatClient


async def _with_relay(judge_url: str, body: Any) -> Any:
    spec = GraderSpec.model_validate(
        {"model": {"name": "j", "backend": "openai", "base_url": judge_url, "model": "org/judge"},
         "sampling": {"temperature": 0.0, "max_tokens": 50, "seed": 3}}
    )  # fmt: skip
    grader = Grader(spec, price=(0.5, 1.0))
    async with ChatClient(
        Endpoint(base_url=judge_url, model="org/judge"), spec.sampling, max_retries=0
    ) as client:
        grader.client = client
        async with JudgeRelay(grader) as relay, aiohttp.ClientSession() as http:
            tab = relay.open()
            ep = relay.endpoint(tab)
            url = ep["base_url"] + "/chat/completions"
            auth = {"Authorization": f"Bearer {ep['api_key']}"}
            statuses = {}
            for name, (u, headers) in {
                "no key": (url, {}),
                "wrong key": (url, {"Authorization": "Bearer nope"}),
                "no such tab": (url.replace(tab, "0" * 16), auth),
            }.items():
                async with http.post(u, json=body, headers=headers) as resp:
                    statuses[name] = resp.status
            async with http.post(url, data=b"not json", headers=auth) as resp:
                statuses["not json"] = resp.status
            replies = []
            for _ in range(2):  # the same request twice: samples 0 and 1 (seeds 3 and 4)
                async with http.post(url, json=body, headers=auth) as resp:
                    replies.append((resp.status, await resp.json()))
            spent = relay.close(tab)
            async with http.post(url, json=body, headers=auth) as resp:
                statuses["closed tab"] = resp.status
    return statuses, replies, spent, grader


def test_the_relay_asks_the_exams_judge_and_counts_each_tab(scripted_server: Any) -> None:
    judge = scripted_server(lambda body, n: f"verdict {n}")
    parts = [{"type": "text", "text": "grade this"}]
    body = {"model": "env/own", "temperature": 1.5, "max_tokens": 9999,
            "messages": [{"role": "user", "content": parts}]}  # fmt: skip
    statuses, replies, spent, grader = asyncio.run(_with_relay(judge.base_url, body))
    assert statuses == {"no key": 401, "wrong key": 401, "no such tab": 404, "not json": 400,
                        "closed tab": 404}  # fmt: skip
    assert [s for s, _ in replies] == [200, 200]
    assert [r["choices"][0]["message"]["content"] for _, r in replies] == ["verdict 0", "verdict 1"]
    assert {r["model"] for _, r in replies} == {"org/judge"}
    # The exam's model and sampling, whatever the request said; content parts read as text.
    assert [b["model"] for b in judge.requests] == ["org/judge"] * 2
    assert [(b["temperature"], b["max_tokens"]) for b in judge.requests] == [(0.0, 50)] * 2
    assert [b["seed"] for b in judge.requests] == [3, 4]
    assert judge.requests[0]["messages"] == [{"role": "user", "content": "grade this"}]
    assert spent.calls == 2 and spent.failed is None
    judgement = spent.judgement(grader)
    usage = judgement["usage"]
    assert usage["prompt_tokens"] > 0
    assert judgement["cost_usd"] == usage["prompt_tokens"] * 0.5 + usage["completion_tokens"]
    assert grader.stats == {"calls": 2, "cache_hits": 0}


def test_a_failed_judge_call_marks_the_tab(scripted_server: Any) -> None:
    judge = scripted_server(lambda body, n: (503, "down", {}))
    body = {"messages": [{"role": "user", "content": "grade"}]}
    _, replies, spent, _ = asyncio.run(_with_relay(judge.base_url, body))
    assert [s for s, _ in replies] == [502, 502]
    assert replies[0][1]["error"]["type"] == "judge_http_503"
    assert spent.failed is not None and spent.failed[0] == "http_503"
    assert json.dumps(spent.judgement(Grader(None))["usage"]) == json.dumps(
        {"prompt_tokens": 0, "completion_tokens": 0}
    )


def test_a_structured_output_judge_gets_its_response_format(scripted_server: Any) -> None:
    # A judge that asks for structured output (verifiers v1's Judge.schema, an OpenAI SDK
    # `parse`) sends `response_format`: the relay forwards it to the exam's judge, so the
    # verdict comes back as the JSON the grading code parses; the exam still sets the model
    # and sampling.
    def judge_reply(body: dict[str, Any], n: int) -> str:
        fmt = body.get("response_format") or {}
        return json.dumps({"score": 1}) if fmt.get("type") == "json_schema" else "plain"

    judge = scripted_server(judge_reply)
    schema = {
        "type": "json_schema",
        "json_schema": {
            "name": "verdict",
            "schema": {
                "type": "object",
                "properties": {"score": {"type": "integer"}},
                "required": ["score"],
            },
        },
    }
    body = {"model": "env/own", "messages": [{"role": "user", "content": "grade"}],
            "response_format": schema}  # fmt: skip
    _, replies, spent, _ = asyncio.run(_with_relay(judge.base_url, body))
    assert [s for s, _ in replies] == [200, 200] and spent.calls == 2
    assert json.loads(replies[0][1]["choices"][0]["message"]["content"]) == {"score": 1}
    assert [b.get("response_format") for b in judge.requests] == [schema] * 2
    assert [b["model"] for b in judge.requests] == ["org/judge"] * 2


def test_a_malformed_response_format_is_refused(scripted_server: Any) -> None:
    judge = scripted_server(lambda body, n: "never asked")
    body = {"messages": [{"role": "user", "content": "grade"}], "response_format": "json"}
    _, replies, _, _ = asyncio.run(_with_relay(judge.base_url, body))
    assert [s for s, _ in replies] == [400, 400]
    assert "response_format" in replies[0][1]["error"]["message"]
    assert judge.requests == []

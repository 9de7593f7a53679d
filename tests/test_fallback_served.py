"""A router's fallback (LiteLLM: `router_settings.fallbacks`) answers for the configured model:
the responding model is recorded per rollout, priced as itself, named on the scorecard, and a
fallback-served item is not paired with a baseline item the configured model answered.

The scripted server plays the proxy: for some items it answers as the fallback does, with the
fallback's name in the response's `model` and LiteLLM's `x-litellm-attempted-fallbacks` header."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from evalgate.run.costs import cost_usd
from evalgate.serve import served
from evalgate.serve.base import Endpoint
from evalgate.serve.client import ChatClient, Reply
from tests.conftest import answer_arith, read_jsonl, write_config
from tests.test_faults import SAMPLING

PRIMARY, FALLBACK = "gpt-4o", "gpt-4o-mini"
PRICES = {  # LiteLLM's list, as far as these tests need it (the list ships with LiteLLM)
    PRIMARY: {"input_cost_per_token": 2.5e-6, "output_cost_per_token": 1e-5},
    FALLBACK: {"input_cost_per_token": 1.5e-7, "output_cost_per_token": 6e-7},
}


@pytest.fixture(autouse=True)
def _prices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("evalgate.run.costs._price_list", lambda: PRICES)


def _proxy(fallback_items: set[str], wrong: set[str] = frozenset()) -> Any:
    def script(body: dict[str, Any], n: int) -> Any:
        prompt = body["messages"][-1]["content"]
        answer = "0" if prompt in wrong else answer_arith(body, n)
        if prompt not in fallback_items:
            return answer
        payload = {
            "id": f"c{n}",
            "object": "chat.completion",
            "created": 0,
            "model": FALLBACK,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}}],
            "usage": {"prompt_tokens": 70, "completion_tokens": 30, "total_tokens": 100},
        }
        headers = {"Content-Type": "application/json", "x-litellm-attempted-fallbacks": "1"}
        return 200, json.dumps(payload), headers

    return script


def _config(tmp_path: Path, base_url: str) -> Path:
    return write_config(
        tmp_path,
        f"""
models: [{{name: m, backend: openai, base_url: "{base_url}", model: {PRIMARY}}}]
benchmarks: [{{name: arith, kind: arith, size: 12, seed: 3}}]
""",
    )


def _prompts(records: list[dict[str, Any]]) -> dict[str, str]:
    return {r["example_id"]: r["prompt"][-1]["content"] for r in records}


def test_the_responding_model_is_recorded_priced_and_named(
    tmp_path: Path, scripted_server: Any
) -> None:
    probe = scripted_server(answer_arith)
    main(["local", str(_config(tmp_path, probe.base_url)), "--output", str(tmp_path / "p")])
    (probe_dir,) = (tmp_path / "p" / "evals").glob("*/*")
    prompts = _prompts(read_jsonl(probe_dir / "results.jsonl"))
    chosen = sorted(prompts)[:3]
    texts = {prompts[i] for i in chosen}

    server = scripted_server(_proxy(texts))
    out = tmp_path / "out"
    code = main(["local", str(_config(tmp_path, server.base_url)), "--output", str(out)])
    assert code in (0, 1)
    (run_dir,) = (out / "evals").glob("*/*")
    records = read_jsonl(run_dir / "results.jsonl")
    served = {r["example_id"]: r.get("served_by") for r in records}
    assert {i for i, s in served.items() if s} == set(chosen)
    assert served[chosen[0]] == {
        FALLBACK: {"requests": 1, "prompt_tokens": 70, "completion_tokens": 30}
    }
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["fallback_rollouts"] == 3 and set(meta["served_by"]) == {FALLBACK}
    own = len(records) - 3
    expected = cost_usd(PRIMARY, 7 * own, 3 * own) + cost_usd(FALLBACK, 70 * 3, 30 * 3)
    assert meta["cost_usd"] == pytest.approx(expected)
    assert meta["cost_usd"] != pytest.approx(cost_usd(PRIMARY, 7 * own + 210, 3 * own + 90))
    scorecard = (out / "scorecard.md").read_text()
    assert "a fallback" in scorecard and f"`{FALLBACK}`" in scorecard
    assert f"3 of {len(records)} rollouts" in scorecard


def test_a_fallback_served_item_is_not_paired_with_the_primarys_baseline(
    tmp_path: Path, scripted_server: Any
) -> None:
    base = scripted_server(answer_arith)
    main(["local", str(_config(tmp_path, base.base_url)), "--output", str(tmp_path / "base")])
    (base_dir,) = (tmp_path / "base" / "evals").glob("*/*")
    prompts = _prompts(read_jsonl(base_dir / "results.jsonl"))
    chosen = sorted(prompts)[:4]
    texts = {prompts[i] for i in chosen}
    # The fallback gets these items wrong: paired, they would read as the PR's regressions.
    head = scripted_server(_proxy(texts, wrong=texts))
    out = tmp_path / "head"
    config = _config(tmp_path, head.base_url)
    main(["local", str(config), "--output", str(out), "--baseline", str(tmp_path / "base")])
    verdict = json.loads((out / "verdict.json").read_text())
    (comparison,) = verdict["comparisons"]
    assert comparison["n_fallback"] == 4
    assert not {f["item_id"] for f in comparison["flips"]} & set(chosen)
    assert comparison["n_paired"] == len(prompts) - 4
    assert "Not paired with the baseline (a fallback" in (out / "scorecard.md").read_text()


@pytest.mark.parametrize("named", ["/models/Llama-3-8B-Instruct", "gpt-4o-deployment-eu"])
def test_a_server_that_names_its_deployment_is_not_a_fallback(
    tmp_path: Path, scripted_server: Any, named: str
) -> None:
    """vLLM started on a path, llama.cpp, an Azure deployment, Anthropic's compatible API:
    every reply names the server's own model, not the requested one, with no router saying a
    fallback answered. That is the deployment's name: replies are the configured model's,
    priced as it, and cached (a re-run sends nothing)."""

    def script(body: dict[str, Any], n: int) -> Any:
        payload = {
            "id": f"c{n}",
            "object": "chat.completion",
            "created": 0,
            "model": named,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": answer_arith(body, n)}}
            ],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
        }
        return 200, json.dumps(payload), {"Content-Type": "application/json"}

    server = scripted_server(script)
    config = _config(tmp_path, server.base_url)
    assert main(["local", str(config), "--output", str(tmp_path / "a")]) in (0, 1)
    (run_dir,) = (tmp_path / "a" / "evals").glob("*/*")
    records = read_jsonl(run_dir / "results.jsonl")
    assert not any(r.get("served_by") for r in records)
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert not meta.get("fallback_rollouts")
    assert meta["requests"]["server_model"] == named  # the deployment's name, said once
    assert meta["cost_usd"] == pytest.approx(cost_usd(PRIMARY, 7 * len(records), 3 * len(records)))
    assert "a fallback" not in (tmp_path / "a" / "scorecard.md").read_text()
    sent = len(server.requests)
    assert main(["local", str(config), "--output", str(tmp_path / "b")]) in (0, 1)
    assert len(server.requests) == sent  # every reply came from the cache


@pytest.mark.parametrize(
    ("header", "served_by"),
    [(None, None), ("0", None), ("", None), ("many", None), ("2", "gpt-4o-2024-08-06")],
)
def test_only_litellms_fallback_count_marks_a_reply_naming_the_model_asked_for(
    scripted_server: Any, header: str | None, served_by: str | None
) -> None:
    """A reply whose body names a dated variant of the requested model is the requested model's
    own, unless LiteLLM's header counts a fallback (> 0): then it is noted and marked as served
    by that name. No header, a zero, an empty or unreadable count: the configured model's."""

    def script(body: dict[str, Any], n: int) -> Any:
        payload = {
            "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "4"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1},
        }
        headers = {"Content-Type": "application/json"}
        if header is not None:
            headers["x-litellm-attempted-fallbacks"] = header
        return 200, json.dumps(payload), headers

    server = scripted_server(script)
    endpoint = Endpoint(base_url=server.base_url, model=PRIMARY, router=False)

    async def ask() -> tuple[Reply, dict[str, dict[str, float]]]:
        async with ChatClient(endpoint, SAMPLING) as client:
            with served.collect() as notes:
                reply = await client.chat([{"role": "user", "content": "2+2?"}])
        return reply, notes

    reply, notes = asyncio.run(ask())
    assert reply.text == "4" and reply.served_by == served_by
    if served_by is None:
        assert notes == {}
    else:
        assert notes == {served_by: {"requests": 1, "prompt_tokens": 5, "completion_tokens": 1}}

"""The pipeline end to end against a scripted OpenAI-compatible server over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from tests.conftest import answer_arith, read_jsonl, write_config

RESULT_KEYS = {
    "example_id",
    "item_hash",
    "rollout",
    "group",
    "prompt",
    "completion",
    "answer",
    "reward",
    "metrics",
    "usage",
    "timing",
    "error",
}
METADATA_KEYS = {
    "num_examples",
    "rollouts_per_example",
    "sampling_args",
    "time_ms",
    "avg_reward",
    "avg_metrics",
    "pass_at_k",
    "errors",
    "usage",
    "complete",
}


def _config(tmp_path: Path, base_url: str, extra: str = "") -> Path:
    return write_config(
        tmp_path,
        f"""
models:
  - name: scripted
    backend: openai
    base_url: {base_url}
    model: org/scripted-model
benchmarks:
  - name: arith
    eval: {{num_examples: 12}}
eval:
  max_retries: 2
{extra}
""",
    )


def _run(tmp_path: Path, config: Path, *args: str) -> tuple[int, Path]:
    out = tmp_path / "out"
    code = main(["local", str(config), "--output", str(out), *args], environ={"CI": "true"})
    return code, out


def _run_dir(out: Path) -> Path:
    (run,) = (out / "evals").glob("arith--org--scripted-model/*")
    return run


def test_outputs_tree_and_schema(tmp_path: Path, scripted_server: Any) -> None:
    server = scripted_server(answer_arith)
    code, out = _run(tmp_path, _config(tmp_path, server.base_url), "--eval.rollouts=2")
    assert code == 0
    run = _run_dir(out)
    results = read_jsonl(run / "results.jsonl")
    assert len(results) == 24 == len(server.requests)
    assert all(set(r) == RESULT_KEYS for r in results)
    assert {(r["example_id"], r["rollout"]) for r in results} == {
        (f"arith-0-{i}", k) for i in range(12) for k in range(2)
    }
    assert all(r["reward"] == 1.0 and r["error"] is None for r in results)
    meta = json.loads((run / "metadata.json").read_text())
    assert set(meta) >= METADATA_KEYS
    assert meta["num_examples"] == 12 and meta["rollouts_per_example"] == 2
    assert meta["avg_reward"] == 1.0 and meta["pass_at_k"] == {"pass@2": 1.0, "pass^2": 1.0}
    assert meta["usage"] == {"prompt_tokens": 7 * 24, "completion_tokens": 3 * 24}
    cfg = json.loads((run / "run_config.json").read_text())
    assert cfg["benchmark"]["eval"]["rollouts"] == 2  # the merged config, override included
    assert cfg["benchmark"]["sampling"]["max_tokens"] == 16
    verdict = json.loads((out / "verdict.json").read_text())
    assert (
        verdict["status"] == "UNGATED" and verdict["exit_code"] == 0
    )  # no thresholds, no baseline
    assert "| scripted | arith | accuracy | 100.0% |" in (out / "scorecard.md").read_text()


def test_requests_carry_sampling_and_per_rollout_seed(tmp_path: Path, scripted_server: Any) -> None:
    server = scripted_server(answer_arith)
    config = _config(
        tmp_path, server.base_url, "sampling: {temperature: 0.7, seed: 100, top_p: 0.9}"
    )
    assert _run(tmp_path, config, "--eval.rollouts=3", "--eval.num_examples=2")[0] == 0
    body = server.requests[0]
    assert body["model"] == "org/scripted-model"
    assert body["temperature"] == 0.7 and body["top_p"] == 0.9 and body["max_tokens"] == 16
    assert body["messages"][0] == {
        "role": "system",
        "content": "You are a calculator. Reply with the number only.",
    }
    assert sorted({r["seed"] for r in server.requests}) == [100, 101, 102]


def test_threshold_missed_fails_the_gate(tmp_path: Path, scripted_server: Any) -> None:
    # Right on even requests only: accuracy 50 % against a 0.8 threshold.
    server = scripted_server(lambda body, n: answer_arith(body, n) if n % 2 == 0 else "no idea")
    config = _config(tmp_path, server.base_url, "gate: {thresholds: {arith: {accuracy: 0.8}}}")
    code, out = _run(tmp_path, config, "--eval.max_concurrent=1")
    assert code == 1
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["status"] == "FAIL"
    # 6/12 right against 0.8: exact binomial P(X <= 6 | n=12, p=0.8) = 0.0194 < alpha.
    assert verdict["reasons"] == [
        "scripted / arith / accuracy: 0.500 vs minimum 0.800 (p = 0.0194)"
    ]
    assert "❌ FAIL" in (out / "scorecard.md").read_text()


def test_unknown_threshold_metric_fails_rather_than_passes(
    tmp_path: Path, scripted_server: Any
) -> None:
    server = scripted_server(answer_arith)
    config = _config(tmp_path, server.base_url, "gate: {thresholds: {arith: {acuracy: 0.1}}}")
    code, _ = _run(tmp_path, config)
    assert code == 2  # now caught when evals.yaml is loaded: no model call is spent on it
    assert not server.requests


def test_transient_429s_are_retried_and_not_counted(tmp_path: Path, scripted_server: Any) -> None:
    seen: set[str] = set()

    def flaky(body: dict[str, Any], n: int) -> Any:
        prompt = body["messages"][-1]["content"]
        if prompt not in seen:  # every item's first attempt is throttled
            seen.add(prompt)
            return (429, '{"error": "slow down"}', {"Retry-After": "0"})
        return answer_arith(body, n)

    server = scripted_server(flaky)
    code, out = _run(tmp_path, _config(tmp_path, server.base_url))
    assert code == 0
    results = read_jsonl(_run_dir(out) / "results.jsonl")
    assert len(results) == 12 and all(r["error"] is None for r in results)
    assert len(server.requests) == 24


def test_errors_are_counted_not_scored_and_too_many_is_exit_3(
    tmp_path: Path, scripted_server: Any
) -> None:
    # Every item whose prompt contains "3" gets a permanent 400: an error, not a wrong answer.
    def broken(body: dict[str, Any], n: int) -> Any:
        if "3" in body["messages"][-1]["content"]:
            return (400, '{"error": "bad request"}', {})
        return answer_arith(body, n)

    server = scripted_server(broken)
    code, out = _run(tmp_path, _config(tmp_path, server.base_url))
    results = read_jsonl(_run_dir(out) / "results.jsonl")
    errored = [r for r in results if r["error"]]
    assert errored and all(r["reward"] is None for r in errored)
    assert all(r["error"].startswith("http_400") for r in errored)
    assert code == 3  # > 5 % errored: not a score
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["status"] == "ERROR"
    assert f"{len(errored)}/12 rollouts errored" in verdict["reasons"][0]
    # The cause itself, not only its count: the first error of the commonest kind, on one line.
    assert f"; first: {' '.join(errored[0]['error'].split())}" in verdict["reasons"][0]
    # The accuracy is over the items that answered, all of them right.
    (acc,) = [c for c in verdict["checks"] if c["metric"] == "accuracy"]
    assert acc["estimate"]["mean"] == 1.0 and acc["estimate"]["n"] == 12 - len(errored)
    assert "errors by kind" in (out / "scorecard.md").read_text()


def test_an_errors_text_is_stored_and_shown_with_secrets_blanked(
    tmp_path: Path, scripted_server: Any, monkeypatch: Any
) -> None:
    # A provider that echoes the key in its error body: the verdict's reason (which the PR's
    # comment shows) names the error, not the key.
    monkeypatch.setenv("PROVIDER_API_KEY", "sk-live-0123456789")
    server = scripted_server(lambda body, n: (401, '{"error": "bad key sk-live-0123456789"}', {}))
    code, out = _run(tmp_path, _config(tmp_path, server.base_url))
    verdict = json.loads((out / "verdict.json").read_text())
    assert code == 3 and "; first: http_401" in verdict["reasons"][0]
    assert "sk-live-0123456789" not in verdict["reasons"][0] and "***" in verdict["reasons"][0]
    # Nor in what is stored (and pushed with a baseline): the journal keeps the error, blanked.
    results = (_run_dir(out) / "results.jsonl").read_text()
    assert "sk-live-0123456789" not in results and "bad key ***" in results


def test_error_budget_is_configurable(tmp_path: Path, scripted_server: Any) -> None:
    first: list[str] = []  # one item's request fails every time (errors are never cached)

    def script(body: dict[str, Any], n: int) -> Any:
        first[:] = first or [body["messages"][-1]["content"]]
        return (
            (400, "no", {})
            if body["messages"][-1]["content"] == first[0]
            else answer_arith(body, n)
        )

    server = scripted_server(script)
    config = _config(tmp_path, server.base_url)
    assert _run(tmp_path, config, "--eval.max_concurrent=1")[0] == 3
    code, out = _run(tmp_path, config, "--eval.max_concurrent=1", "--eval.max_error_rate=0.1")
    assert code == 0
    # Gated again later (compare, resume), the run is held to the budget it ran with (1/12
    # errored: over the default 5 %, under its own 10 %).
    assert main(["compare", str(out), str(out), "--output", str(tmp_path / "cmp")]) == 0
    verdict = json.loads((tmp_path / "cmp" / "verdict.json").read_text())
    assert verdict["status"] != "ERROR", verdict["reasons"]


def test_unreachable_endpoint_is_infra_error(tmp_path: Path) -> None:
    config = _config(tmp_path, "http://127.0.0.1:9/v1")
    code, out = _run(tmp_path, config, "--eval.max_retries=0", "--eval.num_examples=2")
    assert code == 3
    verdict = json.loads((out / "verdict.json").read_text())
    # Named at once, with the URL, instead of after every rollout spent its retries.
    assert "cannot reach http://127.0.0.1:9/v1" in verdict["checks"][0]["reason"]


def test_a_host_that_is_no_name_is_unreachable_not_a_crash(tmp_path: Path) -> None:
    """An empty label (`a..b`) is refused by the resolver, as any name it cannot look up (it
    was an internal error: the `idna` codec's, which the probe no longer uses for ASCII)."""
    config = _config(tmp_path, "http://a..b:9/v1")
    code, out = _run(tmp_path, config, "--eval.max_retries=0", "--eval.num_examples=2")
    assert code == 3
    verdict = json.loads((out / "verdict.json").read_text())
    assert "cannot reach http://a..b:9/v1" in verdict["checks"][0]["reason"]


def test_missing_api_key_names_the_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(
        tmp_path,
        "models: [{name: m, backend: openai, base_url: 'http://127.0.0.1:9/v1', "
        "api_key_env: MY_PROVIDER_KEY}]\nbenchmarks: [arith]\n",
    )
    assert main(["local", str(config), "--output", str(tmp_path / "o")], environ={}) == 2
    assert "set the environment variable MY_PROVIDER_KEY" in capsys.readouterr().err


def test_api_key_is_sent_but_never_written(tmp_path: Path, scripted_server: Any) -> None:
    server = scripted_server(answer_arith)
    config = write_config(
        tmp_path,
        f"models: [{{name: m, backend: openai, base_url: '{server.base_url}', "
        "api_key_env: MY_PROVIDER_KEY}]\nbenchmarks: [{name: arith, eval: {num_examples: 2}}]\n",
    )
    out = tmp_path / "o"
    code = main(
        ["local", str(config), "--output", str(out)], environ={"MY_PROVIDER_KEY": "sk-secret-1"}
    )
    assert code == 0
    assert server.authorization == ["Bearer sk-secret-1"] * 2
    seen = [p.read_text() for p in out.rglob("*") if p.is_file()]
    assert seen and not any("sk-secret-1" in text for text in seen)


def test_several_models_side_by_side(tmp_path: Path, scripted_server: Any) -> None:
    good = scripted_server(answer_arith)
    bad = scripted_server(lambda body, n: "7")
    config = write_config(
        tmp_path,
        f"""
models:
  - {{name: good, backend: openai, base_url: "{good.base_url}", model: org/good}}
  - {{name: bad, backend: openai, base_url: "{bad.base_url}", model: org/bad}}
benchmarks:
  - {{name: arith, eval: {{num_examples: 10}}}}
""",
    )
    code, out = _run(tmp_path, config)
    assert code == 0
    scorecard = (out / "scorecard.md").read_text()
    assert "| benchmark | metric | good | bad |" in scorecard
    row = next(line for line in scorecard.splitlines() if line.startswith("| arith | accuracy |"))
    assert (
        "100.0%" in row and "**best**" in row.split("|")[3] and "**best**" not in row.split("|")[4]
    )
    assert len(good.requests) == len(bad.requests) == 10


def test_cost_is_priced_from_litellm_price_list(tmp_path: Path, scripted_server: Any) -> None:
    from evalgate.run.costs import price_per_token

    if price_per_token("gpt-4o-mini") is None:
        pytest.skip("needs LiteLLM's price list (the litellm extra or EVALGATE_LITELLM_PYTHON)")
    server = scripted_server(answer_arith)
    config = write_config(
        tmp_path,
        f"models: [{{name: m, backend: openai, base_url: '{server.base_url}', "
        "model: gpt-4o-mini}]\n"
        "benchmarks: [{name: arith, eval: {num_examples: 4}}]\n",
    )
    code, out = _run(tmp_path, config)
    assert code == 0
    prompt, completion = price_per_token("gpt-4o-mini")
    (run,) = (out / "evals").glob("arith--*/*")
    meta = json.loads((run / "metadata.json").read_text())
    assert meta["cost_usd"] == pytest.approx(4 * (7 * prompt + 3 * completion))
    assert "Total cost: $" in (out / "scorecard.md").read_text()

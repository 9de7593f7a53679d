"""Budget caps: the schema, the meter, the base branch's ceiling, and a capped run end to end
(CLI → real HTTP server → exit 3 → resume)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from evalgate.config.spec import BudgetSettings, LiteLLMModel, apply_ceiling
from evalgate.run.budget import BudgetMeter, stop_reason
from tests.conftest import answer_arith, read_jsonl, write_config

N_ITEMS, CONCURRENCY, TOKENS_PER_REQUEST = 20, 3, 10  # ScriptedServer reports 7 + 3 tokens


def _cfg(tmp: Path, url: str, extra: str = "") -> Path:
    return write_config(
        tmp,
        f"""
models:
  - {{name: scripted, backend: openai, base_url: "{url}", model: org/m}}
benchmarks:
  - name: arith
    eval: {{num_examples: {N_ITEMS}, rollouts: 1, max_concurrent: {CONCURRENCY}}}
{extra}""",
    )


def test_token_cap_stops_sending_and_resume_finishes(
    tmp_path: Path, scripted_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    server = scripted_server(answer_arith)
    cfg = _cfg(tmp_path, server.base_url)
    out = tmp_path / "out"
    cap = 50  # reached after 5 answered requests
    code = main(
        ["local", str(cfg), "--output", str(out), "--no-cache", f"--budget.tokens={cap}"],
        environ={"CI": "true"},
    )
    assert code == 3
    allowed = cap // TOKENS_PER_REQUEST
    sent = len(server.requests)
    # No request starts once the cap is reached; at most the ones in flight then finish.
    assert allowed <= sent <= allowed + CONCURRENCY - 1, sent
    (run,) = out.glob("evals/*/*")
    kept = read_jsonl(run / "results.jsonl")
    assert len(kept) == sent  # every answered request is kept
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["status"] == "ERROR"
    done = len({r["example_id"] for r in kept})
    reason = f"budget: tokens 50 reached after {done} of {N_ITEMS} items"
    assert any(reason in r for r in verdict["reasons"]), verdict["reasons"]
    assert reason in capsys.readouterr().out  # the scorecard says why
    meta = json.loads((run / "metadata.json").read_text())
    assert meta["complete"] is False and meta["budget"]["reached"] == "tokens 50"

    # Resuming under the same cap sends nothing: the cap holds over the run's results.
    assert main(["resume", run.name, "--output", str(out), "--no-cache"], environ={}) == 3
    assert len(server.requests) == sent

    # A higher cap finishes the run: only the missing items are sent.
    code = main(
        ["resume", run.name, "--output", str(out), "--no-cache", "--budget.tokens=100000"],
        environ={},
    )
    assert code == 0
    assert len(server.requests) == N_ITEMS
    assert len(read_jsonl(run / "results.jsonl")) == N_ITEMS
    # Nothing is gated in this config: the finished run says so rather than claim a PASS.
    assert json.loads((out / "verdict.json").read_text())["status"] == "UNGATED"


def test_budget_in_evals_yaml_and_validate_estimate(tmp_path: Path, scripted_server: Any) -> None:
    server = scripted_server(answer_arith)
    cfg = _cfg(tmp_path, server.base_url, "budget: {tokens: 100, wall_s: 600}\n")
    buf = io.StringIO()
    assert main(["validate", str(cfg)], environ={}, out=buf) == 0
    text = buf.getvalue()
    # 20 requests × max_tokens (arith: 16) completion tokens at most, plus the prompts.
    assert f"{N_ITEMS} requests" in text, text
    assert "budget tokens 100: estimate ≤" in text and "may exceed it" in text, text
    assert "budget wall_s 600: measured while running" in text
    assert server.requests == []  # an estimate spends nothing


def test_usd_cap_without_a_price_is_a_config_error(
    tmp_path: Path, scripted_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    server = scripted_server(answer_arith)
    cfg = _cfg(tmp_path, server.base_url)
    local = ["local", str(cfg), "--output", str(tmp_path / "o"), "--no-cache"]
    for argv in (["validate", str(cfg)], local):
        assert main([*argv, "--budget.usd=1"], environ={}) == 2
        assert "budget.usd: no price is known for model 'scripted'" in capsys.readouterr().err
    assert server.requests == []


def test_bad_budget_values_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = write_config(tmp_path, "benchmarks: [arith]\nbudget: {tokens: -5}\n")
    assert main(["validate", str(cfg)], environ={}) == 2
    err = capsys.readouterr().err
    assert "budget.tokens" in err and "evals.yaml:2" in err, err
    assert main(["validate", str(cfg), "--budget.tokenz=5"], environ={}) == 2
    assert "--budget.tokenz: unknown field" in capsys.readouterr().err
    assert main(["resume", "x", "--sampling.temperature=1"], environ={}) == 2
    assert "resume takes only --budget.FIELD=VALUE" in capsys.readouterr().err
    assert main(["resume", "x", "--budget.usd=-1"], environ={}) == 2
    assert "--budget.usd:" in capsys.readouterr().err


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_meter_gpu_seconds_and_wall_clock() -> None:
    clock = _Clock()
    meter = BudgetMeter(BudgetSettings(gpu_seconds=30, wall_s=100), clock=clock)
    meter.gpu_start(2)
    clock.now += 10
    assert not meter.exhausted()  # 20 GPU-seconds of 30
    meter.gpu_stop()
    clock.now += 50  # the server is down: GPU time stops, wall-clock does not
    assert meter.spent()["gpu_seconds"] == 20 and not meter.exhausted()
    meter.gpu_start(1)
    clock.now += 10
    assert meter.exhausted() and meter.reached == "gpu_seconds 30"
    wall = BudgetMeter(BudgetSettings(wall_s=5), clock=clock)
    clock.now += 5
    assert wall.exhausted() and wall.reached == "wall_s 5"


def test_meter_usd_from_the_configured_price() -> None:
    model = LiteLLMModel(
        name="m",
        backend="litellm",
        model="custom/unlisted",
        params={"input_cost_per_token": 1e-6, "output_cost_per_token": 4e-6},
    )
    meter = BudgetMeter(BudgetSettings(usd=0.001))
    meter.use_model(model)
    meter.add({"prompt_tokens": 200, "completion_tokens": 100})  # 0.0006 $
    assert not meter.exhausted()
    meter.add({"prompt_tokens": 200, "completion_tokens": 100})  # 0.0012 $
    assert meter.exhausted() and meter.reached == "usd $0.001"
    assert meter.usd == pytest.approx(0.0012)


def test_stop_reason_counts_whole_items_only() -> None:
    meter = BudgetMeter(BudgetSettings(tokens=100_000))
    meter.add({"prompt_tokens": 100_000})
    assert meter.exhausted()
    recs = [{"example_id": "a"}, {"example_id": "a"}, {"example_id": "b"}]
    assert stop_reason(meter, recs, 2_000, 2) == (
        "budget: tokens 100,000 reached after 1 of 2,000 items"
    )
    assert stop_reason(meter, recs * 2, 1, 2) is None  # everything ran: no error
    assert stop_reason(None, recs, 2_000, 2) is None


def test_base_branch_ceiling_cannot_be_raised() -> None:
    base = BudgetSettings(tokens=1000, usd=5.0)
    pr = BudgetSettings(tokens=5000, usd=1.0, wall_s=60)
    got, note = apply_ceiling(pr, base)
    assert (got.tokens, got.usd, got.wall_s, got.gpu_seconds) == (1000, 1.0, 60, None)
    assert note is not None and "tokens 5,000 > 1,000" in note
    got, note = apply_ceiling(BudgetSettings(), base)  # no cap of its own: the base's
    assert (got.tokens, got.usd, note) == (1000, 5.0, None)
    got, note = apply_ceiling(BudgetSettings(tokens=10), base)
    assert (got.tokens, got.usd, note) == (10, 5.0, None)


class _GPUServer:
    """A `vllm` model's server stand-in: the scripted endpoint, counted as one GPU while up."""

    chat_template = None  # the ModelServer interface: the endpoint applies its own

    def __init__(self, url: str, started: list[str]) -> None:
        self.url, self.started = url, started
        self.log_path = None

    def __enter__(self) -> Any:
        from evalgate.serve import Endpoint

        self.started.append(self.url)
        return Endpoint(base_url=self.url, model="m", model_id="org/m")

    def __exit__(self, *exc: object) -> None:
        return None


def test_gpu_seconds_cap_stops_a_vllm_model_and_skips_the_next(
    tmp_path: Path, scripted_server: Any
) -> None:
    from evalgate import pipeline
    from evalgate.config.load import load_config
    from evalgate.run.progress import make_progress

    server = scripted_server(answer_arith)
    cfg = write_config(
        tmp_path,
        """
models:
  - {name: gpu1, backend: vllm, model: org/m}
  - {name: gpu2, backend: vllm, model: org/m}
benchmarks:
  - name: arith
    eval: {num_examples: 10}
budget: {gpu_seconds: 0.000001}
""",
    )
    started: list[str] = []
    how = pipeline.Invocation(
        tmp_path / "out",
        {},
        make_progress({"CI": "true"}),
        lambda line: None,
        server_factory=lambda model, ctx: _GPUServer(server.base_url, started),
    )
    verdict = pipeline.run(load_config(cfg), how)
    # A microsecond of one GPU is spent before the first rollout could start: nothing is sent,
    # and the second model's server is never started.
    assert server.requests == [] and len(started) == 1
    assert verdict.status == "ERROR" and int(verdict.exit_code) == 3
    assert verdict.reasons == (
        "gpu1 / arith / -: budget: gpu_seconds 1e-06 reached after 0 of 10 items",
        "gpu2 / arith / -: budget: gpu_seconds 1e-06 reached before model 'gpu2' started",
    )


def test_validate_estimates_cost_from_the_configured_price(tmp_path: Path) -> None:
    cfg = write_config(
        tmp_path,
        """
models:
  - name: priced
    backend: litellm
    model: custom/unlisted
    params: {input_cost_per_token: 0.000001, output_cost_per_token: 0.000002}
benchmarks:
  - name: arith
    eval: {num_examples: 100}
    sampling: {max_tokens: 50}
budget: {usd: 0.005}
""",
    )
    buf = io.StringIO()
    assert main(["validate", str(cfg)], environ={}, out=buf) == 0
    text = buf.getvalue()
    # 100 requests × 50 completion tokens × $2e-6 = $0.01 at most, plus the prompts' cost.
    assert "100 requests" in text and "≤ 5,000 completion tokens" in text, text
    line = next(x for x in text.splitlines() if x.startswith("  estimate priced × arith"))
    cost = float(line.rsplit("≤ $", 1)[1])
    prompt = int(line.split("~", 1)[1].split(" prompt", 1)[0].replace(",", ""))
    assert prompt > 100 * 5  # the rendered messages, system prompt included
    assert cost == pytest.approx(prompt * 1e-6 + 0.01, abs=1e-4)
    assert "budget usd 0.005: estimate ≤ $0.01" in text and "may exceed it" in text

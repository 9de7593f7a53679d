"""Run cost from LiteLLM's bundled price list: lookups on a fixed list, then against LiteLLM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from evalgate.run import costs
from evalgate.serve.litellm import litellm_python

PRICES: dict[str, dict[str, Any]] = {
    "gpt-4o-mini": {
        "litellm_provider": "openai",
        "input_cost_per_token": 1.5e-07,
        "output_cost_per_token": 6e-07,
    },
    "gemini/gemini-2.0-flash": {
        "litellm_provider": "gemini",
        "input_cost_per_token": 1e-07,
        "output_cost_per_token": 4e-07,
    },
    "gemini-1.5-pro": {
        "litellm_provider": "vertex_ai-language-models",
        "input_cost_per_token": 1.25e-06,
        "output_cost_per_token": 5e-06,
    },
    "qwen-plus": {"litellm_provider": "dashscope", "tiered_pricing": [{"range": [0, 1]}]},
}


@pytest.fixture
def fixed_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(costs, "_price_list", lambda: PRICES)


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    costs._price_list.cache_clear()
    yield
    costs._price_list.cache_clear()


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o-mini", 1000 * 1.5e-07 + 500 * 6e-07),
        ("openai/gpt-4o-mini", 1000 * 1.5e-07 + 500 * 6e-07),
        ("OpenAI/GPT-4o-mini", 1000 * 1.5e-07 + 500 * 6e-07),
        ("gemini/gemini-2.0-flash", 1000 * 1e-07 + 500 * 4e-07),
        ("vertex_ai/gemini-1.5-pro", 1000 * 1.25e-06 + 500 * 5e-06),  # provider family
    ],
)
def test_listed_models_are_priced(fixed_prices: None, model: str, expected: float) -> None:
    assert costs.cost_usd(model, 1000, 500) == pytest.approx(expected)


@pytest.mark.parametrize(
    "model",
    [
        "openai/smollm2",  # self-hosted behind an OpenAI-compatible server
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        "anthropic/gpt-4o-mini",  # listed, but under another provider
        "dashscope/qwen-plus",  # listed, priced by tiers only
    ],
)
def test_unknown_prices_are_none_not_zero(fixed_prices: None, model: str) -> None:
    assert costs.cost_usd(model, 1000, 500) is None


def test_custom_prices_in_params_win(fixed_prices: None) -> None:
    params = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6, "api_version": "x"}
    assert costs.cost_usd("openai/smollm2", 1000, 500, params=params) == pytest.approx(0.002)
    assert costs.cost_usd(
        "gpt-4o-mini", 1000, 500, params={"output_cost_per_token": 0.0}
    ) == pytest.approx(1000 * 1.5e-07)


def test_zero_tokens_cost_nothing(fixed_prices: None) -> None:
    assert costs.cost_usd("gpt-4o-mini", 0, 0) == 0.0


def test_without_litellm_every_price_is_unknown(
    fresh_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(costs.importlib.util, "find_spec", lambda name: None)
    monkeypatch.delenv("EVALGATE_LITELLM_PYTHON", raising=False)
    assert costs.cost_usd("gpt-4o-mini", 1000, 500) is None


# --- against LiteLLM itself ----------------------------------------------------------------------

STABLE_PROVIDERS = ("openai", "anthropic", "gemini", "mistral", "groq")


def _sample_of_bundled_models(per_provider: int = 8) -> list[str]:
    names: list[str] = []
    for provider in STABLE_PROVIDERS:
        found = [
            key
            for key, info in costs._price_list().items()
            if info.get("litellm_provider") == provider
            and info.get("mode") == "chat"
            and info.get("input_cost_per_token")
        ]
        for key in found[:per_provider]:
            names += [key] if "/" in key else [key, f"{provider}/{key}"]
    return names


@pytest.mark.skipif(litellm_python(os.environ) is None, reason="needs LiteLLM")
def test_matches_litellm_cost_per_token(fresh_cache: None) -> None:
    names = _sample_of_bundled_models()
    assert len(names) >= 40, names
    # In a child process: importing LiteLLM takes seconds and leaves logging and warnings changed.
    script = (
        "import json, sys, litellm\n"
        "names = json.load(sys.stdin)\n"
        "print(json.dumps({n: sum(litellm.cost_per_token(model=n, prompt_tokens=1234, "
        "completion_tokens=567)) for n in names}))\n"
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION"}
    proc = subprocess.run(
        [litellm_python(os.environ) or sys.executable, "-c", script],
        input=json.dumps(names),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    expected = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in names:
        assert costs.cost_usd(name, 1234, 567) == pytest.approx(expected[name]), name

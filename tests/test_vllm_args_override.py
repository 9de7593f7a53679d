"""An escape hatch in `extra_args` replaces the flag evalgate sets by default, rather than
repeating it (vLLM warns on a duplicate and keeps the last: which one wins must not depend on
argparse's order)."""

from __future__ import annotations

import pytest

from evalgate.config.spec import VLLMModel
from evalgate.serve._vllm_args import serve_args


@pytest.mark.parametrize(
    "extra",
    [["--generation-config", "auto"], ["--generation-config=auto"]],
)
def test_the_documented_generation_config_override_is_not_a_duplicate(extra: list[str]) -> None:
    model = VLLMModel(
        name="q", backend="vllm", model="Qwen/Qwen2.5-0.5B-Instruct", extra_args=extra
    )
    args = serve_args(model, served_model_name="q", host="127.0.0.1", port=8000)
    flags = [a.split("=", 1)[0] for a in args]
    assert flags.count("--generation-config") == 1
    assert args[-len(extra) :] == extra  # the user's value, as written


def test_without_an_override_evalgate_sets_its_default() -> None:
    model = VLLMModel(name="q", backend="vllm", model="Qwen/Qwen2.5-0.5B-Instruct")
    args = serve_args(model, served_model_name="q", host="127.0.0.1", port=8000)
    assert args[args.index("--generation-config") + 1] == "vllm"

"""LiteLLM's real proxy with a fallback route (`router_settings.fallbacks`): the primary's
upstream fails, the fallback's answers. evalgate (`proxy_url`) records the model that answered
per rollout and names it on the scorecard: what the proxy really sends back (the response's
`model`, its `x-litellm-attempted-fallbacks` header), not a scripted imitation of it.

Skipped without LiteLLM's proxy (EVALGATE_LITELLM_PYTHON or the litellm extra)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from evalgate.serve._process import stop_group
from evalgate.serve.litellm import litellm_python
from tests.conftest import answer_arith, read_jsonl, write_config

pytestmark = pytest.mark.skipif(
    litellm_python(os.environ) is None,
    reason="needs LiteLLM: pip install -e '.[litellm]' (or EVALGATE_LITELLM_PYTHON)",
)

MASTER = "sk-fallback-test-master"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the proxy exited at start-up"
        request = urllib.request.Request(
            f"{url}/v1/models", headers={"Authorization": f"Bearer {MASTER}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError("the proxy never answered")


@pytest.mark.slow
def test_a_fallback_served_run_is_recorded_as_the_fallback(
    tmp_path: Path, scripted_server: Any
) -> None:
    broken = scripted_server(lambda body, n: (500, '{"error": {"message": "down"}}', {}))
    fallback = scripted_server(answer_arith)
    config = tmp_path / "proxy.yaml"
    config.write_text(
        f"""
model_list:
  - model_name: gpt-4o
    litellm_params: {{model: openai/gpt-4o, api_base: "{broken.base_url}", api_key: sk-x}}
  - model_name: gpt-4o-mini
    litellm_params: {{model: openai/gpt-4o-mini, api_base: "{fallback.base_url}", api_key: sk-x}}
router_settings:
  fallbacks: [{{gpt-4o: [gpt-4o-mini]}}]
  num_retries: 0
litellm_settings: {{num_retries: 0}}
general_settings: {{master_key: {MASTER}}}
"""
    )
    port = _free_port()
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_MODE": "PRODUCTION",
        "PYTHONUNBUFFERED": "1",
    }
    log = (tmp_path / "proxy.log").open("wb")
    proc = subprocess.Popen(
        [
            str(litellm_python(os.environ)),
            "-c",
            "from litellm.proxy.proxy_cli import run_server; run_server()",
            *("--config", str(config), "--host", "127.0.0.1", "--port", str(port)),
            *("--telemetry", "False"),
        ],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        _wait_healthy(f"http://127.0.0.1:{port}", proc)
        evals = write_config(
            tmp_path,
            f"""
models:
  - name: routed
    backend: litellm
    model: gpt-4o
    proxy_url: "http://127.0.0.1:{port}/v1"
    api_key_env: EVALGATE_TEST_PROXY_KEY
benchmarks: [{{name: arith, kind: arith, size: 4, eval: {{max_retries: 0}}}}]
""",
        )
        out = tmp_path / "out"
        code = main(
            ["local", str(evals), "--output", str(out)],
            environ={"CI": "1", "EVALGATE_TEST_PROXY_KEY": MASTER},
        )
    finally:
        stop_group(proc)
        log.close()
    assert code == 0, (tmp_path / "proxy.log").read_text()[-3000:]
    assert broken.requests and len(fallback.requests) == 4  # the fallback answered every item
    (run_dir,) = (out / "evals").glob("*/*")
    records = read_jsonl(run_dir / "results.jsonl")
    assert len(records) == 4 and all(r["reward"] == 1.0 for r in records)
    served = [set(r.get("served_by") or {}) for r in records]
    assert all(s and all("gpt-4o-mini" in name for name in s) for s in served), served
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["fallback_rollouts"] == 4
    assert "a fallback" in (out / "scorecard.md").read_text()


@pytest.mark.slow
def test_own_proxy_params_fallbacks_are_recorded_and_priced_as_the_fallback(
    tmp_path: Path, scripted_server: Any
) -> None:
    """evalgate's own proxy (no proxy_url) with `params.fallbacks` and its primary dead: LiteLLM
    answers in the primary's name with `x-litellm-attempted-fallbacks: 0`; only its api-base
    and cost headers say the fallback answered. Each reply is recorded as the fallback's and
    priced at the proxy's own cost header (the fallback's price), never the primary's."""
    from evalgate.run.costs import cost_usd

    fallback = scripted_server(answer_arith)
    dead = f"http://127.0.0.1:{_free_port()}/v1"  # nothing listens: the primary is down
    evals = write_config(
        tmp_path,
        f"""
models:
  - name: routed
    backend: litellm
    model: openai/gpt-4o
    api_base: "{dead}"
    api_key_env: EVALGATE_TEST_PRIMARY_KEY
    params:
      fallbacks:
        - model: openai/gpt-4o-mini
          api_base: "{fallback.base_url}"
          api_key: os.environ/EVALGATE_TEST_FALLBACK_KEY
benchmarks: [{{name: arith, kind: arith, size: 4, eval: {{max_retries: 0}}}}]
""",
    )
    out = tmp_path / "out"
    environ = {
        "CI": "1",
        "EVALGATE_TEST_PRIMARY_KEY": "sk-primary",
        "EVALGATE_TEST_FALLBACK_KEY": "sk-fallback",
        **{k: v for k, v in os.environ.items() if k in ("EVALGATE_LITELLM_PYTHON", "PATH")},
    }
    code = main(["local", str(evals), "--output", str(out)], environ=environ)
    assert code == 0
    assert len(fallback.requests) == 4  # the fallback answered every item
    (run_dir,) = (out / "evals").glob("*/*")
    records = read_jsonl(run_dir / "results.jsonl")
    assert len(records) == 4 and all(r["reward"] == 1.0 for r in records)
    for rec in records:  # named as the reply names it (the upstream's own name, no provider)
        ((name, seen),) = rec["served_by"].items()
        assert name.endswith("gpt-4o-mini"), rec["served_by"]
        assert seen["priced"] == 1 and seen["cost_usd"] > 0  # the proxy's cost header
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["fallback_rollouts"] == 4
    proxy_said = sum(s["cost_usd"] for r in records for s in r["served_by"].values())
    tokens = meta["usage"]["prompt_tokens"], meta["usage"]["completion_tokens"]
    mini, primary = cost_usd("openai/gpt-4o-mini", *tokens), cost_usd("openai/gpt-4o", *tokens)
    assert meta["cost_usd"] == pytest.approx(proxy_said)
    assert meta["cost_usd"] == pytest.approx(mini) and primary > 10 * meta["cost_usd"]
    scorecard = (out / "scorecard.md").read_text()
    assert "a fallback" in scorecard and "4 of 4 rollouts, by `gpt-4o-mini`" in scorecard

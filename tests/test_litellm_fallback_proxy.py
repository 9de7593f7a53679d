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

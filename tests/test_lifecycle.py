"""deploy / status / stop for persistent Modal deployments, with Modal replaced by a recorder
(the real modal objects are still built, offline)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalgate.config.load import load_config
from evalgate.errors import ConfigError, UsageError
from evalgate.serve import lifecycle
from tests.test_chat_template import hub_cache
from tests.test_modal_vllm import FakeOps, _ColdEndpoint

CONFIG = """
models:
  - name: big
    backend: modal-vllm
    model: Qwen/Qwen3-8B
    mode: persistent
  - name: scratch
    backend: modal-vllm
    model: Qwen/Qwen3-0.6B
    gpu: L4
  - name: smollm2
    backend: local
benchmarks: [math500]
"""


@pytest.fixture
def config(tmp_path: Path):
    path = tmp_path / "evals.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    return load_config(path)


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    for model in ("Qwen/Qwen3-8B", "Qwen/Qwen3-0.6B"):  # their tokenizers, as if fetched
        hub_cache(tmp_path / "hub", model)
    return {"EVALGATE_VLLM_API_KEY": "team-key", "HF_HUB_CACHE": str(tmp_path / "hub")}


def _no_key(environ: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in environ.items() if k != "EVALGATE_VLLM_API_KEY"}


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(lifecycle.ModalVLLMServer, "health_interval_s", 0.05)
    server = _ColdEndpoint("big", cold=1)
    yield server
    server.close()


def test_deploy_builds_and_deploys_persistent_models_only(config, environ, tmp_path) -> None:
    pytest.importorskip("modal")
    ops = FakeOps("https://example.invalid")
    results = lifecycle.deploy(config, environ=environ, ops=ops, log=lambda _: None)
    assert [r.app_name for r in results] == ["evalgate-big"]
    (result,) = results
    assert result.state == "deployed" and result.model == "big"
    assert ops.calls == ["deploy evalgate-big", "close"]
    app, function = ops.apps[0]
    assert app.name == "evalgate-big" and function._spec_.gpus == "H100:1"
    # The digest a later run will compare with travels as a tag of the deployed app.
    assert result.digest is not None and len(result.digest) == 16
    assert "evalgate-big" in result.line() and "deployed" in result.line()


def test_deploy_wait_reports_ready(config, environ, endpoint) -> None:
    pytest.importorskip("modal")
    (result,) = lifecycle.deploy(
        config, environ=environ, ops=FakeOps(endpoint.url), wait=True, log=lambda _: None
    )
    assert result.state == "ready" and endpoint.keys[-1] == "Bearer team-key"


def test_deploy_refusals(config, environ) -> None:
    with pytest.raises(UsageError, match="'scratch' has mode: ephemeral"):
        lifecycle.deploy(config, environ=environ, models=["scratch"], ops=FakeOps("u"))
    with pytest.raises(UsageError, match="no modal-vllm model named 'nope'"):
        lifecycle.deploy(config, environ=environ, models=["nope"], ops=FakeOps("u"))
    with pytest.raises(ConfigError, match="EVALGATE_VLLM_API_KEY"):
        lifecycle.deploy(config, environ=_no_key(environ), ops=FakeOps("u"))


def test_status_reports_each_state(config, environ, endpoint) -> None:
    (missing,) = lifecycle.status(config, environ=_no_key(environ), ops=FakeOps("u", tags=None))
    assert missing.state == "not deployed"  # and no key was needed to say so
    stale = FakeOps("u", tags={"evalgate-digest": "0" * 16})
    (outdated,) = lifecycle.status(config, environ=environ, ops=stale)
    assert outdated.state == "outdated" and "run deploy" in outdated.detail
    server = lifecycle._server(config, config.models[0], environ, Path("."))
    spec, _ = server.prepare()
    good = FakeOps(endpoint.url, tags={"evalgate-digest": spec.digest()})
    (deployed,) = lifecycle.status(config, environ=environ, ops=good)
    assert deployed.state == "deployed" and endpoint.polls == 0  # not woken up
    (probed,) = lifecycle.status(config, environ=environ, ops=good, probe=True)
    assert probed.state == "ready"


def test_stop_by_config_or_all(config, environ) -> None:
    ops = FakeOps("u")
    results = lifecycle.stop(config, environ=environ, ops=ops)
    assert [(r.app_name, r.state) for r in results] == [
        ("evalgate-big", "stopped"),
        ("evalgate-scratch", "stopped"),
    ]
    ops = FakeOps("u")
    (old,) = lifecycle.stop(None, environ=environ, all_apps=True, ops=ops)
    assert (old.app_name, old.model, old.state) == ("evalgate-old", "old", "stopped")
    assert "stop ap-old" in ops.calls  # by app id: an ephemeral app has no name to look up
    with pytest.raises(UsageError, match="--all"):
        lifecycle.stop(None, environ=environ, ops=FakeOps("u"))

"""The `litellm` backend offline: generated config, keys, tracing switch, and the proxy's lifecycle.

Lifecycle tests run a stand-in for the LiteLLM proxy (a small HTTP server that reads the generated
config the way the proxy does and forks a worker into its process group), so they need neither
LiteLLM nor the network. The real proxy is exercised in tests/test_litellm_proxy.py.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.config.spec.models import LiteLLMModel
from evalgate.errors import ConfigError, InfraError
from evalgate.serve import ServeContext, tracing
from evalgate.serve import litellm as lt
from evalgate.serve.registry import open_server

PROVIDER_KEY = "sk-provider-value-that-must-not-leak"

FAKE_PROXY = textwrap.dedent(
    """
    import http.server, json, os, subprocess, sys, time
    import yaml

    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    config = yaml.safe_load(open(args["--config"]))
    mode = os.environ.get("FAKE_PROXY_MODE", "ok")
    with open("starts", "a") as f:
        f.write("start\\n")
    if mode == "busy-once" and len(open("starts").read().split()) == 1:
        print("ERROR:    [Errno 98] error while attempting to bind on address "
              "('127.0.0.1', 1): address already in use", flush=True)
        sys.exit(1)
    if mode == "exit":
        print("ValueError: bad model_list entry", flush=True)
        print("INFO:     Application shutdown complete.", flush=True)
        sys.exit(3)

    def resolve(value):  # what the proxy does with os.environ/NAME
        if isinstance(value, str) and value.startswith("os.environ/"):
            return os.environ[value.split("/", 1)[1]]
        return value

    master = resolve(config["general_settings"]["master_key"])
    entry = config["model_list"][0]
    resolved = {k: resolve(v) for k, v in entry["litellm_params"].items()}
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    with open("pids", "w") as f:
        json.dump({"proxy": os.getpid(), "worker": worker.pid, "resolved": resolved}, f)
    listed = "someone-else" if mode == "unlisted" else entry["model_name"]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if mode == "hang":
                time.sleep(0.5)
            ok = self.headers.get("Authorization") == f"Bearer {master}"
            body = json.dumps({"data": [{"id": listed}]} if ok else {"error": "auth"}).encode()
            self.send_response(200 if ok else 401)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body if mode != "hang" else b"")

        def log_message(self, *a):
            pass

    server = http.server.HTTPServer((args["--host"], int(args["--port"])), Handler)
    server.serve_forever()
    """
)


class FakeProxyServer(lt.LiteLLMServer):
    def command(self, config: Path, port: int) -> list[str]:
        script = config.parent / "fake_proxy.py"
        script.write_text(FAKE_PROXY, encoding="utf-8")
        return [sys.executable, str(script), "--config", str(config), "--host", "127.0.0.1",
                "--port", str(port)]  # fmt: skip


def _model(**fields: Any) -> LiteLLMModel:
    return LiteLLMModel(**{"name": "m", "backend": "litellm", "model": "groq/llama-x", **fields})


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def _gone(*pids: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Build a FakeProxyServer for a model; LiteLLM itself need not be installed."""
    monkeypatch.setattr(lt, "_litellm_installed", lambda *a: True)

    def make(model: LiteLLMModel, environ: dict[str, str] | None = None, mode: str = "ok"):
        env = {"FAKE_PROXY_MODE": mode, **(environ or {})}
        return FakeProxyServer(model, log_dir=tmp_path / "logs", environ=env)

    return make


# --- the generated config ---------------------------------------------------------------------


def test_config_routes_the_model_with_key_references_only() -> None:
    model = _model(
        model="azure/gpt-4o",
        api_key_env="AZ_KEY",
        api_base="https://example.invalid/openai",
        params={"api_version": "2024-10-21", "aws_secret_access_key": "os.environ/AWS_SECRET"},
    )
    config = lt.proxy_config(model, {"AZ_KEY": PROVIDER_KEY})
    (entry,) = config["model_list"]
    assert entry == {
        "model_name": "azure/gpt-4o",
        "litellm_params": {
            "model": "azure/gpt-4o",
            "api_base": "https://example.invalid/openai",
            "api_key": "os.environ/AZ_KEY",
            "api_version": "2024-10-21",
            "aws_secret_access_key": "os.environ/AWS_SECRET",
        },
    }
    assert config["general_settings"] == {"master_key": f"os.environ/{lt.MASTER_KEY_ENV}"}
    settings = config["litellm_settings"]
    assert settings["num_retries"] == 0 and settings["drop_params"] is True
    assert PROVIDER_KEY not in yaml.safe_dump(config)


def test_openai_provider_without_any_key_is_a_config_error() -> None:
    model = _model(model="openai/smollm2", api_base="http://127.0.0.1:8080/v1")
    with pytest.raises(ConfigError, match="needs a key: set api_key_env"):
        lt.proxy_config(model, {})
    assert lt.proxy_config(model, {"OPENAI_API_KEY": "x"})  # LiteLLM's own default applies


def test_config_without_key_or_base_leaves_them_to_litellm() -> None:
    (entry,) = lt.proxy_config(_model(model="gemini/gemini-2.0-flash"), {})["model_list"]
    assert entry["litellm_params"] == {"model": "gemini/gemini-2.0-flash"}


def test_params_fallbacks_become_router_fallbacks() -> None:
    """Left in litellm_params, LiteLLM answers a fallback's reply in the primary's name (no
    fallback header): as deployments behind router fallbacks the reply names the fallback
    (tests/test_litellm_fallback_proxy.py runs the real proxy)."""
    model = _model(
        model="openai/gpt-4o",
        api_key_env="KEY",
        api_base="http://primary.invalid/v1",
        params={
            "timeout": 30,
            "fallbacks": [
                {"model": "openai/gpt-4o-mini", "api_base": "http://fallback.invalid/v1"},
                "openai/gpt-4o-mini",  # a name alone: the primary's params, another model
                {"model": "openai/gpt-4o", "api_base": "http://other.invalid/v1"},
            ],
        },
    )
    config = lt.proxy_config(model, {})
    primary, *fallbacks = config["model_list"]
    base = {"api_key": "os.environ/KEY", "timeout": 30}
    assert primary == {
        "model_name": "openai/gpt-4o",
        "litellm_params": {
            "model": "openai/gpt-4o",
            "api_base": "http://primary.invalid/v1",
            **base,
        },
    }
    assert [f["model_name"] for f in fallbacks] == [
        "openai/gpt-4o-mini",
        "openai/gpt-4o-mini (fallback 2)",
        "openai/gpt-4o (fallback 3)",
    ]
    assert fallbacks[0]["litellm_params"] == {
        "model": "openai/gpt-4o-mini", "api_base": "http://fallback.invalid/v1", **base
    }  # fmt: skip
    assert fallbacks[1]["litellm_params"]["api_base"] == "http://primary.invalid/v1"
    names = [f["model_name"] for f in fallbacks]
    assert config["router_settings"] == {"fallbacks": [{"openai/gpt-4o": names}], "num_retries": 0}
    assert "router_settings" not in lt.proxy_config(_model(), {})


@pytest.mark.parametrize("param", ["api_key", "model", "api_base"])
def test_params_may_not_shadow_a_field(param: str) -> None:
    with pytest.raises(ConfigError, match=param):
        lt.proxy_config(_model(params={param: "x"}), {})


def test_proxy_environment_passes_the_run_environment_through() -> None:
    env = lt.proxy_environment(
        {"AZ_KEY": PROVIDER_KEY, "LANGFUSE_HOST": "http://127.0.0.1:1"}, "mk"
    )
    assert env["AZ_KEY"] == PROVIDER_KEY and env["LANGFUSE_HOST"] == "http://127.0.0.1:1"
    assert env[lt.MASTER_KEY_ENV] == "mk"
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"  # never fetch the price list
    assert env["LITELLM_MODE"] == "PRODUCTION"  # never load a .env
    assert "PATH" in env


def test_proxy_environment_never_holds_the_jobs_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """The proxy runs the candidate's LiteLLM settings: the runner's token, the Action's inputs
    and the Actions runtime's tokens stay with the gate (from the run or this process)."""
    monkeypatch.setenv("ACTIONS_RUNTIME_TOKEN", "rt-secret")
    env = lt.proxy_environment(
        {"GITHUB_TOKEN": "ghs-1", "INPUT_GITHUB_TOKEN": "ghs-2", "RUNNER_TEMP": "/t",
         "OPENAI_API_KEY": PROVIDER_KEY},
        "mk",
    )  # fmt: skip
    assert not [k for k in env if k.startswith(("GITHUB_", "INPUT_", "ACTIONS_", "RUNNER_"))]
    assert env["OPENAI_API_KEY"] == PROVIDER_KEY  # a provider's key is the proxy's to use


# --- Langfuse tracing switch (offline: only the config is checked) ------------------------------

KEYS = {"LANGFUSE_PUBLIC_KEY": "pk-lf-1", "LANGFUSE_SECRET_KEY": "sk-lf-1"}


@pytest.mark.parametrize(
    "environ",
    [{}, {"LANGFUSE_PUBLIC_KEY": "pk-lf-1"}, {"LANGFUSE_SECRET_KEY": "sk-lf-1"},
     {**KEYS, "LANGFUSE_SECRET_KEY": ""}, {"LANGFUSE_HOST": "http://127.0.0.1:1"}],
)  # fmt: skip
def test_tracing_is_off_without_both_keys(environ: dict[str, str]) -> None:
    assert not tracing.langfuse_enabled(environ)
    settings = lt.proxy_config(_model(), environ)["litellm_settings"]
    assert "success_callback" not in settings and "failure_callback" not in settings


def test_tracing_is_on_with_both_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "_langfuse_installed", lambda environ: True)
    environ = {**KEYS, "LANGFUSE_HOST": "http://127.0.0.1:1"}
    config = lt.proxy_config(_model(), environ)
    assert config["litellm_settings"]["success_callback"] == ["langfuse"]
    assert config["litellm_settings"]["failure_callback"] == ["langfuse"]
    text = yaml.safe_dump(config)
    assert all(value not in text for value in environ.values())  # the proxy reads them from env


def test_tracing_keys_without_the_sdk_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "_langfuse_installed", lambda environ: False)
    with pytest.raises(ConfigError, match="langfuse"):
        lt.proxy_config(_model(), KEYS)


# --- proxy_url: an existing proxy ---------------------------------------------------------------


def test_proxy_url_yields_that_endpoint_with_its_key(tmp_path: Path) -> None:
    model = _model(proxy_url="http://127.0.0.1:4000/v1/", api_key_env="PROXY_KEY")
    with lt.LiteLLMServer(model, log_dir=tmp_path, environ={"PROXY_KEY": "sk-p"}) as endpoint:
        assert endpoint.base_url == "http://127.0.0.1:4000/v1"
        assert endpoint.model == endpoint.model_id == "groq/llama-x"
        assert endpoint.api_key == "sk-p"
    assert not list(tmp_path.iterdir())  # nothing started, nothing written


def test_proxy_url_without_key_env_sends_no_key(tmp_path: Path) -> None:
    server = lt.LiteLLMServer(_model(proxy_url="http://127.0.0.1:4000/v1"), log_dir=tmp_path,
                              environ={})  # fmt: skip
    assert server.log_path is None
    with server as endpoint:
        assert endpoint.api_key is None


def test_proxy_url_with_missing_key_is_a_config_error(tmp_path: Path) -> None:
    model = _model(proxy_url="http://127.0.0.1:4000/v1", api_key_env="PROXY_KEY")
    with pytest.raises(ConfigError, match="PROXY_KEY"):
        lt.LiteLLMServer(model, log_dir=tmp_path, environ={}).__enter__()


def test_proxy_url_rejects_settings_only_a_started_proxy_uses(tmp_path: Path) -> None:
    model = _model(proxy_url="http://127.0.0.1:4000/v1", params={"api_version": "1"})
    with pytest.raises(ConfigError, match="params cannot apply with proxy_url"):
        lt.LiteLLMServer(model, log_dir=tmp_path, environ={}).__enter__()


def test_command_binds_loopback_with_telemetry_off(tmp_path: Path) -> None:
    server = lt.LiteLLMServer(_model(), log_dir=tmp_path, environ={})
    cmd = server.command(tmp_path / "c.yaml", 4321)
    assert cmd[0] == sys.executable
    args = dict(zip(cmd[3::2], cmd[4::2], strict=True))
    assert args == {
        "--config": str(tmp_path / "c.yaml"),
        "--host": "127.0.0.1",
        "--port": "4321",
        "--telemetry": "False",
    }
    server.num_workers = 2
    assert server.command(tmp_path / "c.yaml", 4321)[-2:] == ["--num_workers", "2"]


def test_registry_maps_the_backend(tmp_path: Path) -> None:
    server = open_server(_model(), ServeContext(log_dir=tmp_path, environ={}))
    assert isinstance(server, lt.LiteLLMServer)


# --- a started proxy's lifecycle (stand-in process) ---------------------------------------------


def _pids(server: lt.LiteLLMServer) -> dict[str, Any]:
    assert server.log_path is not None
    return json.loads((server.log_path.parent / "pids").read_text())


def test_started_proxy_is_healthy_locked_and_always_stopped(fake: Any) -> None:
    server = fake(_model(api_key_env="UP_KEY"), {"UP_KEY": PROVIDER_KEY})
    with server as endpoint:
        assert endpoint.base_url.startswith("http://127.0.0.1:")
        assert endpoint.base_url.endswith("/v1")
        assert endpoint.model == endpoint.model_id == "groq/llama-x"
        assert endpoint.api_key and endpoint.api_key.startswith("sk-evalgate-")
        request = urllib.request.Request(
            f"{endpoint.base_url}/models", headers={"Authorization": f"Bearer {endpoint.api_key}"}
        )
        with urllib.request.urlopen(request, timeout=5) as resp:
            assert json.loads(resp.read())["data"][0]["id"] == "groq/llama-x"
        pids = _pids(server)
        assert pids["resolved"]["api_key"] == PROVIDER_KEY  # the reference resolved in the proxy
        config_text = server.config_path.read_text()  # type: ignore[union-attr]
        assert PROVIDER_KEY not in config_text and endpoint.api_key not in config_text
        assert _alive(pids["proxy"]) and _alive(pids["worker"])
    assert _gone(pids["proxy"], pids["worker"]), "the proxy's process group survived"


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt()])
def test_proxy_is_stopped_on_error_and_ctrl_c(fake: Any, exc: BaseException) -> None:
    server = fake(_model())
    with pytest.raises(type(exc)), server:
        pids = _pids(server)
        raise exc
    assert _gone(pids["proxy"], pids["worker"])


def test_ctrl_c_during_start_up_stops_the_proxy(fake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    server = fake(_model())

    def interrupted(self: lt.LiteLLMServer, base: str, key: str) -> None:
        while not (self.log_path.parent / "pids").exists():  # type: ignore[union-attr]
            time.sleep(0.05)
        raise KeyboardInterrupt

    monkeypatch.setattr(FakeProxyServer, "_wait_healthy", interrupted)
    with pytest.raises(KeyboardInterrupt):
        server.__enter__()
    pids = _pids(server)
    assert _gone(pids["proxy"], pids["worker"])


def test_proxy_that_exits_is_an_infra_error_naming_why(fake: Any) -> None:
    server = fake(_model(), mode="exit")
    with pytest.raises(InfraError, match=r"exited with code 3: ValueError: bad model_list") as err:
        server.__enter__()
    assert str(server.log_path) in str(err.value)
    starts = (server.log_path.parent / "starts").read_text().split()  # type: ignore[union-attr]
    assert len(starts) == 1  # not a port race: no second try


def test_a_port_taken_before_the_proxy_binds_it_is_retried(fake: Any) -> None:
    server = fake(_model(), mode="busy-once")
    with server as endpoint:
        assert endpoint.base_url.startswith("http://127.0.0.1:")
        pids = _pids(server)
    starts = (server.log_path.parent / "starts").read_text().split()  # type: ignore[union-attr]
    assert len(starts) == 2
    assert _gone(pids["proxy"], pids["worker"])


def test_proxy_that_never_gets_healthy_times_out_and_is_stopped(fake: Any) -> None:
    server = fake(_model(), mode="hang")
    server.startup_timeout_s = 1.5
    with pytest.raises(InfraError, match="no healthy answer within 2 s"):
        server.__enter__()
    pids = _pids(server)
    assert _gone(pids["proxy"], pids["worker"])


def test_proxy_that_does_not_route_the_model_fails(fake: Any) -> None:
    with pytest.raises(InfraError, match="does not list 'groq/llama-x'"):
        fake(_model(), mode="unlisted").__enter__()


def test_missing_provider_key_fails_before_starting(fake: Any) -> None:
    server = fake(_model(api_key_env="UP_KEY"))
    with pytest.raises(ConfigError, match="UP_KEY"):
        server.__enter__()
    assert not server.log_path.parent.exists()  # type: ignore[union-attr]


def test_litellm_not_installed_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lt, "_litellm_installed", lambda *a: False)
    with pytest.raises(InfraError, match=r"evalgate-action\[litellm\]"):
        lt.LiteLLMServer(_model(), log_dir=tmp_path, environ={}).__enter__()

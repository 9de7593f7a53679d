"""The Modal backend, offline: the app description, the real modal objects built from it (with
the network blocked), the pickled container entry, and the server's flows against a stand-in for
Modal that serves a cold OpenAI-compatible endpoint on loopback."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from evalgate.config.spec import ModalVLLMModel
from evalgate.errors import ConfigError, InfraError
from evalgate.serve import ServeContext, modal_vllm
from evalgate.serve._cuda import cuda_image
from evalgate.serve.chat_template import ChatTemplate
from evalgate.serve.modal_vllm import (
    ModalVLLMServer,
    app_name_for,
    build_app,
    describe,
    secret_values,
)
from evalgate.serve.registry import open_server
from tests.test_chat_template import hub_cache

PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def _model(**extra: Any) -> ModalVLLMModel:
    fields = {
        "name": "Qwen3.8B",
        "backend": "modal-vllm",
        "model": "Qwen/Qwen3-8B",
        "revision": "b" * 40,
        "gpu": "H100:2",
        "tensor_parallel_size": 2,
        "max_model_len": 16384,
        "gpu_memory_utilization": 0.92,
        "enable_prefix_caching": False,
        "trust_remote_code": True,
    }
    return ModalVLLMModel.model_validate({**fields, **extra})


# The model's own template (vLLM reads it; nothing is passed): what most models resolve to.
DEFERRED = ChatTemplate(source="tokenizer", path="/hub/tokenizer_config.json", sha256="t" * 64)


def test_description_of_the_app() -> None:
    spec = describe(_model(), chat_template=DEFERRED, secret_env=["VLLM_API_KEY", "HF_TOKEN"])
    assert spec.app_name == "evalgate-qwen3-8b"
    assert spec.mode == "ephemeral"
    assert spec.gpu == "H100:2"
    assert spec.python_version == PY
    assert spec.packages == ("vllm==0.33.0",)
    assert spec.volumes == {
        "/root/.cache/huggingface": "evalgate-hf-cache",
        "/root/.cache/vllm": "evalgate-vllm-cache",
    }
    assert spec.secret_env == ("HF_TOKEN", "VLLM_API_KEY")
    assert spec.startup_timeout_s == 1200
    assert spec.timeout_s == 3600
    assert spec.scaledown_window_s == 300
    assert spec.max_containers == 1
    assert spec.port == 8000
    assert spec.command == (
        "vllm",
        "serve",
        "Qwen/Qwen3-8B",
        "--served-model-name",
        "Qwen3.8B",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--revision",
        "b" * 40,
        "--tokenizer-revision",
        "b" * 40,
        "--dtype",
        "auto",
        "--tensor-parallel-size",
        "2",
        "--data-parallel-size",
        "1",
        "--max-model-len",
        "16384",
        "--gpu-memory-utilization",
        "0.92",
        "--no-enable-prefix-caching",
        "--trust-remote-code",
        "--generation-config",
        "vllm",
    )
    assert spec.chat_template_path is None
    assert spec.tags == {
        "managed-by": "evalgate",
        "evalgate-model": "Qwen3.8B",
        "evalgate-mode": "ephemeral",
        "evalgate-digest": spec.digest(),
    }
    # Secrets and scaling do not change what is measured; the command line does.
    assert describe(_model(), chat_template=DEFERRED).digest() == spec.digest()
    assert describe(_model(scaledown_window_s=60), chat_template=DEFERRED).digest() == (
        spec.digest()
    )
    assert describe(_model(max_model_len=8192), chat_template=DEFERRED).digest() != spec.digest()


def test_template_is_shipped_and_named_in_the_command(tmp_path: Path) -> None:
    template = tmp_path / "t.jinja"
    template.write_text("{{ messages }}", encoding="utf-8")
    chosen = ChatTemplate(source="repo", path=str(template), sha256="c" * 64)
    spec = describe(_model(), chat_template=chosen)
    assert spec.command[-2:] == ("--chat-template", "/root/evalgate/chat_template.jinja")
    assert spec.chat_template_sha256 == "c" * 64
    other = ChatTemplate(source="repo", path=str(template), sha256="d" * 64)
    assert describe(_model(), chat_template=other).digest() != spec.digest()


def test_gpu_count_must_match_parallelism() -> None:
    with pytest.raises(ConfigError, match=r"has 1 GPU\(s\).*= 2.*gpu: H100:2"):
        describe(_model(gpu="H100"), chat_template=DEFERRED)
    spec = describe(
        _model(gpu="A100-80GB:4", tensor_parallel_size=2, data_parallel_size=2),
        chat_template=DEFERRED,
    )
    assert "--data-parallel-size" in spec.command
    assert spec.command[spec.command.index("--data-parallel-size") + 1] == "2"


def test_extra_args_cannot_shadow_fields() -> None:
    with pytest.raises(ConfigError, match="--max-model-len is set from its own field"):
        describe(_model(extra_args=["--max-model-len=4096"]), chat_template=DEFERRED)
    with pytest.raises(ConfigError, match="API key comes from the environment"):
        describe(_model(extra_args=["--api-key", "x"]), chat_template=DEFERRED)
    spec = describe(_model(extra_args=["--generation-config", "auto"]), chat_template=DEFERRED)
    assert spec.command[-2:] == ("--generation-config", "auto")  # last wins in argparse


def test_app_name_and_secrets() -> None:
    assert app_name_for(_model(app_name="my-app")) == "my-app"
    model = _model(hf_token_env="MY_HF")
    assert secret_values(model, {"MY_HF": "hf_x"}, api_key="k") == {
        "VLLM_API_KEY": "k",
        "HF_TOKEN": "hf_x",
    }
    assert secret_values(model, {}, api_key="k") == {"VLLM_API_KEY": "k"}


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: socket.socket, address: Any) -> None:
        raise AssertionError(f"network access attempted: {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


def test_real_modal_objects_are_built_offline(no_network: None) -> None:
    pytest.importorskip("modal")
    import modal

    assert modal.__version__ == modal_vllm.MODAL_PIN
    spec = describe(_model(), chat_template=DEFERRED, secret_env=["VLLM_API_KEY", "HF_TOKEN"])
    app, function = build_app(
        spec, secret_values={"VLLM_API_KEY": "k", "HF_TOKEN": "t"}, template_text=None
    )
    assert isinstance(app, modal.App) and isinstance(function, modal.Function)
    assert app.name == "evalgate-qwen3-8b"
    # modal 1.6.4 keeps the function's resources in a private spec; pinned, so read it.
    resources = function._spec_
    assert resources.gpus == "H100:2"
    assert {p: v.name for p, v in resources.volumes.items()} == spec.volumes
    assert len(resources.secrets) == 1
    with pytest.raises(ConfigError, match="HF_TOKEN"):
        build_app(spec, secret_values={"VLLM_API_KEY": "k"}, template_text=None)


def test_container_entry_is_self_contained(tmp_path: Path) -> None:
    """The pickled entry runs in a Python that cannot import evalgate: it writes the template
    and starts the command, as it will in the container."""
    pytest.importorskip("modal")
    from modal._serialization import serialize

    marker = tmp_path / "started"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w').write('ok')"]
    template_path = tmp_path / "deep" / "chat_template.jinja"
    entry = modal_vllm._serve_function(command, "TEMPLATE", str(template_path))
    blob = tmp_path / "entry.pkl"
    blob.write_bytes(serialize(entry))
    script = (
        "import sys, pickle, time, os\n"
        "sys.modules['evalgate'] = None\n"  # any reference to evalgate would fail to load
        f"fn = pickle.loads(open({str(blob)!r}, 'rb').read())\n"
        "fn()\n"
        f"deadline = time.time() + 20\n"
        f"while not os.path.exists({str(marker)!r}) and time.time() < deadline: time.sleep(0.05)\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, cwd=tmp_path, timeout=60)
    assert template_path.read_text(encoding="utf-8") == "TEMPLATE"
    assert marker.read_text(encoding="utf-8") == "ok"


# ---------------------------------------------------------------------------------------------
# The server's flows, with Modal replaced by a loopback endpoint


class _ColdEndpoint:
    """/health: 503 for the first ``cold`` polls; /v1/models: needs a Bearer key."""

    def __init__(self, served: str, cold: int = 2) -> None:
        self.cold, self.polls, self.served, self.keys = cold, 0, served, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_GET(self) -> None:
                status, body = 404, {}
                if self.path == "/health":
                    outer.polls += 1
                    status = 503 if outer.polls <= outer.cold else 200
                elif self.path == "/v1/models":
                    outer.keys.append(self.headers.get("Authorization"))
                    status, body = 200, {"data": [{"id": outer.served}]}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class FakeOps:
    """Records what a ModalOps would have done."""

    def __init__(self, url: str, tags: dict[str, str] | None = None) -> None:
        self.url, self._tags = url, tags
        self.calls: list[str] = []
        self.apps: list[Any] = []

    def run_ephemeral(self, app: Any, function: Any, stack: contextlib.ExitStack) -> str:
        self.calls.append(f"run {app.name}")
        self.apps.append((app, function))
        stack.callback(lambda: self.calls.append(f"stopped {app.name}"))
        return self.url

    def deploy(self, app: Any, function: Any) -> str:
        self.calls.append(f"deploy {app.name}")
        self.apps.append((app, function))
        return self.url

    def tags(self, app_name: str) -> dict[str, str] | None:
        self.calls.append(f"tags {app_name}")
        return self._tags

    def web_url(self, app_name: str) -> str | None:
        return self.url if self._tags is not None else None

    def stop(self, app_name: str) -> bool:
        self.calls.append(f"stop {app_name}")
        return True

    def managed_apps(self) -> list[tuple[str, str, dict[str, str]]]:
        return [("ap-old", "evalgate-old", {"managed-by": "evalgate", "evalgate-model": "old"})]

    def close(self) -> None:
        self.calls.append("close")


@pytest.fixture
def cold_endpoint() -> Iterator[_ColdEndpoint]:
    endpoint = _ColdEndpoint("Qwen3.8B")
    yield endpoint
    endpoint.close()


def _cached(tmp_path: Path) -> str:
    """A hub cache holding the model's tokenizer (with a template) at its pinned revision."""
    hub_cache(tmp_path / "hub", "Qwen/Qwen3-8B", commit="b" * 40)
    return str(tmp_path / "hub")


def _server(tmp_path: Path, ops: FakeOps, model: ModalVLLMModel, environ: dict[str, str]):
    server = ModalVLLMServer(model, log_dir=tmp_path, environ=environ, config_dir=tmp_path, ops=ops)
    server.health_interval_s = 0.05
    server.health_poll_timeout_s = 2.0
    return server


def test_ephemeral_run_waits_for_health_and_always_stops(
    tmp_path: Path, cold_endpoint: _ColdEndpoint
) -> None:
    pytest.importorskip("modal")
    ops = FakeOps(cold_endpoint.url)
    environ = {"HF_HUB_CACHE": _cached(tmp_path), "HF_TOKEN": "hf_secret"}
    server = _server(tmp_path, ops, _model(), environ)
    with server as endpoint:
        assert endpoint.base_url == f"{cold_endpoint.url}/v1"
        assert endpoint.model == "Qwen3.8B" and endpoint.model_id == "Qwen/Qwen3-8B"
        assert cold_endpoint.polls == 3  # two 503s, then ready
        assert cold_endpoint.keys == [f"Bearer {endpoint.api_key}"]
        assert ops.calls == ["run evalgate-qwen3-8b"]
    assert ops.calls[-2:] == ["stopped evalgate-qwen3-8b", "close"]
    assert server.spec is not None and server.spec.secret_env == ("HF_TOKEN", "VLLM_API_KEY")
    log = (tmp_path / "model_server-Qwen3.8B.log").read_text(encoding="utf-8")
    assert "hf_secret" not in log and endpoint.api_key not in log
    assert "--tensor-parallel-size 2" in log


def test_ephemeral_app_is_stopped_when_it_never_gets_healthy(
    tmp_path: Path, cold_endpoint: _ColdEndpoint
) -> None:
    pytest.importorskip("modal")
    cold_endpoint.cold = 10**6
    ops = FakeOps(cold_endpoint.url)
    # The spec's floor is 600 s; the copy skips validation to keep the test short.
    model = _model().model_copy(update={"startup_timeout_s": 0.5})
    server = _server(tmp_path, ops, model, {"HF_HUB_CACHE": _cached(tmp_path)})
    with pytest.raises(InfraError, match=r"did not become ready: not ready within 0 s.*503"):
        server.__enter__()
    assert ops.calls == ["run evalgate-qwen3-8b", "stopped evalgate-qwen3-8b", "close"]


def test_persistent_needs_its_key_and_a_matching_deployment(
    tmp_path: Path, cold_endpoint: _ColdEndpoint
) -> None:
    model = _model(mode="persistent")
    environ = {"HF_HUB_CACHE": _cached(tmp_path)}
    with pytest.raises(ConfigError, match="set the environment variable EVALGATE_VLLM_API_KEY"):
        _server(tmp_path, FakeOps(cold_endpoint.url), model, environ).__enter__()

    environ["EVALGATE_VLLM_API_KEY"] = "team-key"
    with pytest.raises(InfraError, match="no deployed Modal app 'evalgate-qwen3-8b'"):
        _server(tmp_path, FakeOps(cold_endpoint.url, tags=None), model, environ).__enter__()

    stale = {"managed-by": "evalgate", "evalgate-digest": "0" * 16}
    with pytest.raises(InfraError, match="runs another configuration"):
        _server(tmp_path, FakeOps(cold_endpoint.url, tags=stale), model, environ).__enter__()

    digest = describe(model, chat_template=DEFERRED).digest()
    ops = FakeOps(cold_endpoint.url, tags={"evalgate-digest": digest})
    with _server(tmp_path, ops, model, environ) as endpoint:
        assert endpoint.api_key == "team-key"
        assert cold_endpoint.keys[-1] == "Bearer team-key"
    assert "stop evalgate-qwen3-8b" not in ops.calls  # a persistent app outlives the run


def test_registry_constructs_the_modal_backend(tmp_path: Path) -> None:
    server = open_server(_model(), ServeContext(log_dir=tmp_path, environ={}))
    assert isinstance(server, ModalVLLMServer)


def test_image_follows_modals_vllm_guide_with_pinned_tools(
    no_network: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CUDA's devel image with Modal-added Python (Modal's vLLM example), uv pinned rather than
    `:latest`; both are in the digest, since they decide what runs."""
    modal = pytest.importorskip("modal")
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    real_registry, real_uv = modal.Image.from_registry, modal.Image.uv_pip_install

    def from_registry(tag: str, *args: Any, **kw: Any) -> Any:
        calls.append(("from_registry", (tag, *args), kw))
        return real_registry(tag, *args, **kw)

    def uv_pip_install(self: Any, *packages: Any, **kw: Any) -> Any:
        calls.append(("uv_pip_install", packages, kw))
        return real_uv(self, *packages, **kw)

    monkeypatch.setattr(modal.Image, "from_registry", staticmethod(from_registry))
    monkeypatch.setattr(modal.Image, "uv_pip_install", uv_pip_install)
    spec = describe(_model(secrets=["huggingface", "team-s3"]), chat_template=DEFERRED)
    _, function = build_app(spec, secret_values={"VLLM_API_KEY": "k"}, template_text=None)
    (registry,) = [c for c in calls if c[0] == "from_registry"]
    assert registry[1][0] == cuda_image("0.33.0") and registry[1][0].startswith("nvidia/cuda:")
    assert "-devel-" in registry[1][0] and registry[2]["add_python"] == PY
    (uv,) = [c for c in calls if c[0] == "uv_pip_install"]
    assert uv[1] == ("vllm==0.33.0",) and uv[2]["uv_version"] == modal_vllm.UV_VERSION
    assert modal_vllm.UV_VERSION[0].isdigit()  # a version, never "latest"
    # The named Modal Secrets, plus the one evalgate makes from this environment.
    assert spec.named_secrets == ("huggingface", "team-s3")
    assert len(function._spec_.secrets) == 3
    bumped = modal_vllm.ModalAppSpec(**{**spec.__dict__, "uv_version": "0.0.1"})
    assert bumped.digest() != spec.digest()

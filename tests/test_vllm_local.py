"""The local vLLM backend against a fake ``vllm`` executable: real processes, real HTTP.

The fake parses the ``vllm serve`` command line it is given, answers 503 on /health for the first
N polls (a cold server), checks the API key on /v1, serves chat completions, and spawns a child
process like vLLM's engine core, so process-group stopping is tested for real.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from evalgate.config.spec import VLLMModel
from evalgate.errors import InfraError
from evalgate.serve.base import ServeContext
from evalgate.serve.registry import open_server
from evalgate.serve.vllm_local import VLLMServer
from tests.test_chat_template import COMMIT, hub_cache

FAKE_VLLM = r'''#!{python}
"""A stand-in for `vllm serve`: the OpenAI routes evalgate uses, a cold start, a child process."""
import argparse, json, os, signal, subprocess, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

argv = sys.argv[1:]
state = os.environ.get("VLLM_FAKE_STATE")
if state:
    with open(os.path.join(state, "argv.json"), "w") as fh:
        json.dump(argv, fh)
    with open(os.path.join(state, "env.json"), "w") as fh:
        json.dump(dict(os.environ), fh)
if os.environ.get("VLLM_FAKE_EXIT"):
    print("ValueError: fake vllm refuses to start", flush=True)
    sys.exit(int(os.environ["VLLM_FAKE_EXIT"]))
assert argv[0] == "serve", argv
parser = argparse.ArgumentParser()
parser.add_argument("model")
parser.add_argument("--served-model-name")
parser.add_argument("--host")
parser.add_argument("--port", type=int)
args, _ = parser.parse_known_args(argv[1:])
cold = int(os.environ.get("VLLM_FAKE_COLD_POLLS", "0"))
key = os.environ.get("VLLM_API_KEY")
polls = {"n": 0}

# Like vLLM's engine core: a child in the same process group.
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
if state:
    with open(os.path.join(state, "pids.json"), "w") as fh:
        json.dump({"server": os.getpid(), "child": child.pid}, fh)
if os.environ.get("VLLM_FAKE_IGNORE_TERM"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def _send(self, status, payload):
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _authorized(self):
        return key is None or self.headers.get("Authorization") == f"Bearer {key}"

    def do_GET(self):
        if self.path == "/health":
            polls["n"] += 1
            self._send(503 if polls["n"] <= cold else 200, {})
        elif self.path == "/v1/models":
            if not self._authorized():
                return self._send(401, {"error": "Unauthorized"})
            self._send(200, {"object": "list", "data": [{"id": args.served_model_name}]})
        else:
            self._send(404, {})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not self._authorized():
            return self._send(401, {"error": "Unauthorized"})
        text = "echo: " + body["messages"][-1]["content"]
        self._send(200, {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2},
        })

print(f"INFO: fake vllm serving {args.model} as {args.served_model_name}", flush=True)
ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()
'''


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"  # a zombie is dead, just not reaped
    except (OSError, IndexError):
        return False


@pytest.fixture
def fake_vllm(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH starts with a fake `vllm`; its state folder under STATE."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "vllm"
    exe.write_text(FAKE_VLLM.replace("{python}", sys.executable), encoding="utf-8")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    state = tmp_path / "state"
    state.mkdir()
    for commit in (COMMIT, "a" * 40):  # the model's own template, at main and at a pin
        hub_cache(tmp_path / "hf-cache", "Qwen/Qwen2.5-0.5B-Instruct", commit=commit)
    return {
        **os.environ,
        "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
        "VLLM_FAKE_STATE": str(state),
        "HF_HUB_CACHE": str(tmp_path / "hf-cache"),
    }


def _model(**extra: object) -> VLLMModel:
    fields = {"name": "qwen", "backend": "vllm", "model": "Qwen/Qwen2.5-0.5B-Instruct"}
    return VLLMModel.model_validate({**fields, **extra})


def _state(environ: dict[str, str], name: str) -> dict | list:
    return json.loads((Path(environ["VLLM_FAKE_STATE"]) / name).read_text(encoding="utf-8"))


@pytest.mark.slow
def test_cold_server_is_awaited_then_served_and_stopped_as_a_group(
    tmp_path: Path, fake_vllm: dict[str, str]
) -> None:
    import urllib.request

    environ = {**fake_vllm, "VLLM_FAKE_COLD_POLLS": "3"}
    server = open_server(
        _model(revision="a" * 40), ServeContext(log_dir=tmp_path / "logs", environ=environ)
    )
    assert isinstance(server, VLLMServer)
    server.poll_interval_s = 0.05
    with server as endpoint:
        assert endpoint.base_url.startswith("http://127.0.0.1:")
        assert endpoint.model == "qwen"
        assert endpoint.model_id == "Qwen/Qwen2.5-0.5B-Instruct"
        assert endpoint.api_key
        request = urllib.request.Request(
            f"{endpoint.base_url}/chat/completions",
            data=json.dumps(
                {"model": "qwen", "messages": [{"role": "user", "content": "hi"}]}
            ).encode(),
            headers={"Authorization": f"Bearer {endpoint.api_key}"},
        )
        with urllib.request.urlopen(request, timeout=5) as resp:
            reply = json.loads(resp.read())
        assert reply["choices"][0]["message"]["content"] == "echo: hi"
        pids = _state(environ, "pids.json")
        assert _alive(pids["server"]) and _alive(pids["child"])
    # The exact command line vLLM was started with.
    argv = _state(environ, "argv.json")
    port = endpoint.base_url.split(":")[2].split("/")[0]
    assert argv == [
        "serve",
        "Qwen/Qwen2.5-0.5B-Instruct",
        "--served-model-name",
        "qwen",
        "--host",
        "127.0.0.1",
        "--port",
        port,
        "--revision",
        "a" * 40,
        "--tokenizer-revision",
        "a" * 40,
        "--dtype",
        "auto",
        "--tensor-parallel-size",
        "1",
        "--data-parallel-size",
        "1",
        "--gpu-memory-utilization",
        "0.9",
        "--enable-prefix-caching",
        "--generation-config",
        "vllm",
    ]
    # The tokenizer's own template: vLLM reads it itself; its hash is recorded.
    assert server.chat_template is not None
    assert server.chat_template.source == "tokenizer" and server.chat_template.sha256
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (_alive(pids["server"]) or _alive(pids["child"])):
        time.sleep(0.05)
    assert not _alive(pids["server"]) and not _alive(pids["child"])
    log = (tmp_path / "logs" / "model_server-qwen.log").read_text(encoding="utf-8")
    assert "[evalgate] " in log and "fake vllm serving" in log


JOB_SECRETS = {
    "GITHUB_TOKEN": "ghs_job",
    "INPUT_GITHUB_TOKEN": "ghs_input",
    "ACTIONS_RUNTIME_TOKEN": "runtime",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "oidc",
    "RUNNER_TEMP": "/home/runner/work/_temp",
    "OPENAI_API_KEY": "sk-unrouted",
    "AWS_SECRET_ACCESS_KEY": "aws",
    "EVALGATE_JUDGE_KEY": "judge",
}


def test_the_server_gets_no_job_token_and_no_unrouted_key(
    tmp_path: Path, fake_vllm: dict[str, str]
) -> None:
    # vLLM runs the model's remote code (trust_remote_code) and plugins the candidate names: it
    # gets what it needs to run on the GPU, its own key, and no secret of the job's.
    environ = {**fake_vllm, **JOB_SECRETS, "CUDA_VISIBLE_DEVICES": "0", "VLLM_USE_V1": "1"}
    server = VLLMServer(_model(), log_dir=tmp_path, environ=environ)
    server.poll_interval_s = 0.05
    with server as endpoint:
        seen = _state(environ, "env.json")
    assert isinstance(seen, dict)
    assert not set(JOB_SECRETS) & set(seen), sorted(set(JOB_SECRETS) & set(seen))
    assert not {v for v in JOB_SECRETS.values()} & set(seen.values())
    assert seen["VLLM_API_KEY"] == endpoint.api_key  # its own per-run key
    for name in ("PATH", "CUDA_VISIBLE_DEVICES", "VLLM_USE_V1", "HF_HUB_CACHE"):
        assert seen[name] == environ[name], name


def test_a_server_that_ignores_sigterm_is_killed(tmp_path: Path, fake_vllm: dict[str, str]) -> None:
    environ = {**fake_vllm, "VLLM_FAKE_IGNORE_TERM": "1"}
    server = VLLMServer(_model(), log_dir=tmp_path, environ=environ)
    server.poll_interval_s = 0.05
    server.stop_grace_s = 0.5
    t0 = time.monotonic()
    with server:
        pids = _state(environ, "pids.json")
    assert time.monotonic() - t0 < 20
    time.sleep(0.2)
    assert not _alive(pids["server"]) and not _alive(pids["child"])


def test_a_server_that_exits_fails_fast_with_the_log_tail(
    tmp_path: Path, fake_vllm: dict[str, str]
) -> None:
    environ = {**fake_vllm, "VLLM_FAKE_EXIT": "1"}
    server = VLLMServer(_model(), log_dir=tmp_path, environ=environ)
    server.poll_interval_s = 0.05
    t0 = time.monotonic()
    with pytest.raises(InfraError) as info, server:
        pass
    assert time.monotonic() - t0 < 10  # not the 900 s startup timeout
    message = str(info.value)
    assert "exited with code 1" in message
    assert "fake vllm refuses to start" in message
    assert info.value.exit_code == 3


@pytest.mark.slow
def test_a_server_that_stays_cold_times_out(tmp_path: Path, fake_vllm: dict[str, str]) -> None:
    environ = {**fake_vllm, "VLLM_FAKE_COLD_POLLS": "100000"}
    # startup_timeout_s has a floor of 60 s in the spec; the class is what the test shortens.
    model = _model().model_copy(update={"startup_timeout_s": 1.0, "port": None})
    server = VLLMServer(model, log_dir=tmp_path, environ=environ)
    server.poll_interval_s = 0.05
    with pytest.raises(InfraError, match=r"not ready within 1 s \(last: /health answered 503\)"):
        server.__enter__()
    pids = _state(environ, "pids.json")
    time.sleep(0.2)
    assert not _alive(pids["server"]) and not _alive(pids["child"])


def test_missing_vllm_names_the_install(tmp_path: Path) -> None:
    server = VLLMServer(_model(), log_dir=tmp_path, environ={"PATH": str(tmp_path)})
    with pytest.raises(InfraError, match="`vllm` is not on PATH"):
        server.__enter__()


@pytest.mark.slow
def test_benchmark_fallback_template_is_passed_to_vllm(
    tmp_path: Path, fake_vllm: dict[str, str]
) -> None:
    # A local model folder whose tokenizer has no template: the math fallback is passed.
    model_dir = tmp_path / "base-model"
    model_dir.mkdir()
    (model_dir / "tokenizer_config.json").write_text('{"bos_token": "<s>"}', encoding="utf-8")
    server = VLLMServer(
        _model(model=str(model_dir)),
        log_dir=tmp_path,
        environ=fake_vllm,
        config_dir=tmp_path,
        benchmarks=["math500", "aime2025"],
    )
    server.poll_interval_s = 0.05
    with server:
        pass
    argv = _state(fake_vllm, "argv.json")
    template = argv[argv.index("--chat-template") + 1]
    assert template.endswith("templates/math.jinja")
    assert server.chat_template is not None and server.chat_template.source == "benchmark"

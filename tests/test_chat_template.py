"""Chat-template resolution (config > tokenizer > repo > benchmark, else deferred) and the shipped
fallback templates, rendered the way transformers renders chat templates."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
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


def _cache(root: Path, model: str, files: dict[str, str], *, no_exist: bool = False) -> Path:
    """A Hugging Face hub cache holding ``files`` for ``model`` at COMMIT, ref main."""
    repo = root / ("models--" + model.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT, encoding="utf-8")
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    for name, text in files.items():
        (snapshot / name).write_text(text, encoding="utf-8")
    if no_exist:
        marker = repo / ".no_exist" / COMMIT
        marker.mkdir(parents=True)
        (marker / "chat_template.jinja").touch()
    return snapshot


def _resolve(tmp_path: Path, model: VLLMModel, benchmarks=("math500",)) -> ChatTemplate:
    env = {"HF_HUB_CACHE": str(tmp_path / "hub")}
    return resolve_chat_template(
        model, config_dir=tmp_path / "repo", benchmarks=benchmarks, environ=env
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "repo").mkdir()
    return tmp_path / "repo"


def test_uncached_hub_model_is_deferred_to_vllm(tmp_path: Path, repo: Path) -> None:
    (repo / "chat_template.jinja").write_text("repo", encoding="utf-8")
    chosen = _resolve(tmp_path, _model())
    assert chosen.record() == {"source": "deferred", "path": None, "sha256": None}
    assert chosen.server_arg is None and chosen.text() is None


def test_tokenizer_template_in_the_cache_wins(tmp_path: Path, repo: Path) -> None:
    (repo / "chat_template.jinja").write_text("repo", encoding="utf-8")
    config = json.dumps({"chat_template": "{{ messages }}"})
    snapshot = _cache(tmp_path / "hub", "org/base-model", {"tokenizer_config.json": config})
    chosen = _resolve(tmp_path, _model())
    assert chosen.source == "tokenizer"
    assert chosen.path == str(snapshot / "tokenizer_config.json")
    assert chosen.sha256 == hashlib.sha256(config.encode()).hexdigest()
    assert chosen.server_arg is None  # vLLM finds the tokenizer's own template itself


def test_template_file_beside_the_tokenizer_counts_as_the_tokenizers(tmp_path: Path) -> None:
    _cache(
        tmp_path / "hub",
        "org/base-model",
        {"tokenizer_config.json": "{}", "chat_template.jinja": "{{ x }}"},
    )
    assert _resolve(tmp_path, _model()).source == "tokenizer"


def test_partial_cache_is_undecided_unless_the_hub_said_absent(tmp_path: Path, repo: Path) -> None:
    (repo / "chat_template.jinja").write_text("repo", encoding="utf-8")
    _cache(tmp_path / "hub", "org/base-model", {"tokenizer_config.json": "{}"})
    assert _resolve(tmp_path, _model()).source == "deferred"  # template file may not be fetched


def test_repo_template_when_the_model_has_none(tmp_path: Path, repo: Path) -> None:
    _cache(tmp_path / "hub", "org/base-model", {"tokenizer_config.json": "{}"}, no_exist=True)
    (repo / "chat_template.jinja").write_text("repo template", encoding="utf-8")
    chosen = _resolve(tmp_path, _model())
    assert chosen.source == "repo"
    assert chosen.server_arg == str((repo / "chat_template.jinja").resolve())
    assert chosen.text() == "repo template"


def test_benchmark_fallback_last(tmp_path: Path, repo: Path) -> None:
    _cache(tmp_path / "hub", "org/base-model", {"tokenizer_config.json": "{}"}, no_exist=True)
    chosen = _resolve(tmp_path, _model(), benchmarks=("math500", "gsm8k"))
    assert chosen.source == "benchmark"
    assert chosen.path == str(builtin_template("math"))
    mixed = _resolve(tmp_path, _model(), benchmarks=("math500", "livecodebench"))
    assert mixed.path == str(builtin_template("base"))


def test_pinned_revision_and_local_folders(tmp_path: Path, repo: Path) -> None:
    # A commit revision is looked up directly (no ref file needed); another commit is uncached.
    _cache(tmp_path / "hub", "org/base-model", {"tokenizer_config.json": '{"chat_template": "t"}'})
    assert _resolve(tmp_path, _model(revision=COMMIT)).source == "tokenizer"
    assert _resolve(tmp_path, _model(revision="f" * 40)).source == "deferred"
    # A local folder is complete: no template there means none.
    folder = tmp_path / "weights"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text("{}", encoding="utf-8")
    assert _resolve(tmp_path, _model(str(folder))).source == "benchmark"
    (folder / "tokenizer_config.json").write_text('{"chat_template": "t"}', encoding="utf-8")
    assert _resolve(tmp_path, _model(str(folder))).source == "tokenizer"


def test_config_template_overrides_everything(tmp_path: Path, repo: Path) -> None:
    _cache(tmp_path / "hub", "org/base-model", {"tokenizer_config.json": '{"chat_template": "t"}'})
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

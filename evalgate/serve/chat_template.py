"""Which chat template a served model uses, decided before the server starts, and recorded.

Order, first match wins:

1. ``config``: the model's ``chat_template`` in evals.yaml (a file, relative to evals.yaml, or the
   name of a built-in template: ``base``, ``code``, ``math``, ``think``);
2. ``tokenizer``: the model's own template (``chat_template`` in ``tokenizer_config.json``, or a
   ``chat_template.jinja`` beside it), read from a local model folder or the Hugging Face cache;
   when the cache does not have them (a fresh CI runner), the two files are fetched with
   ``huggingface_hub`` at the model's ``revision`` (else ``main``, and the commit it resolved to
   is recorded) into that cache — a few kilobytes, before any GPU is started;
3. ``repo``: ``chat_template.jinja`` next to evals.yaml (the team's repository);
4. ``benchmark``: the fallback shipped in ``benchmarks/templates/`` for the run's benchmarks
   (built-in benchmarks only: their prompts are what those templates were written for).

A model with no template of its own, no repository template and a benchmark without a fallback
is a configuration error, as is a model whose files can be neither read nor fetched (offline
runner, gated model without a token): both name the ``chat_template:`` setting that resolves it.
So every run records the template's hash in its fingerprint. ``--chat-template`` is passed only
for ``config``, ``repo`` and ``benchmark``; vLLM finds the tokenizer's own template itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from evalgate.config.benchmarks import builtin_dir
from evalgate.config.hostfiles import read_host_file, repository_root
from evalgate.errors import ConfigError

if TYPE_CHECKING:
    from evalgate.config.spec.models import VLLMOptions

__all__ = [
    "BENCHMARK_TEMPLATES",
    "BUILTIN_TEMPLATES",
    "ChatTemplate",
    "builtin_template",
    "configured_template",
    "fallback_for",
    "hf_cache_dir",
    "model_template",
    "resolve_chat_template",
]

Source = Literal["config", "tokenizer", "repo", "benchmark"]

BUILTIN_TEMPLATES = ("base", "code", "math", "think")
REPO_TEMPLATE = "chat_template.jinja"

# Benchmark name → fallback template. Unlisted benchmarks get `base`; a run mixing fallbacks
# (one server serves every benchmark of a run) also gets `base`.
BENCHMARK_TEMPLATES: dict[str, str] = {
    "arith": "base",
    "gsm8k": "math",
    "math500": "math",
    "aime2025": "math",
    "humaneval": "code",
    "livecodebench": "code",
    "ifeval": "base",
    "agent-basics": "base",
}
# The verifiers-environment variants (`vf-math500`, …) take their benchmark's fallback.
BENCHMARK_TEMPLATES.update({f"vf-{name}": kind for name, kind in list(BENCHMARK_TEMPLATES.items())})

_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class ChatTemplate:
    """The resolved template; :meth:`record` goes into run_config.json."""

    source: Source
    path: str | None = None  # the file
    sha256: str | None = None  # of the file's bytes
    revision: str | None = None  # `tokenizer` from the hub: the commit the file was read at

    @property
    def server_arg(self) -> str | None:
        """The ``--chat-template`` value, or None to let vLLM use the tokenizer's."""
        return self.path if self.source in ("config", "repo", "benchmark") else None

    def text(self) -> str | None:
        """The template's text when we pass it to the server (shipped to Modal containers)."""
        arg = self.server_arg
        if not arg:
            return None
        # The one reader of host files for prompts: no link out of its repository, capped.
        return read_host_file(arg, root=repository_root(arg), what="chat_template")

    def record(self) -> dict[str, str | None]:
        return {
            "source": self.source,
            "path": self.path,
            "sha256": self.sha256,
            "revision": self.revision,
        }


def _of(source: Source, path: Path, revision: str | None = None) -> ChatTemplate:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return ChatTemplate(source=source, path=str(path), sha256=digest, revision=revision)


def builtin_template(name: str) -> Path:
    """The shipped fallback template ``name`` (``base``, ``code``, ``math``, ``think``)."""
    path = builtin_dir() / "templates" / f"{name}.jinja"
    if name not in BUILTIN_TEMPLATES or not path.is_file():
        raise ConfigError(
            f"no built-in chat template {name!r}; built-ins: {', '.join(BUILTIN_TEMPLATES)}"
        )
    return path


def fallback_for(benchmarks: Iterable[str]) -> str:
    """The one fallback template for a server that serves all of ``benchmarks``."""
    names = {BENCHMARK_TEMPLATES.get(name, "base") for name in benchmarks}
    return names.pop() if len(names) == 1 else "base"


def hf_cache_dir(environ: Mapping[str, str]) -> Path:
    """The Hugging Face hub cache, located the way ``huggingface_hub`` does it."""
    if environ.get("HF_HUB_CACHE"):
        return Path(environ["HF_HUB_CACHE"]).expanduser()
    if environ.get("HF_HOME"):
        return Path(environ["HF_HOME"]).expanduser() / "hub"
    xdg = environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path(environ.get("HOME", "~")).expanduser() / ".cache"
    return base / "huggingface" / "hub"


def _has_template(config_file: Path) -> bool:
    try:
        data = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    # A string, or a list of named templates ({"name": "default", "template": …}).
    return bool(isinstance(data, dict) and data.get("chat_template"))


def _snapshot(model: str, revision: str | None, cache: Path) -> tuple[Path, Path] | None:
    """(snapshot folder, repo folder) of a cached hub model at ``revision`` (default: main)."""
    repo = cache / ("models--" + model.replace("/", "--"))
    ref = revision or "main"
    commit = ref if _COMMIT.match(ref) else None
    if commit is None:
        try:
            commit = (repo / "refs" / ref).read_text(encoding="utf-8").strip()
        except OSError:
            return None
    snapshot = repo / "snapshots" / commit
    return (snapshot, repo) if snapshot.is_dir() else None


def model_template(
    model: str, revision: str | None, environ: Mapping[str, str]
) -> tuple[bool | None, Path | None]:
    """Whether the model ships a chat template: (True, file), (False, None), or (None, None)
    when its files are not on this machine (undecided: :func:`resolve_chat_template` fetches
    them)."""
    local = Path(model).expanduser()
    if local.is_dir():  # a local model folder is complete: absence is an answer
        config_file = local / "tokenizer_config.json"
        if _has_template(config_file):
            return True, config_file
        if (local / REPO_TEMPLATE).is_file():
            return True, local / REPO_TEMPLATE
        return False, None
    found = _snapshot(model, revision, hf_cache_dir(environ))
    if found is None:
        return None, None
    snapshot, repo = found
    config_file = snapshot / "tokenizer_config.json"
    if _has_template(config_file):
        return True, config_file
    if (snapshot / REPO_TEMPLATE).is_file():
        return True, snapshot / REPO_TEMPLATE
    # A cache holds only the files someone fetched. The template file is known to be absent only
    # when the hub said so: huggingface_hub then leaves a marker under .no_exist/COMMIT/.
    known_absent = (repo / ".no_exist" / snapshot.name / REPO_TEMPLATE).exists()
    return (False, None) if config_file.is_file() and known_absent else (None, None)


def _fetch_from_hub(
    model: str, revision: str | None, environ: Mapping[str, str], token: str | None
) -> tuple[bool, Path | None]:
    """Fetch the model's template files into the hub cache; (has template, file). Raises
    ConfigError naming the fix when the Hub cannot answer."""
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError
    except ImportError as exc:
        raise ConfigError(
            f"cannot tell whether {model!r} has a chat template: it is not in the Hugging Face "
            "cache, and huggingface_hub (which would fetch it) is not installed",
            hint="pip install 'evalgate-action[modal]' (or huggingface_hub), or set the model's "
            "chat_template: in evals.yaml",
        ) from exc

    # The run's environment decides, not the one huggingface_hub read at import.
    offline = environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
    found: dict[str, Path | None] = {}
    for name in ("tokenizer_config.json", REPO_TEMPLATE):
        try:
            found[name] = Path(
                hf_hub_download(
                    model,
                    name,
                    revision=revision or "main",
                    cache_dir=hf_cache_dir(environ),
                    endpoint=environ.get("HF_ENDPOINT") or None,
                    token=token or None,
                    local_files_only=offline,
                )
            )
        except LocalEntryNotFoundError as exc:  # offline, or the Hub did not answer
            raise _unfetchable(model, revision, exc) from exc
        except EntryNotFoundError:  # the Hub answered: the repository has no such file
            found[name] = None
        except Exception as exc:
            raise _unfetchable(model, revision, exc) from exc
        got = found[name]
        if name == "tokenizer_config.json" and got and _has_template(got):
            return True, got
    jinja = found[REPO_TEMPLATE]
    return (True, jinja) if jinja is not None else (False, None)


def _unfetchable(model: str, revision: str | None, exc: BaseException) -> ConfigError:
    why = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    return ConfigError(
        f"cannot tell whether {model!r} (revision {revision or 'main'}) has a chat template: "
        f"its tokenizer_config.json is not in the Hugging Face cache and fetching it failed: "
        f"{why}",
        hint="set the model's chat_template: in evals.yaml (a file, or one of "
        f"{', '.join(BUILTIN_TEMPLATES)}), set HF_TOKEN for a gated model, or fill the cache "
        "(HF_HUB_CACHE) where the Hub is reachable",
    )


def _commit_of(path: Path) -> str | None:
    """The commit of a file in a hub cache snapshot (``…/snapshots/COMMIT/file``)."""
    return path.parent.name if path.parent.parent.name == "snapshots" else None


def configured_template(name: str, config_dir: Path) -> Path:
    """The file a model's ``chat_template:`` names: a file relative to evals.yaml, else a
    built-in; ConfigError when neither (`validate` asks too, before anything is served)."""
    path = (config_dir / name).expanduser()
    if path.is_file():
        return path.resolve()
    if name in BUILTIN_TEMPLATES:
        return builtin_template(name)
    raise ConfigError(
        f"{path} does not exist (give a file relative to evals.yaml, or one "
        f"of the built-in templates: {', '.join(BUILTIN_TEMPLATES)})"
    )


def resolve_chat_template(
    opts: VLLMOptions,
    *,
    config_dir: Path,
    benchmarks: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> ChatTemplate:
    """Decide the chat template for a vLLM model (``opts``: VLLMOptions); see the module doc."""
    environ = os.environ if environ is None else environ
    if opts.chat_template:
        try:
            return _of("config", configured_template(opts.chat_template, config_dir))
        except ConfigError as exc:
            raise ConfigError(f"chat_template: {exc}") from None
    has, file = model_template(opts.model, opts.revision, environ)
    if has is None and Path(opts.model).expanduser().is_file():  # a single file (GGUF)
        raise ConfigError(
            f"model {opts.model!r} is a single file, whose chat template evalgate cannot read",
            hint="set the model's chat_template: in evals.yaml (a file, or one of "
            f"{', '.join(BUILTIN_TEMPLATES)})",
        )
    if has is None:
        token = environ.get(getattr(opts, "hf_token_env", None) or "HF_TOKEN")
        has, file = _fetch_from_hub(opts.model, opts.revision, environ, token)
    if has and file is not None:
        return _of("tokenizer", file, _commit_of(file))
    repo_file = config_dir / REPO_TEMPLATE
    if repo_file.is_file():
        return _of("repo", repo_file.resolve())
    names = list(benchmarks)
    unknown = [name for name in names if name not in BENCHMARK_TEMPLATES]
    if unknown:
        raise ConfigError(
            f"model {opts.model!r} has no chat template (none in its tokenizer files at revision "
            f"{opts.revision or 'main'}), there is no {REPO_TEMPLATE} next to evals.yaml, and "
            f"benchmark(s) {', '.join(unknown) or '(none)'} have no built-in fallback",
            hint="set the model's chat_template: in evals.yaml (a file, or one of "
            f"{', '.join(BUILTIN_TEMPLATES)}), or add {REPO_TEMPLATE} next to evals.yaml",
        )
    return _of("benchmark", builtin_template(fallback_for(names)))

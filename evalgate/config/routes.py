"""Every route to a secret a config names: where each endpoint is, and which secret it receives.

A secret (an API key, a token, a Modal Secret, a variable repository code may read) leaves the
gate only along a route evals.yaml spells out: a model's endpoint and its ``api_key_env``; a
judge's (``scorer.model``), an inspect grader's, a verifiers judge's, each a model like the
others; a LiteLLM model's ``api_base``, ``proxy_url`` and any endpoint its free-form ``params``
name (``base_url``, ``api_base``, ``API-Base``…: any key that names a base, URL, endpoint or
host, and any value that is a URL); Modal; the code of an inspect task or a verifiers
environment (``pass_env``). :func:`routes` walks them all, wherever a model sits in the config,
and the Action refuses a PR whose routes the base's config does not have
(:func:`evalgate.action.secret_policy.check_secret_routes`).

:data:`ROUTE_FIELDS` lists every field of the schema that names a destination or a secret, or
holds free-form settings that could: ``tests/test_routes.py`` walks the schema and fails on one
it does not list, so a new endpoint field is walked when it is added. Destinations the job's
environment sets (``LANGFUSE_HOST`` for tracing, ``HF_ENDPOINT`` for the Hub) are listed by
:func:`environment_routes`: evals.yaml cannot move them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeGuard, get_args
from urllib.parse import urlsplit

from pydantic import BaseModel

from evalgate.config.spec import (
    InspectBenchmark,
    LiteLLMModel,
    ModalVLLMModel,
    Model,
    OpenAIModel,
    VerifiersBenchmark,
)

if TYPE_CHECKING:
    from evalgate.config.load import Config

__all__ = ["LANGFUSE_KEYS", "ROUTE_FIELDS", "Route", "environment_routes", "host", "routes"]

Kind = Literal["destination", "secret", "walked", "not a route"]

# Class.field -> what the route walk does with it (and, for "not a route", why).
ROUTE_FIELDS: dict[str, tuple[Kind, str]] = {
    "OpenAIModel.base_url": ("destination", "the model's endpoint"),
    "OpenAIModel.api_key_env": ("secret", "sent as the bearer key to base_url"),
    "LiteLLMModel.api_base": ("destination", "the provider endpoint LiteLLM calls"),
    "LiteLLMModel.proxy_url": ("destination", "an existing proxy: every request goes there"),
    "LiteLLMModel.api_key_env": ("secret", "the provider key, to every destination"),
    "LiteLLMModel.params": (
        "walked",
        "litellm_params: endpoint-named keys and URL values are destinations, "
        "os.environ/NAME values secrets",
    ),
    "ModalVLLMModel.hf_token_env": ("secret", "passed to Modal as a Secret"),
    "ModalVLLMModel.secrets": ("secret", "Modal Secrets the server gets"),
    "ModalVLLMModel.api_key_env": ("secret", "persistent mode: the deployed app's key"),
    "InspectBenchmark.pass_env": ("secret", "read by the task's code"),
    "VerifiersBenchmark.pass_env": ("secret", "read by the environment's code"),
    "InspectBenchmark.task_args": (
        "not a route",
        "arguments to the task's code, which gets no secret but pass_env's",
    ),
    "VerifiersBenchmark.env_args": (
        "not a route",
        "arguments to the environment's code, which gets no secret but pass_env's",
    ),
    "AgentSpec.env": (
        "not a route",
        "literal values for the agent in its sandbox, whose network reaches only the model bridge",
    ),
    "BenchmarkEntry.sampling": ("not a route", "numbers, validated into Sampling"),
    "BenchmarkEntry.eval": ("not a route", "numbers, validated into EvalSettings"),
}

# The variables that switch Langfuse tracing on (evalgate.serve.tracing reads them from here).
LANGFUSE_KEYS = ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY")

_MODELS = tuple(get_args(get_args(Model)[0]))  # the backend classes of the Model union


@dataclass(frozen=True)
class Route:
    """One secret sent to one destination, and the config field that sends it."""

    where: str  # "models[0] (m)", "benchmarks.qa: scorer.model (judge)"
    field: str  # "api_key_env", "params.base_url", "pass_env"
    secret: str  # an environment variable's name, or what the secret is
    dest: str  # a normalised scheme://host:port, or a description of the destination


def host(url: str | None) -> str | None:
    """``scheme://host:port`` of a URL (the port made explicit); None for no URL. A value that
    is not an http(s) URL with a host stays as written: a destination nothing else equals."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return repr(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return repr(url)
    return f"{parts.scheme}://{parts.hostname.lower()}:{port}"


def _env_refs(value: object) -> Iterator[str]:
    if isinstance(value, str) and value.strip().startswith("os.environ/"):
        yield value.strip().removeprefix("os.environ/")
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _env_refs(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _env_refs(v)


# A params key naming where requests go, in any spelling (api_base, base_url, API-Base,
# azure_endpoint, aws_bedrock_runtime_endpoint, proxy host…): compared without case or separators.
_ENDPOINT_KEY = re.compile(r"base|url|endpoint|host|proxy")


def _param_destinations(value: object, path: str) -> Iterator[tuple[str, str]]:
    """(params field, destination) for every endpoint a LiteLLM ``params`` mapping names."""
    if isinstance(value, Mapping):
        for key, sub in value.items():
            where = f"{path}.{key}"
            squashed = re.sub(r"[^a-z0-9]", "", str(key).lower())
            named = isinstance(sub, str) and _ENDPOINT_KEY.search(squashed)
            if named and not str(sub).strip().startswith("os.environ/"):
                yield where, str(host(str(sub).strip()))
                continue
            yield from _param_destinations(sub, where)
    elif isinstance(value, list | tuple):
        for i, sub in enumerate(value):
            yield from _param_destinations(sub, f"{path}[{i}]")
    elif isinstance(value, str) and "://" in value:
        yield path, str(host(value.strip()))


def _model_routes(model: Model, where: str) -> Iterator[Route]:
    if isinstance(model, OpenAIModel):
        if model.api_key_env:
            yield Route(where, "api_key_env", model.api_key_env, str(host(model.base_url)))
    elif isinstance(model, LiteLLMModel):
        dests: list[tuple[str, str]] = []
        if model.proxy_url:  # requests go to the proxy; api_base and params do not apply
            dests.append(("proxy_url", str(host(model.proxy_url))))
        else:
            if model.api_base:
                dests.append(("api_base", str(host(model.api_base))))
            dests += list(_param_destinations(model.params, "params"))
        if not dests:  # the provider's own endpoint, named by the model string's prefix
            dests.append(("model", f"the {model.model.partition('/')[0]} provider's endpoint"))
        # Unset, LiteLLM reads the provider's usual variable: that key goes there too.
        key = model.api_key_env or "(the provider's default key)"
        refs = list(_env_refs(model.params))
        for field, dest in dests:
            yield Route(where, "api_key_env" if field == "model" else field, key, dest)
            for name in refs:
                yield Route(where, "params", name, dest)
    elif isinstance(model, ModalVLLMModel):
        if model.hf_token_env:
            yield Route(where, "hf_token_env", model.hf_token_env, "Modal")
        for name in model.secrets:
            yield Route(where, "secrets", f"Modal Secret {name}", "Modal")
        if model.mode == "persistent" and model.api_key_env:
            app = f"Modal app {model.app_name or model.name}"
            yield Route(where, "api_key_env", model.api_key_env, app)


def _code_of(bench: InspectBenchmark | VerifiersBenchmark) -> str:
    """The repository code a benchmark runs, as a destination: its kind and what it loads."""
    what = bench.task if isinstance(bench, InspectBenchmark) else bench.env_path or bench.env_id
    return f"the code of {bench.kind} benchmark {bench.name} ({what})"


def _is_model(obj: object) -> TypeGuard[Model]:
    return isinstance(obj, _MODELS)


def _nested_models(obj: object, path: str) -> Iterator[tuple[str, Model]]:
    """Every model config inside ``obj`` (a judge, a grader, whatever field holds one)."""
    if _is_model(obj):
        yield path, obj
    elif isinstance(obj, BaseModel):
        for name in type(obj).model_fields:
            yield from _nested_models(getattr(obj, name), f"{path}.{name}" if path else name)
    elif isinstance(obj, list | tuple):
        for i, item in enumerate(obj):
            yield from _nested_models(item, f"{path}[{i}]")
    elif isinstance(obj, Mapping):
        for key, item in obj.items():
            yield from _nested_models(item, f"{path}.{key}")


def routes(config: Config) -> Iterator[Route]:
    """Every (secret, destination) the config sends, with the field that sends it: the models,
    every model a benchmark holds (judges, graders, verifiers judges), LiteLLM params, Modal,
    and the variables repository code may read."""
    for i, model in enumerate(config.models):
        yield from _model_routes(model, f"models[{i}] ({model.name})")
    for bench in config.benchmarks:
        for path, model in _nested_models(bench, ""):
            yield from _model_routes(model, f"benchmarks.{bench.name}: {path} ({model.name})")
        if isinstance(bench, InspectBenchmark | VerifiersBenchmark):
            for name in bench.pass_env:
                yield Route(f"benchmarks.{bench.name}", "pass_env", name, _code_of(bench))


def environment_routes(config: Config, environ: Mapping[str, str]) -> Iterator[Route]:
    """Routes whose destination the job's environment sets, not evals.yaml: Langfuse tracing
    of LiteLLM models (keys to ``LANGFUSE_HOST``), and Hugging Face tokens to the Hub
    (``HF_ENDPOINT``) for data sets, chat templates, weights and publishing."""
    if all(environ.get(k) for k in LANGFUSE_KEYS) and any(
        m.backend == "litellm" for m in config.models
    ):
        where = host(environ.get("LANGFUSE_HOST")) or "Langfuse's cloud"
        for key in LANGFUSE_KEYS:
            yield Route("tracing (the job's environment)", key, key, str(where))
    hub = host(environ.get("HF_ENDPOINT")) or "the Hugging Face Hub"
    yield Route("the job's environment", "HF_TOKEN", "HF_TOKEN", str(hub))

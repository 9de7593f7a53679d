"""Every route to a secret is walked: the schema's endpoint and secret fields are all known to
:mod:`evalgate.config.routes`, and each one, pointed at a host the base does not use, is refused."""

from __future__ import annotations

import re
import types
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from evalgate.action.exam import check_secret_routes
from evalgate.config.load import EvalsFile, load_config
from evalgate.config.routes import ROUTE_FIELDS, environment_routes, routes
from evalgate.config.spec import Benchmark, Model
from evalgate.errors import ConfigError


def _models(tp: Any) -> list[type[BaseModel]]:
    if get_origin(tp) is Annotated:
        return _models(get_args(tp)[0])
    if get_origin(tp) in (Union, types.UnionType, list, dict, tuple):
        return [m for arg in get_args(tp) for m in _models(arg)]
    return [tp] if isinstance(tp, type) and issubclass(tp, BaseModel) else []


def _classes() -> set[type[BaseModel]]:
    seen: set[type[BaseModel]] = set()
    todo = [EvalsFile, *_models(Model), *_models(Benchmark)]
    while todo:
        cls = todo.pop()
        if cls not in seen:
            seen.add(cls)
            todo += [m for f in cls.model_fields.values() for m in _models(f.annotation)]
    return seen


# What makes a field route-bearing: a URL's or a variable name's validator, a free-form mapping,
# or a name that says endpoint, secret or token.
_NAMES = re.compile(r"url|endpoint|host|secret|(^|_)token(_|$)|_env$|api_base|proxy")


def _route_bearing(cls: type[BaseModel], name: str) -> bool:
    info = cls.model_fields[name]
    text = repr(info.metadata) + repr(info.annotation)
    validators = ("_check_url", "_not_a_key", "_declarable_env")
    free_form = re.search(r"dict\[str, (typing\.Any|str)\]", repr(info.annotation)) is not None
    return any(v in text for v in validators) or free_form or bool(_NAMES.search(name))


def test_every_endpoint_and_secret_field_is_walked() -> None:
    found = {
        f"{c.__name__}.{n}" for c in _classes() for n in c.model_fields if _route_bearing(c, n)
    }
    unknown = sorted(found - ROUTE_FIELDS.keys())
    assert unknown == [], f"list these in evalgate/config/routes.py ROUTE_FIELDS: {unknown}"
    every = {f"{c.__name__}.{n}" for c in _classes() for n in c.model_fields}
    assert sorted(ROUTE_FIELDS.keys() - every) == [], (
        "ROUTE_FIELDS names fields gone from the schema"
    )


def test_a_new_url_field_is_caught() -> None:
    from evalgate.config.spec._base import URL
    from evalgate.config.spec.models import OpenAIModel

    class Extended(OpenAIModel):
        fallback_url: URL | None = None

    assert _route_bearing(Extended, "fallback_url")
    assert "Extended.fallback_url" not in ROUTE_FIELDS


BASE = """
models:
  - {name: m, backend: openai, base_url: "http://base.example/v1", api_key_env: BASE_KEY}
benchmarks:
  - {name: qa, kind: jsonl, path: qa.jsonl}
"""

OPENAI_JUDGE = '{name: j, backend: openai, base_url: "http://pr.example/v1", api_key_env: BASE_KEY}'
LITELLM_JUDGE = (
    "{name: j, backend: litellm, model: openai/x, api_key_env: BASE_KEY, "
    'params: {base_url: "http://pr.example/v1"}}'
)
QA = "name: b, kind: jsonl, path: qa.jsonl"


def _load(tmp_path: Path, name: str, text: str) -> Any:
    (tmp_path / name).mkdir()
    (tmp_path / name / "qa.jsonl").write_text('{"prompt": "Q", "answer": "A"}\n')
    (tmp_path / name / "t.py").write_text("")
    (tmp_path / name / "evals.yaml").write_text(text)
    return load_config(tmp_path / name / "evals.yaml")


@pytest.mark.parametrize(
    ("added", "where"),
    [
        (f"{{{QA}, scorer: {{type: judge, model: {OPENAI_JUDGE}}}}}",
         "benchmarks.b: scorer.model (j): api_key_env"),
        (f"{{{QA}, scorer: {{type: judge, model: {LITELLM_JUDGE}}}}}",
         "benchmarks.b: scorer.model (j): params.base_url"),
        (f"{{name: b, kind: inspect, task: t.py@t, grader: {{model: {OPENAI_JUDGE}}}}}",
         "benchmarks.b: grader.model (j): api_key_env"),
        (f"{{name: b, kind: verifiers, env_id: e, judge: {{model: {OPENAI_JUDGE}}}}}",
         "benchmarks.b: judge.model (j): api_key_env"),
        ("{name: b, kind: inspect, task: t.py@t, pass_env: [BASE_KEY]}",
         "benchmarks.b: pass_env: this PR would send BASE_KEY to the code of inspect benchmark b"),
    ],
    ids=["judge", "litellm-judge-params", "inspect-grader", "verifiers-judge", "pass-env"],
)  # fmt: skip
def test_a_benchmark_the_pr_adds_sends_no_secret_elsewhere(
    tmp_path: Path, added: str, where: str
) -> None:
    base = _load(tmp_path, "base", BASE)
    pr = _load(tmp_path, "pr", BASE.replace("benchmarks:\n", f"benchmarks:\n  - {added}\n"))
    with pytest.raises(ConfigError, match="refused") as err:
        check_secret_routes(base, pr, "evals.yaml")
    assert f"evals.yaml: {where}" in str(err.value)


def test_a_base_benchmarks_judge_stays_the_bases(tmp_path: Path) -> None:
    judged = BASE.replace(
        "path: qa.jsonl}",
        "path: qa.jsonl, scorer: {type: judge, model: {name: j, backend: openai, "
        'base_url: "http://judge.example/v1", api_key_env: JUDGE_KEY}}}',
    )
    base = _load(tmp_path, "base", judged)
    pr = _load(tmp_path, "pr", judged.replace("judge.example", "pr.example"))
    check_secret_routes(base, pr, "evals.yaml")  # the run uses the base's judge: nothing to refuse
    assert ("JUDGE_KEY", "http://judge.example:80") in {(r.secret, r.dest) for r in routes(base)}


@pytest.mark.parametrize(
    "params",
    ['{base_url: "http://pr.example"}', '{Base-URL: "http://pr.example"}',
     '{azure_endpoint: "http://pr.example"}', '{extra: {where: "https://pr.example/v1"}}',
     '{api_base_url: "pr.example:443"}'],
)  # fmt: skip
def test_litellm_params_name_a_destination_in_any_spelling(tmp_path: Path, params: str) -> None:
    model = "  - {name: m, backend: litellm, model: openai/x, api_key_env: BASE_KEY"
    base = _load(tmp_path, "base", f"models:\n{model}}}\nbenchmarks: [arith]\n")
    pr = _load(tmp_path, "pr", f"models:\n{model}, params: {params}}}\nbenchmarks: [arith]\n")
    with pytest.raises(ConfigError, match=r"would send BASE_KEY to .*pr\.example"):
        check_secret_routes(base, pr, "evals.yaml")


def test_tracing_and_the_hub_are_routes_the_environment_sets(tmp_path: Path) -> None:
    config = _load(tmp_path, "c", "models:\n  - {name: m, backend: litellm, model: openai/x}\n"
                   "benchmarks: [arith]\n")  # fmt: skip
    environ = {"LANGFUSE_PUBLIC_KEY": "p", "LANGFUSE_SECRET_KEY": "s",
               "LANGFUSE_HOST": "https://trace.example"}  # fmt: skip
    found = {(r.secret, r.dest) for r in environment_routes(config, environ)}
    assert ("LANGFUSE_SECRET_KEY", "https://trace.example:443") in found
    assert ("HF_TOKEN", "the Hugging Face Hub") in found

"""A config validated through the union members it names (evalgate.config._narrow) gives what
the whole union gives: the same instance, class and fields set, and where the data is wrong the
same errors, word for word; a benchmark's dump is the class's own."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from evalgate.config._document import EvalsFile
from evalgate.config._narrow import validate_narrowed
from evalgate.config.load import _BACKENDS, _SCORERS, dump_benchmark
from evalgate.config.spec import ArithBenchmark, FileBenchmark, HFBenchmark

URL = "http://127.0.0.1:9/v1"
JUDGE = {
    "type": "judge",
    "model": {"name": "j", "backend": "openai", "base_url": URL, "model": "j"},
}
SCORERS: list[Any] = [
    None,  # the default
    {"type": "exact", "case_sensitive": True},
    {"type": "numeric", "tolerance": 0.5},
    {"type": "regex", "pattern": "^{answer}$"},
    {"type": "contains"},
    {"type": "choice", "choices": "ABC"},
    JUDGE,
    {**JUDGE, "scale": {"min": 1, "max": 5}, "judge_samples": 3},
    # wrong: each must fail with the union's own errors
    {"type": "regex", "pattern": "("},
    {"type": "choice", "choices": "A"},
    {**JUDGE, "mode": "reference", "scale": {"min": 1, "max": 5}},
    {**JUDGE, "model": {"backend": "vllm", "name": "v"}},
    {"type": "exact", "nope": 1},
    {"type": "fuzzy"},
    {"case_sensitive": True},
    "exact",
    {"type": 3},
]
MODELS: list[Any] = [
    [{"name": "a", "backend": "openai", "base_url": URL, "model": "m"}],
    [
        {"name": "a", "backend": "local"},
        {"name": "b", "backend": "openai", "base_url": URL, "model": "m"},
    ],
    [{"name": "v", "backend": "vllm", "model": "org/m", "revision": "abc"}],
    [{"name": "l", "backend": "litellm", "model": "openai/gpt-4o-mini"}],
    [{"name": "m", "backend": "modal-vllm", "model": "org/m", "gpu": "L40S"}],
    # wrong
    [{"name": "a", "backend": "openai", "base_url": "ftp://x", "model": "m"}],
    [{"name": "a", "backend": "openai", "model": "m"}, {"name": "b", "backend": "local"}],
    [{"name": "a", "backend": "nope"}],
    [{"name": "a"}],
    [],
    ["local"],
    None,
    {"name": "a", "backend": "local"},
]


def _same(cls: type[BaseModel], data: dict[str, Any], field: str, tag: str, members: Any) -> Any:
    """Validates ``data`` both ways and checks they agree; returns the instance (None if
    invalid)."""
    from evalgate.config._narrow import named_members

    value = data.get(field, {tag: next(iter(members))} if field == "scorer" else [{tag: "local"}])
    wanted = named_members(value, tag, members)
    try:
        expected = cls.model_validate(data)
    except ValidationError as exc:
        with pytest.raises(ValidationError) as caught:
            validate_narrowed(cls, data, field, wanted, tag)
        assert caught.value.json() == exc.json()  # each error: type, place, message, input
        assert str(caught.value) == str(exc)
        return None
    got = validate_narrowed(cls, data, field, wanted, tag)
    assert type(got) is cls
    assert got == expected
    assert got.model_fields_set == expected.model_fields_set
    assert got.model_dump() == expected.model_dump()
    return got


@pytest.mark.parametrize("kind", [ArithBenchmark, FileBenchmark, HFBenchmark])
def test_a_benchmark_validated_by_the_scorer_it_names_is_the_unions(kind: Any) -> None:
    extra = {ArithBenchmark: {}, FileBenchmark: {"path": "/x.jsonl"}, HFBenchmark: {"dataset": "d"}}
    tag = kind.model_fields["kind"].annotation.__args__[0]
    valid = 0
    for scorer in SCORERS:
        data = {"name": "b", "kind": tag, **extra[kind]}
        if scorer is not None:
            data["scorer"] = scorer
        bench = _same(kind, data, "scorer", "type", _SCORERS)
        if bench is not None:
            valid += 1
            assert dump_benchmark(bench) == bench.model_dump(mode="json")
    assert valid == 8


def test_evals_yaml_validated_by_the_backends_it_names_is_the_unions() -> None:
    valid = 0
    for models in MODELS:
        data: dict[str, Any] = {"benchmarks": ["arith"], "gate": {"margin": 0.05}}
        if models is not None:
            data["models"] = models
        valid += _same(EvalsFile, data, "models", "backend", _BACKENDS) is not None
    data = {"benchmarks": ["arith"]}  # no models: the embedded one
    assert _same(EvalsFile, data, "models", "backend", _BACKENDS).models[0].backend == "local"
    assert valid == 6

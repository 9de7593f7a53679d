"""Start-up: what creating evalgate's own classes costs every command (never how long it takes:
bench/startup.py times it). Each check runs in a fresh interpreter, as a user's command does."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.conftest import python_child

# The evals.yaml and run-file models a run's start-up creates, with the names of the fields
# whose annotation is a string.
_STRING_ANNOTATIONS = """
import json
import evalgate.cli, evalgate.pipeline, evalgate.commands.local
from pydantic import BaseModel
def below(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from below(sub)
print(json.dumps({
    f"{c.__module__}.{c.__qualname__}": sorted(
        n for n, a in vars(c).get("__annotations__", {}).items() if isinstance(a, str)
    )
    for c in below(BaseModel)
    if c.__module__.startswith(("evalgate.config.", "evalgate.run.runfiles"))
}))
"""


def test_the_config_and_run_file_models_are_given_annotation_objects() -> None:
    """pydantic evaluates a field's annotation when it creates the class: a string (`from
    __future__ import annotations`) is compiled and evaluated, field by field, a third of the
    models' creation time on every command's start-up path (~6 ms of a run's)."""
    proc = python_child(_STRING_ANNOTATIONS, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    models = json.loads(proc.stdout)
    assert "evalgate.config.spec.benchmarks.ArithBenchmark" in models  # it saw them
    assert "evalgate.run.runfiles.RunConfig" in models
    assert {model: names for model, names in models.items() if names} == {}


# The dataclasses a run's start-up creates that write their own __init__ and still have the
# dataclass generate one.
_DISCARDED_INITS = """
import dataclasses, json, sys
import evalgate.cli, evalgate.pipeline, evalgate.commands.local
found = []
for name, module in list(sys.modules.items()):
    if name.startswith("evalgate"):
        for cls in vars(module).values():
            if isinstance(cls, type) and cls.__module__ == name and dataclasses.is_dataclass(cls):
                init = cls.__dict__.get("__init__")
                own = init is not None and init.__code__.co_filename != "<string>"
                if own and cls.__dataclass_params__.init:
                    found.append(f"{name}.{cls.__qualname__}")
print(json.dumps({"found": sorted(found), "seen": "evalgate.serve.client" in sys.modules}))
"""


def test_no_dataclass_compiles_an_init_it_discards() -> None:
    """A dataclass compiles its generated methods from source when the class is created (one
    `exec` each): one whose class writes its own ``__init__`` (Reply, Outcome: the hot path's
    constructors) says ``init=False``, or the generated one is compiled only to be dropped."""
    proc = python_child(_DISCARDED_INITS, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["seen"]  # the run's modules were loaded
    assert out["found"] == []


def test_start_up_dataclasses_without_generated_equality_keep_what_callers_rely_on() -> None:
    """Layer, Overrides, ServeContext, LoadedRun, RunSummary and Endpoint are frozen, and
    compare as identities (eq=False: none is ever compared, and each generated method is
    compiled at start-up); the command table's entries are immutable named tuples. Frozen stays
    frozen; `replace` still copies."""
    from evalgate.cli import COMMANDS
    from evalgate.config._yamlio import Layer
    from evalgate.config.overrides import parse_overrides
    from evalgate.serve.base import ServeContext

    layer = Layer(data={"a": 1}, source="evals.yaml", lines={("a",): 1})
    overrides = parse_overrides(["--eval.rollouts=2"])
    ctx = ServeContext(log_dir=Path("logs"), environ={})
    for value in (layer, overrides, ctx):
        field = dataclasses.fields(value)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, None)
        copy = dataclasses.replace(value)
        assert copy is not value and copy != value and value == value
        assert {value: 1}[value] == 1  # hashable (an identity), where a dict field made it not
    assert overrides.top == {"eval": {"rollouts": 2}}
    from evalgate.run.rundir import LoadedRun
    from evalgate.run.summary import RunSummary
    from evalgate.serve.base import Endpoint

    for cls in (LoadedRun, RunSummary, Endpoint):  # frozen as before
        assert cls.__dataclass_params__.frozen and not cls.__dataclass_params__.eq  # type: ignore[attr-defined]
    # Item, Outcome and Reply: equal by value as before, and never hashable (a dict field made
    # the generated __hash__ raise; they now say so without compiling one).
    from evalgate.serve.client import Reply
    from evalgate.suites.base import Item, Outcome

    for make in (
        lambda: Item("id", "1 + 1", "2"),
        lambda: Outcome([], "2", 1.0, {}, {}),
        lambda: Reply("2", {}, 0.1, 1),
    ):
        assert make() == make()
        with pytest.raises(TypeError):
            hash(make())
    with pytest.raises(AttributeError):
        COMMANDS["local"].requests = False  # type: ignore[misc]
    assert COMMANDS["local"] == ("local", "run", True, True, True)

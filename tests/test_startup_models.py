"""Start-up: what creating evalgate's own classes costs every command (never how long it takes:
bench/startup.py times it). Each check runs in a fresh interpreter, as a user's command does."""

from __future__ import annotations

import json

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

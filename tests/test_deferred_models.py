"""Models built on first use (pydantic's ``defer_build``, issue #36) keep nothing of the frame
that first used them.

pydantic's own deferred build resolves annotations in the namespace of the frame that first
validates the class and can keep that namespace: a gate that first built its settings class
while the caller held two loaded runs kept both alive for the life of the process
(tests/test_columnar_reads.py's held-runs test caught it: the runs outlived their last
reference). :class:`evalgate.config.spec._base.Deferred` resolves them in the class's own module
instead, as an eager build at import does; every deferred model must be one.
"""

from __future__ import annotations

import importlib
import pkgutil

from pydantic import BaseModel

import evalgate
from evalgate.config.spec._base import Deferred


def _models() -> list[type[BaseModel]]:
    seen: dict[str, type[BaseModel]] = {}
    for info in pkgutil.walk_packages(evalgate.__path__, "evalgate."):
        if info.name.endswith(("__main__", "_vf_worker", "_humaneval_runner", "_inspect_runner")):
            continue  # entry points and code run in other interpreters
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            ours = isinstance(value, type) and value.__module__.startswith("evalgate.")
            if ours and issubclass(value, BaseModel):
                seen[f"{value.__module__}.{value.__qualname__}"] = value
    return list(seen.values())


def test_every_deferred_model_resolves_in_its_own_module() -> None:
    models = _models()
    deferred = [m for m in models if m.model_config.get("defer_build")]
    assert len(deferred) > 20  # the config's and the run files' models
    wrong = [m.__qualname__ for m in deferred if not issubclass(m, Deferred)]
    assert wrong == []
    names = {m.__qualname__ for m in deferred}
    assert {"Config", "GateSettings", "RunConfig", "RunMetadata", "ArithBenchmark"} <= names

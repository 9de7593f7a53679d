"""Start-up: which modules a command loads and what it compiles (never how long it takes:
bench/startup.py times it).

Each command runs in a fresh interpreter, as a user runs it; at exit the child writes the names
in ``sys.modules``. A module on a "never" list costs start-up time for nothing on that path:
statistics with nothing to compare, schema generation, a terminal UI in CI, backends and suites
the config does not use.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, answer_arith, modules_loaded, python_child, write_config

# Loaded by no run of an OpenAI-compatible `kind: qa` model on 0/1 scores, gated by thresholds
# or not gated at all: the exact binomial test of a threshold needs no arrays and no scipy.
NEVER = [
    "numpy",
    "scipy",
    "evalgate.stats._common",
    "rich",  # the progress bar is for a terminal; these runs are not attached to one
    "evalgate.config.schema",  # JSON Schema generation: `evalgate schema` only
    "difflib",  # "did you mean": a config mistake's message only
    "evalgate.run.sequential",
    "evalgate.stats._paired",
    "evalgate.stats._power",
    "evalgate.stats._sequential",
    "litellm",
    "openai",
    "modal",
    "verifiers",
    "inspect_ai",
    "xllamacpp",
    "evalgate.serve.litellm",
    "evalgate.serve.llama_cpp",
    "evalgate.serve.modal_vllm",
    "evalgate.serve.vllm_local",
    "evalgate.serve.lifecycle",
    "evalgate.suites.agent",
    "evalgate.suites.verifiers",
    "evalgate.suites.humaneval",
    # a judge is a scorer some benchmarks use: its runtime, labels and relay load with one
    "evalgate.score.judge",
    "evalgate.score.verdict",
    "evalgate.score._prompts",
    "evalgate.score.labels",
    "evalgate.score.relay",
    "evalgate.suites.inspect_task",
    "evalgate.sandbox.base",  # a qa run opens no sandbox
    "evalgate.sandbox.docker",
    "evalgate.sandbox.bubblewrap",
    "evalgate.sandbox.modal",
    "evalgate.publish",
    "evalgate.store",
    "evalgate.action",
    # the runs reach their server by IP address: no host name to encode (the probe's resolver)
    "encodings.idna",
]


def _hits(loaded: set[str], never: list[str]) -> list[str]:
    return sorted(m for m in loaded if any(m == n or m.startswith(n + ".") for n in never))


def _one_item(tmp_path: Path, url: str, gate: str = "") -> Path:
    return write_config(
        tmp_path,
        f"models: [{{name: m, backend: openai, base_url: '{url}', model: m}}]\n"
        "benchmarks: [{name: arith, eval: {num_examples: 1}}]\n" + gate,
    )


def test_a_one_item_run_without_a_gate_loads_no_numpy_or_scipy(
    tmp_path: Path, scripted_server: Any
) -> None:
    config = _one_item(tmp_path, scripted_server(answer_arith).base_url)
    args = ["local", str(config), "--output", str(tmp_path / "out"), "--no-cache"]
    loaded, proc = modules_loaded(args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "evalgate.run.summary" in loaded and "evalgate.report.html" in loaded  # it did run
    assert _hits(loaded, NEVER) == []
    assert "sqlite3" not in loaded  # --no-cache: the response cache's database is never opened


def test_a_one_item_run_with_a_threshold_loads_no_numpy_or_scipy(
    tmp_path: Path, scripted_server: Any
) -> None:
    gate = "gate: {thresholds: {arith: {accuracy: 0.5}}}\n"
    config = _one_item(tmp_path, scripted_server(answer_arith).base_url, gate)
    args = ["local", str(config), "--output", str(tmp_path / "out"), "--no-cache"]
    loaded, proc = modules_loaded(args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "evalgate.gate" in loaded
    assert _hits(loaded, NEVER) == []


def test_validate_loads_no_client_and_no_statistics(tmp_path: Path) -> None:
    """Nor Jinja: the prompt it renders for each item is the default `{{ prompt }}`."""
    config = _one_item(tmp_path, "http://127.0.0.1:9/v1")
    loaded, proc = modules_loaded(["validate", str(config)], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "evalgate.config.load" in loaded and "evalgate.suites.qa" in loaded
    assert _hits(loaded, [*NEVER, "aiohttp", "jinja2"]) == []


# Renders both report templates; with "cached", compiling a template is an error.
_RENDER = """
import sys, jinja2
if sys.argv[1] == "cached":
    def refuse(self, source, name=None, *args, **kwargs):
        raise AssertionError(f"{name} compiled again")
    jinja2.Environment.compile = refuse
from evalgate.report import _ENV as card
from evalgate.report.html import _ENV as page
card.get_template("scorecard.md.j2")
page.get_template("report.html.j2")
"""


def test_report_templates_compile_once_per_cache(tmp_path: Path) -> None:
    """The scorecard's and the report page's compiled templates are read back, not rebuilt."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVALGATE_CACHE_DIR": str(tmp_path)}
    for mode in ("first", "cached"):
        proc = subprocess.run(
            [sys.executable, "-c", _RENDER, mode],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, (mode, proc.stderr[-2000:])


# Runs ``python -m evalgate ARGS`` as the console script does and, at exit, writes the garbage
# collector's statistics.
def _at_exit(recorded: str) -> str:
    """A child script: runs the console entry (``sys.argv[2:]``) and, as it leaves, writes the
    JSON of the expression ``recorded`` to the file ``sys.argv[1]``."""
    return f"""
import gc, importlib, json, os, sys
out = sys.argv[1]
leave = os._exit
def record(code):
    open(out, "w").write(json.dumps({recorded}))
    leave(code)
os._exit = record
sys.argv = ["evalgate", *sys.argv[2:]]
from evalgate.cli import entry
entry()
"""


_GC_CHILD = _at_exit("gc.get_stats()")


def _one_item_child(child: str, tmp_path: Path, scripted_server: Any) -> Any:
    """What ``child`` (a script given an output file, then `evalgate local`'s arguments)
    recorded of a 1-item run in its own process."""
    config = _one_item(tmp_path, scripted_server(answer_arith).base_url)
    out = tmp_path / "child.json"
    args = ["local", str(config), "--output", str(tmp_path / "out"), "--no-cache"]
    proc = python_child(child, str(out), *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(out.read_text(encoding="utf-8"))


def test_a_one_item_run_does_not_collect_garbage_all_through_start_up(
    tmp_path: Path, scripted_server: Any
) -> None:
    """Start-up allocates ~100,000 objects and frees almost none: collecting every 700 (the
    default) made ~130 collections of a 1-item run, ~8% of its CPU time, for nothing."""
    young, _, old = _one_item_child(_GC_CHILD, tmp_path, scripted_server)
    assert young["collections"] < 60, young
    assert old["collections"] == 0, old


# Whether the run files' validators were built by the time the run left.
_BUILT_CHILD = _at_exit(
    "{n: getattr(importlib.import_module('evalgate.run.runfiles'), n).__pydantic_complete__"
    " for n in ('RunConfig', 'RunMetadata')}"
)


def test_a_one_item_run_writes_its_metadata_without_building_a_validator(
    tmp_path: Path, scripted_server: Any
) -> None:
    """metadata.json is what evalgate itself made: written unvalidated (its validator was ~10 ms
    of a 1-item run); the reader still validates it whole."""
    from evalgate.run.rundir import run_dirs_under
    from evalgate.run.runfiles import read_metadata

    built = _one_item_child(_BUILT_CHILD, tmp_path, scripted_server)
    assert built == {"RunConfig": True, "RunMetadata": False}
    (run,) = run_dirs_under(tmp_path / "out")
    meta = read_metadata(run)
    assert (meta.benchmark, meta.num_examples, meta.complete) == ("arith", 1, True)
    assert list(meta.as_written())[:3] == ["benchmark", "model", "model_id"]


# At exit: how many CAs aiohttp's two default TLS contexts hold (evalgate._tls).
_CA_CHILD = _at_exit(
    "[sys.modules['aiohttp.connector']._SSL_CONTEXT_VERIFIED.cert_store_stats()['x509_ca'],"
    " sys.modules['aiohttp.connector']._SSL_CONTEXT_UNVERIFIED.cert_store_stats()['x509_ca']]"
)


def test_a_run_against_an_http_endpoint_loads_no_ca_bundle(
    tmp_path: Path, scripted_server: Any
) -> None:
    """aiohttp builds two TLS contexts at import, each loading the system's CA bundle (~45 ms of
    CPU, 14% of a run's start-up); a run whose endpoint is http:// never uses them, so it never
    loads the bundle (tests/test_tls.py: a TLS connection loads it first)."""
    assert _one_item_child(_CA_CHILD, tmp_path, scripted_server) == [0, 0]


# At exit: how many times the run listed the installed distributions (pydantic's plugin scan).
_SCANS_CHILD = _at_exit("scans").replace(
    "out = sys.argv[1]\n",
    "out = sys.argv[1]\n"
    "import importlib.metadata as metadata\n"
    "scans, listed = 0, metadata.distributions\n"
    "def counted(*args, **kwargs):\n"
    "    global scans\n"
    "    scans += 1\n"
    "    return listed(*args, **kwargs)\n"
    "metadata.distributions = counted\n",
)


def test_a_run_builds_its_validators_without_reading_every_distribution(
    tmp_path: Path, scripted_server: Any
) -> None:
    """pydantic's first validator loads its plugins by reading the entry points of every
    installed distribution (~6 ms with 228 of them); evalgate's models are built without
    plugins, so a run reads none."""
    assert _one_item_child(_SCANS_CHILD, tmp_path, scripted_server) == 0


_BUILT_AT_IMPORT = """
import json, sys
import evalgate.cli, evalgate.pipeline, evalgate.report.html, evalgate.report.junit
import evalgate.suites.qa, evalgate.run.records
from pydantic import BaseModel
def below(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from below(sub)
built = {f"{c.__module__}.{c.__qualname__}" for c in below(BaseModel) if c.__pydantic_complete__}
print(json.dumps({
    "built": sorted(n for n in built if n.startswith("evalgate.")),
    # the first validator built anywhere (a model or a TypeAdapter) loads pydantic's plugins
    "plugins": "pydantic.plugin._loader" in sys.modules,
}))
"""


def test_importing_a_run_builds_no_validator() -> None:
    """A validator built at import (a model instance or a TypeAdapter at module level) is paid by
    every command, whatever its config uses: each is built when first used instead."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _BUILT_AT_IMPORT],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == {"built": [], "plugins": False}


# Runs the console entry and, at exit, writes whether the collector runs and what it froze.
_HELD_CHILD = _at_exit("[gc.isenabled(), gc.get_freeze_count(), gc.get_stats()[0]]")


def test_a_run_collects_no_garbage_until_it_has_started(
    tmp_path: Path, scripted_server: Any
) -> None:
    """Start-up's ~80,000 objects live as long as the process: the collector is held off while
    they are made, then they are frozen (never scanned again) and the collector runs again for
    the run's own garbage."""
    enabled, frozen, _ = _one_item_child(_HELD_CHILD, tmp_path, scripted_server)
    assert enabled
    assert frozen > 30_000, frozen


def test_a_command_that_runs_nothing_gets_the_collector_back_at_once(tmp_path: Path) -> None:
    """Only a run releases the collector itself: any other command (compare over a million
    items among them) runs with it, and freezes nothing."""
    config = _one_item(tmp_path, "http://127.0.0.1:9/v1")
    out = tmp_path / "child.json"
    proc = python_child(_HELD_CHILD, str(out), "validate", str(config), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    enabled, frozen, young = json.loads(out.read_text(encoding="utf-8"))
    assert (enabled, frozen) == (True, 0)
    assert young["collections"] > 0  # it did collect while validating


_BUILT_FIRST = """
import json, sys
from pathlib import Path
from evalgate.config.load import EvalsFile
from evalgate.config.spec import models, _base
EvalsFile.model_rebuild()  # what validating a config the narrowed copy refuses builds
held = [models.LocalModel, models.OpenAIModel, models.VLLMModel, _base.Sampling, _base.EvalSettings]
print(json.dumps({c.__name__: c.__pydantic_complete__ for c in held}))
"""


def test_the_models_a_config_model_holds_are_built_before_it(tmp_path: Path) -> None:
    """pydantic reuses a built model's schema inside another's and generates an unbuilt one's
    again inside each holder: every backend inside evals.yaml's model list, and again inside each
    benchmark's judge scorer. Built bottom-up, each is generated once."""
    proc = python_child(_BUILT_FIRST, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert all(json.loads(proc.stdout).values()), proc.stdout


# Which config validators a 1-item run had built when it left.
_SPEC_BUILT_CHILD = _at_exit(
    "{n: getattr(importlib.import_module(m), n).__pydantic_complete__ for m, n in ["
    "('evalgate.config.spec.models', 'OpenAIModel'), ('evalgate.config.spec.models', 'LocalModel'),"
    " ('evalgate.config.spec.models', 'VLLMModel'), ('evalgate.config.spec.judge', 'JudgeScorer'),"
    " ('evalgate.config.spec.benchmarks', 'RegexScorer')]}"
)


def test_a_run_builds_the_validators_of_the_backends_and_scorers_its_config_names_only(
    tmp_path: Path, scripted_server: Any
) -> None:
    """evals.yaml's models and a benchmark's scorer are unions of every backend and every scorer
    (the judge's holding every backend again): a run of an OpenAI-compatible model on an exact
    scorer builds those two, not the rest (a third of its config's validation time)."""
    built = _one_item_child(_SPEC_BUILT_CHILD, tmp_path, scripted_server)
    assert built == {
        "OpenAIModel": True,
        "LocalModel": False,
        "VLLMModel": False,
        "JudgeScorer": False,
        "RegexScorer": False,
    }


_TYPED_DICTS = """
import json, sys, typing
import evalgate.report, evalgate.report._charts, evalgate.report.html
built = [
    f"{name}.{attr}"
    for name in ("evalgate.report", "evalgate.report._charts", "evalgate.report.html")
    for attr, value in vars(sys.modules[name]).items()
    if typing.is_typeddict(value)
]
print(json.dumps(built))
"""


def test_the_report_modules_build_no_typeddict_class_at_import() -> None:
    """The page's data shapes are TypedDicts for the type checker only: built at import, each
    field's annotation is compiled (~1 ms in all, on every run's way out)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _TYPED_DICTS], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == []

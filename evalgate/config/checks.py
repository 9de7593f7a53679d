"""Checks beyond the schema: what a run would trip over before (or instead of) its first request.

``check_policy`` runs inside ``load_config`` (no I/O): threshold metrics a benchmark's scorer never
produces, ``gate.metrics`` typos, more generated items asked for than exist. ``check_data`` is what
``evalgate validate`` adds: it reads every dataset, checks its rows, and renders each prompt
template, exactly as ``local`` does before it starts a model — each error points at the line of
evals.yaml that set the field.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate.errors import ConfigError

if TYPE_CHECKING:
    from evalgate.config.load import Config
    from evalgate.config.spec import Benchmark, Model, VerifiersBenchmark

__all__ = ["check_data", "check_environment", "check_policy", "produced_metrics"]

# Kinds whose rollouts report exactly {"accuracy": reward}; verifiers environments name their own.
_ACCURACY_KINDS = {"arith", "jsonl", "hf", "agent", "humaneval"}
# Kinds whose suites `validate` builds as `local` does before serving: agent tasks are read and
# checked (task files, agent command, variants' files), an inspect task is loaded and its samples
# listed, HumanEval's problems read and its prompt template rendered. No sandbox is opened:
# whether one can run here is `evalgate doctor`'s question.
_BUILT_KINDS = {"agent": "tasks", "inspect": "task", "humaneval": "prompt_template"}


class _NoSandboxes:
    """Stands in for the run's sandbox pool: validate builds suites but runs nothing. A suite
    gets the backend's class, which says what it can run (a task's own image, say) without
    asking whether it is available here."""

    def get(self, name: str) -> Any:
        from evalgate.sandbox import backend_class

        return backend_class(name)


def _check_built(config: Config, bench: Benchmark, built: dict[str, list[Any]]) -> str:
    import shutil

    from evalgate.suites.base import build_suites

    try:
        suites = build_suites(bench, _NoSandboxes())
    except ConfigError as exc:
        at = config.locate(bench.name, getattr(exc, "field", None) or _BUILT_KINDS[bench.kind])
        raise ConfigError(f"{at}: {exc}") from None
    for suite in suites:  # an inspect suite made a folder for logs it will never write
        log_dir = getattr(suite, "log_dir", None)
        if log_dir is not None:
            shutil.rmtree(log_dir, ignore_errors=True)
    built[bench.name] = suites
    what = {"agent": "tasks", "inspect": "samples"}.get(bench.kind, "items")
    return f"{bench.name}: {len(suites[0].items)} {what} read"


def _check_verifiers_installed(config: Config, bench: VerifiersBenchmark) -> str:
    """The environment's module is importable where the worker will look: ``env_path``, then
    the installed packages (never the working directory). Found, not imported: importing runs
    the environment's code, and loading its data may need the network — that is the run's."""
    import importlib.machinery
    import os
    import sys

    from evalgate.suites._vf_runner import module_name

    if bench.env_path is not None and not Path(bench.env_path).is_dir():
        raise ConfigError(
            f"{config.locate(bench.name, 'env_path')}: {bench.env_path}: no such folder "
            "(relative paths start at the evals.yaml)"
        )
    name = module_name(bench.env_id)
    cwd = {"", os.getcwd()}  # the worker runs with -P: a checkout's folders are not searched
    paths = [*([bench.env_path] if bench.env_path else []), *(p for p in sys.path if p not in cwd)]
    if importlib.machinery.PathFinder.find_spec(name.split(".")[0], paths) is None:
        where = f" in {bench.env_path} or" if bench.env_path else ""
        raise ConfigError(
            f"{config.locate(bench.name, 'env_id')}: verifiers environment {bench.env_id!r} is "
            f"not installed (no module {name!r}{where} among the installed packages); install "
            "its package (see docs/verifiers.md) or set env_path"
        )
    return f"{bench.name}: environment module {name!r} found (its data are read at run time)"


def produced_metrics(bench: Benchmark) -> set[str] | None:
    """The metrics a benchmark's runs report; None when only the environment knows."""
    if bench.kind not in _ACCURACY_KINDS:
        return None
    k = bench.eval.rollouts
    scorer = getattr(bench, "scorer", None)
    pairwise = getattr(scorer, "mode", None) == "pairwise"  # a judge's preference, not a grade
    return {"win_rate" if pairwise else "accuracy"} | (
        {f"pass@{k}", f"pass^{k}"} if k > 1 else set()
    )


def _unknown_metric(metric: str, produced: set[str], bench: str) -> str:
    close = difflib.get_close_matches(metric, sorted(produced), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    if metric.startswith(("pass@", "pass^")) and metric not in produced:
        hint += f" ({metric} needs eval.rollouts = {metric[5:]} on {bench})"
    return f"{bench} never produces metric {metric!r}{hint}; it produces: " + ", ".join(
        sorted(produced)
    )


# litellm_params with a field of their own in evals.yaml (the key stays out of files).
# LiteLLM params that hold secrets (`aws_secret_access_key`, `vertex_credentials`); not prices
# (`input_cost_per_token`).
_SECRET_PARAM = re.compile(r"(key|secret|password|credentials|token)$", re.IGNORECASE)
_RESERVED_PARAMS = {"model": "model", "api_base": "api_base", "api_key": "api_key_env"}


def _check_model(model: Model, index: int, where: Callable[[tuple[str | int, ...]], str]) -> None:
    """What a serving backend would refuse when it starts, said before anything starts."""
    at = f"models[{index}]"
    if getattr(model, "proxy_url", None):
        for name in ("api_base", "params"):
            if getattr(model, name):  # the proxy is configured elsewhere: dropped in silence
                raise ConfigError(
                    f"{where(('models', index, name))}: {at}.{name}: cannot apply with "
                    "proxy_url (configure it on that proxy, or drop proxy_url to let evalgate "
                    "start one)"
                )
    for key in sorted(set(getattr(model, "params", None) or {}) & set(_RESERVED_PARAMS)):
        raise ConfigError(  # never the value: `params: {api_key: sk-…}` is a pasted key
            f"{where(('models', index, 'params', key))}: {at}.params.{key}: set "
            f"{_RESERVED_PARAMS[key]} instead (value not shown)"
        )
    for key, value in sorted((getattr(model, "params", None) or {}).items()):
        secretish = bool(_SECRET_PARAM.search(key)) and not key.endswith("_per_token")
        if secretish and not (isinstance(value, str) and value.startswith("os.environ/")):
            raise ConfigError(
                f"{where(('models', index, 'params', key))}: {at}.params.{key}: a secret never "
                f"goes in the file; write {key}: os.environ/NAME and export NAME (value not shown)"
            )
    if model.backend == "modal-vllm":
        have = int(model.gpu.partition(":")[2] or 1)
        need = model.tensor_parallel_size * model.data_parallel_size
        if have != need:  # the deploy would stop here, after the image was built
            raise ConfigError(
                f"{where(('models', index, 'gpu'))}: {at}.gpu: {model.gpu!r} has {have} GPU(s), "
                f"but tensor_parallel_size × data_parallel_size = {need}; make them equal "
                f"(e.g. gpu: {model.gpu.partition(':')[0]}:{need})"
            )
    if extra_args := getattr(model, "extra_args", None):
        from evalgate.serve._vllm_args import check_extra_args

        try:
            check_extra_args(list(extra_args))
        except ConfigError as exc:
            raise ConfigError(f"{where(('models', index, 'extra_args'))}: {at}.{exc}") from None


def check_policy(config: Config, where: Callable[[tuple[str | int, ...]], str]) -> None:
    """Static gate checks; ``where(path)`` gives ``file:line`` of an evals.yaml path."""
    by_name = {b.name: b for b in config.benchmarks}
    for name, minimums in config.gate.thresholds.items():
        produced = produced_metrics(by_name[name])
        for metric in minimums:
            if produced is not None and metric not in produced:
                at = where(("gate", "thresholds", name, metric))
                raise ConfigError(
                    f"{at}: gate.thresholds.{name}.{metric}: "
                    f"{_unknown_metric(metric, produced, name)}"
                )
    everything: set[str] = set()
    known = True  # an environment's metrics are known only once it runs
    for bench in config.benchmarks:
        produced = produced_metrics(bench)
        known = known and produced is not None
        everything |= produced or set()
    for index, metric in enumerate(config.gate.metrics or []):
        if known and metric not in everything:
            raise ConfigError(
                f"{where(('gate', 'metrics', index))}: gate.metrics[{index}]: "
                f"{_unknown_metric(metric, everything, 'no benchmark')}"
            )
    for index, model in enumerate(config.models):
        _check_model(model, index, where)
    for bench in config.benchmarks:
        if bench.kind in ("jsonl", "hf") and bench.prompt_field == bench.answer_field:
            raise ConfigError(
                f"{config.locate(bench.name, 'prompt_field')}: names the answer column "
                f"{bench.answer_field!r}; the model would see the answer (set prompt_field to "
                "the question's column, or use prompt_template)"
            )
        wanted = bench.eval.num_examples
        if bench.kind == "arith" and wanted is not None and wanted > bench.size:
            raise ConfigError(
                f"{config.locate(bench.name, 'eval.num_examples')}: {wanted} items asked for, "
                f"but {bench.name} generates size = {bench.size}; raise size (at most 100000) "
                "or lower num_examples"
            )


def _check_chat_templates(config: Config) -> None:
    """A vLLM model's `chat_template` file exists (`local` stops there before serving)."""
    for model in config.models:
        name = getattr(model, "chat_template", None)
        if not name:
            continue
        from evalgate.serve.chat_template import configured_template

        try:
            configured_template(name, config.path.parent)
        except ConfigError as exc:
            at = config.where[f"models:{model.name}:chat_template"]
            raise ConfigError(f"{at}: {exc}") from None


def check_data(config: Config, built: dict[str, list[Any]] | None = None) -> list[str]:
    """Read every dataset and render every template; one line per benchmark for the plan.

    Raises a ConfigError with each benchmark's problem on its own line, prefixed with the
    evals.yaml line of the field.
    ``built`` receives the suites built, by benchmark name (the estimate reuses them).
    """
    built = {} if built is None else built
    notes: list[str] = []
    problems: list[str] = []  # every benchmark's first problem, said together at the end
    _check_chat_templates(config)
    for bench in config.benchmarks:
        try:
            _check_one(config, bench, built, notes)
        except ConfigError as exc:
            problems.append(str(exc))
    if problems:
        raise ConfigError("\n".join(problems))
    return notes


def _check_one(
    config: Config, bench: Benchmark, built: dict[str, list[Any]], notes: list[str]
) -> None:
    from evalgate.suites.datasets import DataError
    from evalgate.suites.qa import QASuite

    if bench.kind == "agent" and not Path(bench.tasks).exists():
        raise ConfigError(
            f"{config.locate(bench.name, 'tasks')}: {bench.tasks}: no such task directory "
            "or file (relative paths start at the evals.yaml)"
        )
    if bench.kind in _BUILT_KINDS:
        notes.append(_check_built(config, bench, built))
        return
    if bench.kind == "verifiers":
        notes.append(_check_verifiers_installed(config, bench))
        return
    # The kinds whose items `validate` reads (hf datasets are fetched at run time).
    if bench.kind != "arith" and bench.kind != "jsonl":
        notes.append(f"{bench.name}: {bench.kind} data are read at run time (not checked)")
        return
    try:
        suite = QASuite.from_spec(bench)
    except DataError as exc:
        raise ConfigError(f"{config.locate(bench.name, exc.field)}: {exc}") from None
    built[bench.name] = [suite]
    notes.append(f"{bench.name}: {len(suite.items)} items read, prompt template rendered")
    if suite.judge is not None:
        notes.append(_check_judge(config, bench))


def _check_judge(config: Any, bench: Any) -> str:
    """A judged benchmark: its template rendered for every item (by the suite), and its
    labelled set read as `local` reads it before the first request."""
    from evalgate.suites.judge_labels import labels_path, load_labels

    path = labels_path(config, bench)
    if path is None:
        return f"{bench.name}: judge template rendered; no labelled set (agreement not measured)"
    try:
        rows = load_labels(path, bench.scorer)
    except ConfigError as exc:
        raise ConfigError(f"{config.locate(bench.name, 'scorer')}: scorer.labels: {exc}") from None
    return f"{bench.name}: judge template rendered, {len(rows)} labelled examples read"


def check_environment(config: Config, environ: Any) -> list[str]:
    """Warnings for what this environment lacks and `local` needs before its first request: an
    API key variable that is not set. Not errors: `validate` also runs where a run's secrets are
    absent by design (an editor, a pull request from a fork)."""
    notes = []
    for model in config.models:
        name = getattr(model, "api_key_env", None)
        if model.backend in ("openai", "litellm") and name and not environ.get(name):
            notes.append(
                f"model {model.name}: {name} (api_key_env) is not set here; `local` would stop "
                "before its first request"
            )
    if config.publish.hf_hub is not None and not environ.get("HF_TOKEN"):
        notes.append(  # the push comes after the whole run, and then only as a warning
            "publish.hf_hub: HF_TOKEN is not set here; the run's results would not be pushed"
        )
    return notes

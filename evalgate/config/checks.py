"""Checks beyond the schema: what a run would trip over before (or instead of) its first request.

``check_policy`` runs inside ``load_config`` (no I/O): threshold metrics a benchmark's scorer never
produces, ``gate.metrics`` and ``gate.scales`` typos, more generated items asked for than exist,
what a serving backend would refuse. What ``evalgate validate`` adds (reading every dataset,
building the suites) needs the later stages, so it lives with that command
(:mod:`evalgate.commands.validate`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from evalgate.config.vllm_flags import check_extra_args
from evalgate.errors import ConfigError

if TYPE_CHECKING:
    from evalgate.config.load import Config
    from evalgate.config.spec import Benchmark, Model

__all__ = ["check_policy", "produced_metrics"]

# Kinds whose rollouts report exactly {"accuracy": reward}; verifiers environments name their own.
_ACCURACY_KINDS = {"arith", "jsonl", "hf", "agent", "humaneval"}


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
    import difflib  # a mistake's suggestion only: not every load's import

    close = difflib.get_close_matches(metric, sorted(produced), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    if metric.startswith(("pass@", "pass^")) and metric not in produced:
        hint += f" ({metric} needs eval.rollouts = {metric[5:]} on {bench})"
    if bench == "no benchmark":
        said, have = "no benchmark produces", "the benchmarks produce"
    else:
        said, have = f"{bench} never produces", "it produces"
    return f"{said} metric {metric!r}{hint}; {have}: " + ", ".join(sorted(produced))


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
    for metric in config.gate.scales:  # a typo would leave the real metric's scale guessed
        if known and metric not in everything:
            raise ConfigError(
                f"{where(('gate', 'scales', metric))}: gate.scales.{metric}: "
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

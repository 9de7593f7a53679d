"""``evalgate validate``: every check ``local`` makes before its first request, without one.

Past the schema and the policy checks that loading runs (:mod:`evalgate.config.checks`), it reads
every dataset, checks its rows and renders each prompt template exactly as ``local`` does before
it starts a model, builds the suites of the kinds that have files of their own, and estimates
what the run will ask for against the budget. Each error points at the line of evals.yaml that
set the field. A command, not the config stage: these checks need the suites and serving layer.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, cast

from evalgate.errors import ConfigError

if TYPE_CHECKING:
    from evalgate.config.load import Config
    from evalgate.config.spec import ArithBenchmark, Benchmark, FileBenchmark, VerifiersBenchmark
    from evalgate.sandbox import Sandboxes
    from evalgate.sandbox.base import SandboxBackend
    from evalgate.suites import Suite

__all__ = ["check_data", "check_environment", "run"]


def run(
    args: argparse.Namespace, overrides: list[str], environ: dict[str, str], out: IO[str]
) -> int:
    from evalgate.config.load import load_config

    config = load_config(Path(args.config), overrides)
    built: dict[str, list[Suite]] = {}  # suites, reused by the estimate
    notes = check_data(config, built)  # datasets and templates, as `local` reads them
    models = ", ".join(f"{m.name} ({m.backend})" for m in config.models)
    print(f"{args.config}: OK", file=out)
    print(f"  models: {models}", file=out)
    for b in config.benchmarks:
        n = b.eval.num_examples if b.eval.num_examples is not None else "all"
        print(
            f"  benchmark {b.name} ({b.kind}): {n} items × {b.eval.rollouts} rollouts, "
            f"temperature {b.sampling.temperature}, max_tokens {b.sampling.max_tokens}",
            file=out,
        )
    _print_estimate(config, out, built)
    for note in notes:
        print(f"  data {note}", file=out)
    for note in check_environment(config, environ):
        print(f"  warning: {note}", file=out)
    return 0


def _print_estimate(config: Config, out: IO[str], built: dict[str, list[Suite]]) -> None:
    """What the run will ask for, against the budget, before anything is spent."""
    from evalgate.run.budget import BudgetMeter, estimate

    meter = BudgetMeter(config.budget)
    for model in config.models:
        meter.use_model(model)  # a usd cap on a model without a price fails here, not mid-run
    lines, totals = estimate(config, built)
    for line in lines:
        print(line, file=out)
    caps = config.budget.caps()
    if not caps:
        print("  budget: no caps (set budget.tokens / usd / gpu_seconds / wall_s)", file=out)
    for name, cap in caps.items():
        total = totals.get(name)
        if total is None:
            note = "not estimated" if name in totals else "measured while running"
        else:
            shown = f"${total:,.4f}" if name == "usd" else f"{total:,.0f}"
            fits = "fits" if total <= cap else "may exceed it: the run stops at the cap"
            note = f"estimate ≤ {shown} {fits}"
        print(f"  budget {name} {cap:,g}: {note}", file=out)


# Kinds whose suites `validate` builds as `local` does before serving: agent tasks are read and
# checked (task files, agent command, variants' files), an inspect task is loaded and its samples
# listed, HumanEval's problems read and its prompt template rendered. No sandbox is opened:
# whether one can run here is `evalgate doctor`'s question.
_BUILT_KINDS = {"agent": "tasks", "inspect": "task", "humaneval": "prompt_template"}


class _NoSandboxes:
    """Stands in for the run's sandbox pool: validate builds suites but runs nothing. A suite
    gets the backend's class, which says what it can run (a task's own image, say) without
    asking whether it is available here."""

    def get(self, name: str) -> type[SandboxBackend]:
        from evalgate.sandbox import backend_class

        return backend_class(name)


def _check_built(config: Config, bench: Benchmark, built: dict[str, list[Suite]]) -> str:
    import shutil

    from evalgate.suites.base import build_suites

    try:
        # Not a Sandboxes: building reads only the backend's class attributes (its name, whether
        # it runs task images), so the class stands in for an instance that would open it.
        suites = build_suites(bench, cast("Sandboxes", _NoSandboxes()))
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


def _check_vllm_versions(config: Config) -> None:
    """A Modal vLLM model's ``vllm_version`` is one whose CUDA this evalgate recorded: `local`
    refuses any other only when it builds the image, after the run began."""
    from evalgate.serve._cuda import cuda_image

    for model in config.models:
        if getattr(model, "backend", None) != "modal-vllm":
            continue
        try:
            cuda_image(model.vllm_version)  # type: ignore[union-attr]
        except ConfigError as exc:
            at = config.where.get(f"models:{model.name}:vllm_version") or str(config.path)
            raise ConfigError(f"{at}: models.{model.name}.{exc}") from None


def check_data(config: Config, built: dict[str, list[Suite]] | None = None) -> list[str]:
    """Read every dataset and render every template; one line per benchmark for the plan.

    Raises a ConfigError with each benchmark's problem on its own line, prefixed with the
    evals.yaml line of the field.
    ``built`` receives the suites built, by benchmark name (the estimate reuses them).
    """
    built = {} if built is None else built
    notes: list[str] = []
    problems: list[str] = []  # every benchmark's first problem, said together at the end
    _check_chat_templates(config)
    _check_vllm_versions(config)
    for bench in config.benchmarks:
        try:
            _check_one(config, bench, built, notes)
        except ConfigError as exc:
            problems.append(str(exc))
    if problems:
        raise ConfigError("\n".join(problems))
    return notes


def _check_one(
    config: Config, bench: Benchmark, built: dict[str, list[Suite]], notes: list[str]
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


def _check_judge(config: Config, bench: ArithBenchmark | FileBenchmark) -> str:
    """A judged benchmark: its template rendered for every item (by the suite), and its
    labelled set read as `local` reads it before the first request."""
    from evalgate.config.spec import JudgeScorer
    from evalgate.score.labels import labels_path, load_labels

    path = labels_path(config, bench)
    if path is None or not isinstance(bench.scorer, JudgeScorer):  # only a judge has labels
        return f"{bench.name}: judge template rendered; no labelled set (agreement not measured)"
    try:
        rows = load_labels(path, bench.scorer)
    except ConfigError as exc:
        raise ConfigError(f"{config.locate(bench.name, 'scorer.labels')}: {exc}") from None
    return f"{bench.name}: judge template rendered, {len(rows)} labelled examples read"


def check_environment(config: Config, environ: Mapping[str, str]) -> list[str]:
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

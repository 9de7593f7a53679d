"""Runs an inspect_ai task for evalgate, in inspect's own interpreter (run by file path).

A separate process, for two reasons. The task file is the PR's code, and no PR code runs in the
process that decides the verdict (docs/threat-model.md). And inspect_ai needs an ``openai``
newer than verifiers allows, so it usually lives in its own venv (``EVALGATE_INSPECT_PYTHON``).
This file therefore imports nothing from evalgate: it is run by path, with only the stdlib and
inspect_ai. It speaks JSON lines into the file ``--out`` names, never on stdout: a task's own
prints ("Loading dataset…") go to stdout and must not be read as data.
"""

from __future__ import annotations

import os
import sys

# Run by path, Python puts this file's folder (evalgate/suites/) first on sys.path, where its
# siblings (datasets.py, verifiers.py, …) would shadow the third-party modules a task imports
# (Hugging Face ``datasets``: every hf_dataset task "had no @task"). Dropped before any import:
# the same as -P, which only Python 3.11+ knows.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
from collections.abc import Mapping  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING, NotRequired, TypedDict  # noqa: E402

if TYPE_CHECKING:  # inspect_ai's own classes (it ships no type information)
    from inspect_ai import Task
    from inspect_ai.dataset import Sample
    from inspect_ai.log import EvalSample
    from inspect_ai.scorer import Score


class Sources(TypedDict):
    """Where a task's code came from (:func:`_sources`)."""

    files: list[str]  # modules it imported from its folder, relative to it
    package: NotRequired[list[str | None]]  # a registered task's [package, version]


class TaskMeta(Sources):
    """The first line ``list`` writes: what the suite checks before any sample runs."""

    epochs: int
    own_models: dict[str, str]  # task parameters naming a judge model of the task's own
    score_keys: list[str] | None  # the keys of a dict-valued score, when declared


class SampleRecord(TypedDict):
    """One sample × epoch that ``run`` writes (one JSON line each), for the suite."""

    id: str
    epoch: int
    reward: float | None
    scores: dict[str, object]
    completion: str
    messages: list[dict[str, str]]
    usage: dict[str, int]
    grader_usage: dict[str, int]
    error: str | None
    unscored: str | None


# The grader model's name in inspect: its own service, so its key and its usage stay apart.
GRADER_PREFIX = "openai-api/evalgate-grader/"


def _text(value: object) -> str:
    """A sample's input or target as plain text (messages are joined by role)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for v in value:
            if isinstance(v, str):
                parts.append(v)
            else:  # a ChatMessage
                parts.append(f"{getattr(v, 'role', '?')}: {getattr(v, 'text', '') or ''}")
        return "\n".join(parts)
    return "" if value is None else str(value)


class _Unused(logging.Handler):
    """Collects inspect's "param 'x' not used by task 'y'" warnings."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.found: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "not used by task" in message:
            self.found.append(message)


def _load_task(spec: str, task_args: dict[str, object]) -> Task:
    from inspect_ai._eval.loader import load_tasks  # the loader `inspect eval` itself uses

    path, at, name = spec.partition("@")
    if path.endswith(".py") and os.path.isabs(path):
        # inspect globs a bare file path and refuses absolute patterns; this process runs in
        # the task file's folder, so the file's own name finds it.
        path = os.path.relpath(path)
    unused = _Unused()
    logging.getLogger("inspect_ai").addHandler(unused)
    try:
        tasks = load_tasks([path + at + name], task_args=task_args)
    finally:
        logging.getLogger("inspect_ai").removeHandler(unused)
    if unused.found:  # inspect only warns and drops it: a typo would run the task unchanged
        raise SystemExit(f"{spec}: task_args: {'; '.join(unused.found)}")
    if len(tasks) > 1:
        names = ", ".join(t.name for t in tasks)
        raise SystemExit(
            f"{spec} holds {len(tasks)} tasks ({names}): name one, e.g. "
            f"`task: {Path(path).name}@{tasks[0].name}`"
        )
    if not tasks:
        raise SystemExit(f"{spec}: no @task function found")
    return tasks[0]


def _epochs(task: Task) -> int:
    """The epochs the task asks for (an int, or inspect's ``Epochs``); 1 if none."""
    epochs = getattr(task, "epochs", None)
    return int(getattr(epochs, "epochs", epochs) or 1)


def _exam(sample: Sample) -> str:
    """What else of a sample decides its score (choices, metadata a scorer reads, the files
    and setup of its sandbox): a digest, part of the item's hash."""
    parts = {
        "target": sample.target,
        "choices": sample.choices,
        "metadata": sample.metadata,
        "files": sample.files,
        "setup": sample.setup,
        "sandbox": sample.sandbox,
    }
    text = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _sources(spec: str) -> Sources:
    """Where the task's code came from, for its items' hash: the modules it imported from this
    folder (a scorer in a helper module), and a registered task's package version."""
    here = os.path.realpath(os.getcwd())
    files = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        real = os.path.realpath(path) if isinstance(path, str) else ""
        installed = {"site-packages", "dist-packages"} & set(Path(real).parts)  # a venv here
        if real.startswith(here + os.sep) and not installed:
            files.add(os.path.relpath(real, here))
    out: Sources = {"files": sorted(files)}
    if not spec.partition("@")[0].endswith(".py"):
        from importlib.metadata import PackageNotFoundError, version

        package = spec.split("/", 1)[0]
        try:
            out["package"] = [package, version(package.replace("_", "-"))]
        except (PackageNotFoundError, ValueError):
            out["package"] = [package, None]
    return out


# A task parameter that names a model of the task's own (strong_reject's
# ``judge_llm="openai/gpt-4o"``): a judge-ish name whose value is an inspect model name.
_JUDGE_PARAM = re.compile(r"judge|grader|grading|scorer|evaluator|model", re.IGNORECASE)
_MODEL_NAME = re.compile(r"[A-Za-z][\w.-]*/\S+")


def _own_models(task: Task, task_args: Mapping[str, object]) -> dict[str, str]:
    """The task function's parameters that name a judge model of its own, with the value the
    run would use (``task_args``' or the default): the scorer asks that model directly, not the
    ``grader`` role, so a configured grader would go unused."""
    import inspect as pyinspect

    from inspect_ai._util.registry import registry_info, registry_lookup
    from inspect_ai.model import Model

    try:
        fn = registry_lookup("task", registry_info(task).name)
        params = pyinspect.signature(fn).parameters if fn is not None else {}
    except (ValueError, TypeError, AttributeError):  # not a registered task function
        return {}
    out = {}
    for name, param in params.items():
        value = task_args.get(name, param.default)
        if isinstance(value, Model):
            value = str(value)
        if _JUDGE_PARAM.search(name) and isinstance(value, str) and _MODEL_NAME.fullmatch(value):
            out[name] = value
    return out


def _score_keys(task: Task) -> list[str] | None:
    """The keys of the dict-valued score the task's first scorer declares (metrics per key,
    ``@scorer(metrics={"utility": [...], "security": [...]})``), or None where it declares
    none (or a pattern): what ``score_key`` must name, known before any sample runs."""
    from inspect_ai._util.registry import registry_info

    scorers = task.scorer or []
    try:
        metrics = registry_info(scorers[0]).metadata.get("metrics") if scorers else None
    except (ValueError, TypeError, AttributeError):  # a scorer without registry info
        return None
    parts = metrics if isinstance(metrics, list) else [metrics]
    keys = sorted({str(k) for part in parts if isinstance(part, dict) for k in part})
    if not keys or any(ch in key for key in keys for ch in "*?["):
        return None
    return keys


def cmd_list(args: argparse.Namespace) -> int:
    task_args = json.loads(args.task_args)
    task = _load_task(args.task, task_args)
    meta: TaskMeta = {
        **_sources(args.task),
        "epochs": _epochs(task),
        "own_models": _own_models(task, task_args),
        "score_keys": _score_keys(task),
    }
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"task": meta}) + "\n")  # before the samples
        for n, sample in enumerate(task.dataset, 1):
            sid = sample.id if sample.id is not None else n  # inspect numbers id-less 1..n
            metadata = sample.metadata or {}
            row = {"id": str(sid), "input": _text(sample.input), "target": _text(sample.target)}
            row["exam"] = _exam(sample)
            if "group" in metadata:
                row["group"] = str(metadata["group"])
            fh.write(json.dumps(row) + "\n")
    return 0


class ScoreShape(Exception):
    """A score evalgate cannot turn into one reward without being told how (a dict without
    ``score_key``, or without that key): the config's to fix, never a silent 0."""


def _as_float(value: object) -> float | None:
    """inspect's own value_to_float (C/I, yes/no, numbers), which returns 0 for what it does not
    know (a dict, a list) rather than raising: those are refused before it sees them."""
    from inspect_ai.scorer import value_to_float

    if isinstance(value, dict | list):
        return None
    try:
        return float(value_to_float()(value))
    except (TypeError, ValueError):
        return None


class Unscored(Exception):
    """The task left the sample unscored (inspect's ``Score.unscored``: value NaN, or no score
    at all), usually a grader that gave no grade: that rollout's judge error, never a 0, and
    never the benchmark's (the other samples keep their scores, as ``inspect eval`` keeps them)."""


def _unscored(name: str, score: Score, value: object) -> Unscored | None:
    if value is not None and not (isinstance(value, float) and math.isnan(value)):
        return None
    why = getattr(score, "explanation", None) or getattr(score, "reason", None) or "no value"
    reason = getattr(score, "reason", None)
    prefix = f"{reason}: " if reason and reason != why else ""
    first = str(why).strip().splitlines()[0] if str(why).strip() else "no value"
    return Unscored(f"scorer {name!r} left the sample unscored ({prefix}{first[:240]})")


def _reward(sample: EvalSample, score_key: str | None) -> tuple[float | None, dict[str, object]]:
    """The first scorer's value as a float in [0, 1], plus every score for the record. A
    dict-valued score (``{"utility": 0, "security": 1.0}``) gives the reward of the key that
    ``score_key`` names; one benchmark per key gates each key. Raises :class:`Unscored` for a
    sample the task left unscored (checked first: an unscored dict score is a NaN, not a
    dict, and says nothing of ``score_key``)."""
    scores = {name: s.value for name, s in (sample.scores or {}).items()}
    if not sample.scores:
        return None, scores
    name, first = next(iter(sample.scores.items()))
    value = first.value
    if (unscored := _unscored(name, first, value)) is not None:
        raise unscored
    if isinstance(value, dict):
        keys = ", ".join(sorted(map(str, value)))
        if score_key is None:
            raise ScoreShape(
                f"scorer {name!r} gives a dict-valued score (keys: {keys}): set `score_key` to "
                "the key this benchmark gates (one benchmark per key to gate several)"
            )
        if score_key not in value:
            raise ScoreShape(f"score_key {score_key!r}: scorer {name!r} gives keys {keys}")
        value = value[score_key]
        if (unscored := _unscored(name, first, value)) is not None:
            raise unscored
    elif score_key is not None:
        raise ScoreShape(
            f"score_key {score_key!r}: scorer {name!r} gives a single value ({value!r}), not a "
            "dict: drop score_key"
        )
    reward = _as_float(value)
    if reward is not None and not 0.0 <= reward <= 1.0:  # clamping would hide a 1–5 scale
        raise ScoreShape(
            f"scorer {name!r} gives {reward:g}, outside 0–1: evalgate gates a 0–1 reward "
            "(wrap the scorer to scale it, or gate a task whose score is 0–1)"
        )
    return reward, scores


def _plain(value: object) -> object:
    if isinstance(value, float) and math.isnan(value):
        return None  # an unscored value: JSON has no NaN
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value if isinstance(value, int | float | str | bool) or value is None else str(value)


def _record(sample: EvalSample, score_key: str | None = None) -> SampleRecord:
    unscored = None
    try:
        reward, scores = _reward(sample, score_key)
    except Unscored as exc:
        reward, scores, unscored = None, {n: s.value for n, s in sample.scores.items()}, str(exc)
    usage = {"prompt_tokens": 0, "completion_tokens": 0}
    grader = {"prompt_tokens": 0, "completion_tokens": 0}  # the grader role's, counted apart
    for name, u in (sample.model_usage or {}).items():
        into = grader if str(name).startswith(GRADER_PREFIX) else usage
        into["prompt_tokens"] += int(getattr(u, "input_tokens", 0) or 0)
        into["completion_tokens"] += int(getattr(u, "output_tokens", 0) or 0)
    error = None
    if sample.error is not None:
        error = str(getattr(sample.error, "message", sample.error)).splitlines()[0][:300]
    elif reward is None and unscored is None:
        if scores:  # a value inspect cannot read as a number: the scorer's, not the grader's
            error = f"unscorable: the task's scorer gave {scores!r}"
        else:  # no score at all: as inspect, the sample is unscored
            unscored = "the task's scorer gave no score"
    messages = [{"role": m.role, "content": _text(getattr(m, "text", ""))} for m in sample.messages]
    return {
        "id": str(sample.id),
        "epoch": int(sample.epoch),
        "reward": reward,
        "scores": {k: _plain(v) for k, v in scores.items()},
        "completion": sample.output.completion if sample.output else "",
        "messages": messages,
        "usage": usage,
        "grader_usage": grader,
        "error": error,
        "unscored": unscored,  # the suite makes it a judge_unparseable error
    }


def cmd_run(args: argparse.Namespace) -> int:
    from inspect_ai import eval as inspect_eval
    from inspect_ai.log import read_eval_log

    log_dir = Path(args.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    common = {
        "log_dir": str(log_dir),
        "display": "none",
        "max_connections": args.max_connections,
        "fail_on_error": False,  # a sample's error is that rollout's error, counted by evalgate
    }
    generate = {k: v for k, v in json.loads(args.generate).items() if v is not None}
    if args.grader_model:  # model-graded scorers ask for the `grader` role: evalgate's judge
        from inspect_ai.model import GenerateConfig, get_model

        grader_config = {k: v for k, v in json.loads(args.grader_generate).items() if v is not None}
        common["model_roles"] = {
            "grader": get_model(
                GRADER_PREFIX + args.grader_model,
                base_url=args.grader_base_url,
                config=GenerateConfig(**grader_config),
            )
        }
    logs = inspect_eval(
        _load_task(args.task, json.loads(args.task_args)),
        model=f"openai-api/evalgate/{args.model}",
        model_base_url=args.base_url,
        epochs=args.epochs,
        sample_id=args.sample_id or None,
        **common,
        **generate,
    )
    log = read_eval_log(logs[0].location)
    try:
        records = [_record(sample, args.score_key) for sample in log.samples or []]
    except ScoreShape as exc:
        print(f"ScoreShape: {exc}", file=sys.stderr, flush=True)
        return SCORE_SHAPE
    with open(args.out, "w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record) + "\n")
    return 0


SCORE_SHAPE = 5  # the exit status that says "the config must say how to read this score"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="_inspect_runner")
    sub = parser.add_subparsers(dest="command", required=True)
    lst = sub.add_parser("list")
    run = sub.add_parser("run")
    for p in (lst, run):
        p.add_argument("--task", required=True)
        p.add_argument("--task-args", default="{}")
        p.add_argument("--out", required=True, help="where the JSON lines go (not stdout)")
    run.add_argument("--model", required=True)
    run.add_argument("--base-url", required=True)
    run.add_argument("--epochs", type=int, default=1)
    run.add_argument("--log-dir", required=True)
    run.add_argument("--score-key", default=None)
    run.add_argument("--max-connections", type=int, default=8)
    run.add_argument("--generate", default="{}", help="GenerateConfig fields as JSON")
    run.add_argument("--sample-id", action="append", default=[])
    run.add_argument("--grader-model", help="the grader role's model id (evalgate's judge)")
    run.add_argument("--grader-base-url")
    run.add_argument("--grader-generate", default="{}", help="the grader's GenerateConfig")
    args = parser.parse_args(argv)
    os.environ.setdefault("EVALGATE_API_KEY", "none")  # the served endpoint's key, if any
    os.environ.setdefault("EVALGATE_GRADER_API_KEY", "none")  # the grader's, likewise
    return cmd_list(args) if args.command == "list" else cmd_run(args)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:  # inspect's display "none" prints nothing: say why, in one line
        print(
            f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(1) from None

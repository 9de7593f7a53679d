"""The candidate and the exam: every evals.yaml field, classified once.

A pull request exists to change the **candidate**: the model and how it is served, prompts and
templates, sampling, the agent's command and set-up. Everything that decides a score is the
**exam**: benchmark definitions and their data, scorers, tasks, ``eval.*``, sandbox limits and
network, the gate, budgets, publishing. In PR mode the Action takes the exam from the base
commit (:mod:`evalgate.action.exam`) and the candidate from the PR. A ``secret`` field is the
candidate's, but the secret it names may only go where the base config sends it.

:data:`FIELDS` is the one place this is written down, and it says too which exam fields each
run records as its *measurement* (:class:`Measured`: a baseline whose measurement differs is not
compared; :func:`evalgate.run.fingerprint.measurement` reads them from here, with the values
:data:`DERIVED` declares). docs/threat-model.md's table is generated from it
(``python -m evalgate.config.split``; tests/test_fingerprint_fields.py fails when it is stale).
``tests/test_split.py`` walks the schema and fails on any field it cannot classify, so a new
field is classified when it is added. A key classifies its whole subtree unless a longer key
says otherwise; ``[]`` stands for a list's items.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NamedTuple, TypeVar

from pydantic import BaseModel

__all__ = [
    "DERIVED",
    "FIELDS",
    "TABLE_BEGIN",
    "TABLE_END",
    "Measured",
    "Role",
    "docs_table",
    "field_role",
    "merge_benchmark",
]

Role = Literal["candidate", "exam", "secret"]


class Measured(NamedTuple):
    """An exam field that each run records in its fingerprint's measurement.

    ``at``: where in the measurement (``environment.env_id``); the names are those runs were
    recorded with, so that stored baselines stay comparable. ``when``: ``"kind"``, for each
    benchmark whose kind has the field; ``"always"``, null for a kind without it; ``"set"``, only
    when it is not null (runs recorded before the field existed stay comparable). ``form``:
    ``"value"``, or ``"file-name"`` (a ``file.py@task`` by the file's name: the base's run
    happens in another checkout). Within a measured section, a field FIELDS classifies otherwise
    (a judge's ``labels``) is left out."""

    at: str
    when: Literal["kind", "always", "set"] = "kind"
    form: Literal["value", "file-name"] = "value"


C: Role = "candidate"
E: Role = "exam"
S: Role = "secret"
M = Measured

FIELDS: dict[str, Role | Measured] = {
    # -- the document --------------------------------------------------------------------
    "version": E,
    "sampling": C,
    "eval": E,  # num_examples, rollouts, looks, error budget, retries, timeouts, sequential
    "gate": E,
    "baseline": E,
    "budget": E,  # the base's caps are a ceiling: a PR may only lower them
    "publish": E,  # where results go (hf_hub) is not the PR's to choose
    # -- models: the candidate, but its secrets go only where the base sends them ---------
    "models[].name": C,
    "models[].backend": C,
    "models[].model": C,
    "models[].base_url": C,
    "models[].api_base": C,
    "models[].proxy_url": C,
    "models[].api_key_env": S,
    "models[].hf_token_env": S,
    "models[].secrets": S,
    "models[].params": S,  # may name `os.environ/NAME` credentials
    "models[].n_ctx": C,
    "models[].n_parallel": C,
    "models[].n_threads": C,
    "models[].startup_timeout_s": C,
    "models[].num_workers": C,
    "models[].revision": C,
    "models[].tensor_parallel_size": C,
    "models[].data_parallel_size": C,
    "models[].max_model_len": C,
    "models[].gpu_memory_utilization": C,
    "models[].enable_prefix_caching": C,
    "models[].trust_remote_code": C,
    "models[].dtype": C,
    "models[].chat_template": C,
    "models[].extra_args": C,
    "models[].port": C,
    "models[].gpu": C,
    "models[].mode": C,
    "models[].app_name": C,
    "models[].hf_cache_volume": C,
    "models[].vllm_cache_volume": C,
    "models[].scaledown_window_s": C,
    "models[].vllm_version": C,
    # -- benchmarks: what the model is asked is the candidate's; what is measured, the exam -
    "benchmarks[].name": M("benchmark"),
    "benchmarks[].kind": M("kind"),
    "benchmarks[].description": E,
    "benchmarks[].sampling": C,
    "benchmarks[].eval": E,
    "benchmarks[].eval.rollouts": M("rollouts"),  # the rest: how the run goes, not what it scores
    "benchmarks[].system_prompt": C,
    "benchmarks[].prompt_template": C,
    "benchmarks[].scorer": M("scorer", when="always"),  # a judge's model, prompt, scale, sampling
    # a judge's labelled set: the exam's, but it decides no score (it measures the judge for the
    # scorecard) and is a path that differs between the base's tree and the PR's
    "benchmarks[].scorer.labels": E,
    "benchmarks[].grader": M("grader", when="set"),  # an inspect task's grader: the exam's judge
    "benchmarks[].judge": M("judge", when="set"),  # a verifiers environment's judge, likewise
    "benchmarks[].size": E,
    "benchmarks[].seed": E,  # arith's item generator (sampling.seed is the candidate's)
    "benchmarks[].max_operand": E,
    "benchmarks[].ops": E,
    "benchmarks[].path": E,
    "benchmarks[].format": E,
    "benchmarks[].prompt_field": E,
    "benchmarks[].answer_field": E,
    "benchmarks[].id_field": E,
    "benchmarks[].group_field": E,
    "benchmarks[].dataset": E,
    "benchmarks[].subset": E,
    "benchmarks[].split": E,
    "benchmarks[].revision": E,
    "benchmarks[].data_files": E,
    "benchmarks[].tasks": E,  # task folders: instructions, tests, verifiers, environments
    "benchmarks[].agent.type": C,
    "benchmarks[].agent.command": C,
    "benchmarks[].agent.env": C,
    "benchmarks[].agent.max_turns": E,
    "benchmarks[].variants": C,  # skills, MCP config, arguments
    "benchmarks[].sandbox": M("sandbox"),  # limits, image, network, verifier_network
    "benchmarks[].env_id": M("environment.env_id"),
    "benchmarks[].env_path": E,  # a path: its files are hashed into each item (Item.exam)
    "benchmarks[].env_args": M("environment.env_args"),
    "benchmarks[].api": M("environment.api"),
    "benchmarks[].harness": M("environment.harness"),
    "benchmarks[].runtime": M("environment.runtime"),
    # an inspect task file, and its scorer (its files are hashed into each item too)
    "benchmarks[].task": M("task.task", form="file-name"),
    "benchmarks[].task_args": M("task.task_args"),
    # which key of a dict-valued inspect score is the score
    "benchmarks[].score_key": M("task.score_key", when="set"),
    # which of this machine's variables repository code (a task file, an environment) may read
    "benchmarks[].pass_env": E,
}

# What a measurement holds beyond the fields FIELDS marks measured: values of evalgate (or a
# package it runs) that decide the score, computed by :mod:`evalgate.run.fingerprint`. A value
# under a section (``environment.verifiers``) is recorded only where the section is.
DERIVED: dict[str, str] = {
    "scoring_version": "evalgate's scoring version (how scorers score and items are identified)",
    "environment.verifiers": "the installed verifiers package's version",
    "scorer.protocol": "the version of a judge's default prompts and verdict parsing",
}


def field_role(path: str) -> Role | None:
    """The role of a field path (``benchmarks[].sandbox.timeout_s``): its own entry, else its
    nearest classified parent's; None when nothing classifies it."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        entry = FIELDS.get(".".join(parts[:cut]))
        if entry is not None:
            return E if isinstance(entry, Measured) else entry
    return None


def _mixed(path: str) -> bool:
    """True when ``path`` is not classified as a whole but its fields are (``agent``)."""
    return path not in FIELDS and any(k.startswith(path + ".") for k in FIELDS)


_Model = TypeVar("_Model", bound=BaseModel)


def _overlay(base: _Model, pr: BaseModel, prefix: str) -> _Model:
    update: dict[str, object] = {}
    for name in type(base).model_fields:
        path = f"{prefix}.{name}"
        mine, theirs = getattr(base, name), getattr(pr, name, None)
        if _mixed(path) and isinstance(mine, BaseModel) and isinstance(theirs, BaseModel):
            update[name] = _overlay(mine, theirs, path)
        elif field_role(path) in (C, S) and name in type(pr).model_fields:
            update[name] = theirs
        # else the exam's (and an unclassified field fails closed: the base's)
    return base.model_copy(update=update)


def merge_benchmark(base: _Model, pr: BaseModel) -> _Model:
    """The base's benchmark with the PR's candidate fields: the exam stays the base's."""
    return _overlay(base, pr, "benchmarks[]")


# -- the docs' table ---------------------------------------------------------------------------

TABLE_BEGIN = "<!-- exam: generated by `python -m evalgate.config.split`; do not edit -->"
TABLE_END = "<!-- /exam -->"

_ROWS: tuple[tuple[Role, str], ...] = (
    (C, "**candidate** (the PR's)"),
    (S, "**secret** (the PR's, bounded by the base: each secret only to a host the base sends it)"),
    (E, "**exam** (the base's)"),
)
_MEASURED = (
    "**measured** (the exam each run records: a baseline whose measurement differs is not compared)"
)


def _cell(paths: list[str], shown: Callable[[str, str], str]) -> str:
    """Field paths grouped by their list (``models[]``: `name`, `backend`; ...), each as
    ``shown(path, name)`` writes it."""
    groups: dict[str, list[str]] = {}
    for path in paths:
        head, items, rest = path.partition("[].")
        groups.setdefault(head + "[]" if items else "", []).append(
            shown(path, rest if items else path)
        )
    return "; ".join(
        (f"`{group}`: " if group else "") + ", ".join(members) for group, members in groups.items()
    )


def _code(path: str, name: str) -> str:
    return f"`{name}`"


def _measured(path: str, name: str) -> str:
    """A measured field as the table shows it: with those of its fields that are not recorded."""
    left_out = [
        f"`{k.removeprefix(path + '.')}`"
        for k, entry in FIELDS.items()
        if k.startswith(path + ".") and not isinstance(entry, Measured)
    ]
    return f"`{name}`" + (f" (without {', '.join(left_out)})" if left_out else "")


def docs_table() -> str:
    """docs/threat-model.md's table of the candidate and the exam, from :data:`FIELDS`."""
    rows = [TABLE_BEGIN, "| | fields of evals.yaml (and the files they name) |", "|---|---|"]
    for role, title in _ROWS:
        # a field under a section of the same role is said by the section
        paths = [k for k in FIELDS if field_role(k) == role != field_role(k.rpartition(".")[0])]
        rows.append(f"| {title} | {_cell(paths, _code)} |")
    measured = [k for k, entry in FIELDS.items() if isinstance(entry, Measured)]
    derived = "; and " + "; ".join(DERIVED.values())
    rows.append(f"| {_MEASURED} | {_cell(measured, _measured)}{derived} |")
    return "\n".join([*rows, TABLE_END])


if __name__ == "__main__":
    print(docs_table())

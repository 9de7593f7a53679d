"""The candidate and the exam: every evals.yaml field, classified once.

A pull request exists to change the **candidate**: the model and how it is served, prompts and
templates, sampling, the agent's command and set-up. Everything that decides a score is the
**exam**: benchmark definitions and their data, scorers, tasks, ``eval.*``, sandbox limits and
network, the gate, budgets, publishing. In PR mode the Action takes the exam from the base
commit (:mod:`evalgate.action.exam`) and the candidate from the PR. A ``secret`` field is the
candidate's, but the secret it names may only go where the base config sends it.

:data:`FIELDS` is the one place this is written down (docs/threat-model.md has the same
table for readers); ``tests/test_split.py`` walks the schema and fails on any field it cannot
classify, so a new field is classified when it is added. A key classifies its whole subtree
unless a longer key says otherwise; ``[]`` stands for a list's items.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

__all__ = ["FIELDS", "Role", "field_role", "merge_benchmark"]

Role = Literal["candidate", "exam", "secret"]

C: Role = "candidate"
E: Role = "exam"
S: Role = "secret"

FIELDS: dict[str, Role] = {
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
    "benchmarks[].name": E,
    "benchmarks[].kind": E,
    "benchmarks[].description": E,
    "benchmarks[].sampling": C,
    "benchmarks[].eval": E,
    "benchmarks[].system_prompt": C,
    "benchmarks[].prompt_template": C,
    "benchmarks[].scorer": E,  # a judge's model, prompt, scale, sampling and labels included
    "benchmarks[].grader": E,  # an inspect task's grader role: the judge is the exam's
    "benchmarks[].judge": E,  # a verifiers environment's judge, likewise
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
    "benchmarks[].sandbox": E,  # limits, image, network, verifier_network
    "benchmarks[].env_id": E,
    "benchmarks[].env_path": E,
    "benchmarks[].env_args": E,
    "benchmarks[].api": E,
    "benchmarks[].harness": E,
    "benchmarks[].runtime": E,
    "benchmarks[].task": E,  # an inspect task file, and its scorer
    "benchmarks[].task_args": E,
    "benchmarks[].score_key": E,  # which key of a dict-valued inspect score is the score
    # which of this machine's variables repository code (a task file, an environment) may read
    "benchmarks[].pass_env": E,
}


def field_role(path: str) -> Role | None:
    """The role of a field path (``benchmarks[].sandbox.timeout_s``): its own entry, else its
    nearest classified parent's; None when nothing classifies it."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        role = FIELDS.get(".".join(parts[:cut]))
        if role is not None:
            return role
    return None


def _mixed(path: str) -> bool:
    """True when ``path`` is not classified as a whole but its fields are (``agent``)."""
    return path not in FIELDS and any(k.startswith(path + ".") for k in FIELDS)


def _overlay(base: BaseModel, pr: BaseModel, prefix: str) -> BaseModel:
    update: dict[str, Any] = {}
    for name in type(base).model_fields:
        path = f"{prefix}.{name}"
        mine, theirs = getattr(base, name), getattr(pr, name, None)
        if _mixed(path) and isinstance(mine, BaseModel) and isinstance(theirs, BaseModel):
            update[name] = _overlay(mine, theirs, path)
        elif field_role(path) in (C, S) and name in type(pr).model_fields:
            update[name] = theirs
        # else the exam's (and an unclassified field fails closed: the base's)
    return base.model_copy(update=update)


def merge_benchmark(base: Any, pr: Any) -> Any:
    """The base's benchmark with the PR's candidate fields: the exam stays the base's."""
    return _overlay(base, pr, "benchmarks[]")

"""What a run measured, and with what: the comparability fingerprint.

Two parts. The *measurement* (scorer, rollouts k, scoring semantics) must match for a PR run to
be compared with a baseline: otherwise a changed score could be a changed ruler. The *subject*
(model, prompt template, system prompt, sampling) is what a PR is allowed to change — it is what
the gate evaluates — so differences there are reported, not refused. Items are matched one by one
through ``identity``: an item whose prompt, reference answer or anything else that decides its
score (``Item.exam``: a task's checks and environment, a row's other columns) changed is not paired.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalgate.config.spec import AgentVariant, Benchmark, Model

__all__ = [
    "SCORING_VERSION",
    "dataset_hash",
    "fingerprint",
    "identity",
    "item_hash",
    "measurement",
    "scorer_measurement",
]

# Bump when a scorer's or a metric's meaning changes, or how an item is identified: old
# baselines become non-comparable (the Action's `baseline: auto` then evaluates the base again).
# 2: an item's hash covers what decides its score (task files, tests, environment: Item.exam).
SCORING_VERSION = 2


def _digest(value: Any, size: int = 16) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:size]


def item_hash(prompt: str, answer: str, exam: str = "") -> str:
    """Content hash of one item: its raw prompt, reference answer and ``exam`` digest (what else
    decides its score, ``Item.exam``). Without an exam digest, the two-string form of old: a
    baseline of plain questions stays comparable."""
    return _digest([prompt, answer, exam] if exam else [prompt, answer])


def identity(item: Any) -> str:
    """The content hash base and PR items must share to be paired."""
    return item_hash(item.prompt, item.answer, getattr(item, "exam", ""))


def dataset_hash(items: list[Any]) -> str:
    return _digest(sorted([i.id, identity(i)] for i in items), 32)


def scorer_measurement(bench: Benchmark) -> dict[str, Any] | None:
    """The scorer as measured: all of it, but a judge's labelled set (`labels`), which decides
    no score (it measures the judge for the scorecard) and is a path that differs between the
    base's tree and the PR's."""
    scorer = getattr(bench, "scorer", None)
    if scorer is None:
        return None
    if scorer.type != "judge":
        return scorer.model_dump(mode="json")
    from evalgate.score.judge import JUDGE_PROTOCOL  # the default prompts' and parsing's version

    return {**scorer.model_dump(mode="json", exclude={"labels"}), "protocol": JUDGE_PROTOCOL}


def _kind_measurement(bench: Benchmark) -> dict[str, Any]:
    """What else defines the measurement for kinds whose scoring lives outside evalgate."""
    if bench.kind == "verifiers":
        from importlib.metadata import PackageNotFoundError, version

        try:
            vf_version = version("verifiers")
        except PackageNotFoundError:
            vf_version = None
        env: dict[str, Any] = {
            "environment": {
                "env_id": bench.env_id,
                "env_args": bench.env_args,
                "api": bench.api,
                "harness": bench.harness,
                "runtime": bench.runtime,
                "verifiers": vf_version,
            }
        }
        # The environment's judge is the exam's; only when set, so runs recorded before the
        # setting existed stay comparable.
        if (judge := getattr(bench, "judge", None)) is not None:
            env["judge"] = judge.model_dump(mode="json")
        return env
    if bench.kind == "inspect":
        # The task and its arguments define what is measured; the task file's own code (solver
        # and scorer) is the PR's to change, like an agent's, and the dataset hash pairs items.
        # A task file is recorded by name, not by absolute path: the base branch's run happens in
        # another checkout.
        file, at_sign, func = bench.task.partition("@")
        task = Path(file).name + at_sign + func if file.endswith(".py") else bench.task
        out: dict[str, Any] = {"task": {"task": task, "task_args": bench.task_args}}
        # Which key of a dict score is the reward: part of the exam. Only when set, so runs
        # recorded before the setting existed stay comparable.
        if getattr(bench, "score_key", None) is not None:
            out["task"]["score_key"] = bench.score_key
        if bench.grader is not None:  # the judge of model-graded scorers is the exam's
            out["grader"] = bench.grader.model_dump(mode="json")
        return out
    if bench.kind in ("agent", "humaneval"):
        return {"sandbox": bench.sandbox.model_dump(mode="json")}
    return {}


def measurement(bench: Any) -> dict[str, Any]:
    """What ``bench`` measures with: the one derivation that both the base policy (before a PR's
    run: a change FAILs) and the comparison (after it: a differing baseline is not comparable)
    read, so neither sees a change the other misses. Paths are left out (they differ between
    checkouts); their contents are the items, which ``item_hash`` pairs one by one."""
    return {
        **_kind_measurement(bench),
        "benchmark": bench.name,
        "kind": bench.kind,
        "scorer": scorer_measurement(bench),
        "rollouts": bench.eval.rollouts,
        "scoring_version": SCORING_VERSION,
    }


def fingerprint(
    bench: Benchmark,
    model: Model,
    model_id: str,
    items: list[Any],
    *,
    chat_template: str | None = None,
    variant: AgentVariant | None = None,
) -> dict[str, Any]:
    """The run's fingerprint, saved in run_config.json."""
    model_cfg = model.model_dump(mode="json", exclude={"name"})
    return {
        "measurement": measurement(bench),
        "subject": {
            "model_id": model_id,
            "model": _digest(model_cfg),
            "prompt": _digest(
                [getattr(bench, "system_prompt", None), getattr(bench, "prompt_template", None)]
            ),
            "sampling": bench.sampling.model_dump(mode="json"),
            "chat_template": chat_template,
            # The agent set-up is what an agent team's PR changes: subject, not measurement.
            "agent": _digest([agent.model_dump(mode="json"), getattr(variant, "name", None)])
            if (agent := getattr(bench, "agent", None)) is not None
            else None,
        },
        "dataset": {"hash": dataset_hash(items), "items": len(items)},
    }

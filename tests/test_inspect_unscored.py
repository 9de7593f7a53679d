"""kind: inspect, judged samples: what the task leaves unscored, and a grader the task never asks.

A sample inspect leaves unscored (a model-graded scorer whose grader gave no grade: inspect's
``Score.unscored``, value NaN) is that rollout's ``judge_unparseable`` error, counted against the
error budget, and every other sample is kept, as ``inspect eval`` keeps them; never an abort of
the benchmark after every call was paid, nor a 0. A ``grader:`` the task would not use (its
scorer names its own judge model) is refused, naming the ``task_args`` that hands the task the
grader role.

inspect runs in its own interpreter (EVALGATE_INSPECT_PYTHON); these tests skip without one, and
the catalogue ones without inspect-evals there. The candidate and the grader are scripted
servers over real HTTP."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from tests.test_inspect_catalogue import (
    _config,
    _inspect_eval,
    _write,
    needs_catalogue,
    needs_inspect,
)

GRADED_TASK = """
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import model_graded_qa
from inspect_ai.solver import generate


@task
def t() -> Task:
    samples = [Sample(id=f"s{i}", input=f"Name animal {i}.", target="cat") for i in range(4)]
    return Task(dataset=MemoryDataset(samples), solver=generate(), scorer=model_graded_qa())
"""


def _records(tmp_path: Path, out: str = "out") -> dict[tuple[str, int], dict[str, Any]]:
    (run_dir,) = (tmp_path / out / "evals").glob("*/*")
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return {(r["example_id"], r["rollout"]): r for r in map(json.loads, lines)}


def _local(tmp_path: Path, config: Path) -> int:
    return main(["local", str(config), "--output", str(tmp_path / "out")], environ={"CI": "1"})


def _judge(base_url: str) -> str:
    judge = f'{{name: judge, backend: openai, base_url: "{base_url}", model: org/judge}}'
    return f"    grader: {{model: {judge}}}"


def _grades_but_one(body: dict[str, Any], n: int) -> str:
    text = body["messages"][-1]["content"]
    if "animal 1" in text:
        return "I cannot decide whether this is right."  # no GRADE: inspect leaves it unscored
    return "GRADE: C" if "animal 0" in text or "animal 3" in text else "GRADE: I"


@needs_inspect
@pytest.mark.slow
def test_a_sample_the_grader_leaves_ungraded_is_a_judge_error_and_the_rest_are_kept(
    tmp_path: Path, scripted_server: Any
) -> None:
    task = _write(tmp_path, "task.py", GRADED_TASK)
    candidate = scripted_server(lambda body, n: "a cat")
    grader = scripted_server(_grades_but_one)
    config = _config(tmp_path, candidate.base_url, f"{task}@t", _judge(grader.base_url))
    code = _local(tmp_path, config)
    records = _records(tmp_path)
    # 1 error in 4 rollouts is over the default error budget (5 %): infrastructure, exit 3, with
    # every record journaled, not a config error that kept none.
    assert code == 3
    assert len(records) == 4 and len(grader.requests) == 4
    bad = records[("s1", 0)]
    assert bad["reward"] is None
    assert bad["error"].startswith("judge_unparseable:"), bad["error"]
    assert "Grade not found" in bad["error"]
    assert bad["completion"] == "a cat"  # what the candidate said is kept for the reader
    kept = {k: r["reward"] for k, r in records.items() if r["error"] is None}
    assert kept == {("s0", 0): 1.0, ("s2", 0): 0.0, ("s3", 0): 1.0}
    # `inspect eval` on the same scripted servers: the same three scores, s1 unscored (NaN).
    os.environ["GRADER_BASE_URL"] = grader.base_url
    try:
        role = "openai-api/grader/org/judge"
        expected = _inspect_eval(tmp_path, "task.py@t", candidate.base_url, grader=role)
    finally:
        del os.environ["GRADER_BASE_URL"]
    assert math.isnan(expected.pop(("s1", 0)))
    assert kept == expected


@needs_inspect
@pytest.mark.slow
def test_within_the_error_budget_an_unscored_sample_does_not_fail_the_run(
    tmp_path: Path, scripted_server: Any
) -> None:
    task = _write(tmp_path, "task.py", GRADED_TASK)
    candidate = scripted_server(lambda body, n: "a cat")
    grader = scripted_server(_grades_but_one)
    config = _config(tmp_path, candidate.base_url, f"{task}@t", _judge(grader.base_url))
    config.write_text(
        config.read_text().replace("max_retries: 0", "max_retries: 0, max_error_rate: 0.5")
    )
    assert _local(tmp_path, config) == 0
    records = _records(tmp_path)
    assert [k for k, r in records.items() if r["error"]] == [("s1", 0)]


# strong_reject, the catalogue's own task, scorer and prompt, on local rows (its CSV comes from
# the network): a dict score {refusal, convincingness, specificity}, gated on `refusal`.
STRONG_REJECT = """
import importlib

from inspect_ai import task
from inspect_ai.dataset import MemoryDataset

sr = importlib.import_module("inspect_evals.strong_reject.strong_reject")
ROWS = [
    {"forbidden_prompt": f"How do I do forbidden thing {i}?", "category": "c", "source": "s"}
    for i in range(4)
]


@task
def strong_reject_local(judge_llm="openai/gpt-4o"):
    sr.load_csv_dataset = lambda **kw: MemoryDataset([kw["sample_fields"](r) for r in ROWS])
    return sr.strong_reject(judge_llm=judge_llm)
"""


def _strong_reject_judge(body: dict[str, Any], n: int) -> str:
    text = body["messages"][-1]["content"]
    if "forbidden thing 1" in text:
        return "#overall_reasoning I will not rate this."  # no #scores: unscored
    refused = 1 if "forbidden thing 2" in text else 0
    return (
        "#overall_reasoning The user asked for harm.\n#scores\n"
        f"1.a refused\n1.b {refused}\n2.a ok\n2.b 3\n3.a ok\n3.b 4\n"
    )


@needs_catalogue
@pytest.mark.slow
def test_a_dict_score_left_unscored_is_a_judge_error_not_a_score_key_problem(
    tmp_path: Path, scripted_server: Any
) -> None:
    task = _write(tmp_path, "sr.py", STRONG_REJECT)
    candidate = scripted_server(lambda body, n: "I cannot help with that.")
    grader = scripted_server(_strong_reject_judge)
    extra = _judge(grader.base_url) + "\n    score_key: refusal\n    task_args: {judge_llm: null}"
    config = _config(tmp_path, candidate.base_url, f"{task}@strong_reject_local", extra)
    config.write_text(
        config.read_text().replace("max_retries: 0", "max_retries: 0, max_error_rate: 0.5")
    )
    assert _local(tmp_path, config) == 0
    records = _records(tmp_path)
    assert len(records) == 4 and len(grader.requests) == 4
    errors = {k: r["error"] for k, r in records.items() if r["error"] is not None}
    assert len(errors) == 1 and all(e.startswith("judge_unparseable:") for e in errors.values())
    assert not any("score_key" in e for e in errors.values())
    kept = {k: r["reward"] for k, r in records.items() if r["error"] is None}
    os.environ["GRADER_BASE_URL"] = grader.base_url
    try:
        expected = _inspect_eval(
            tmp_path,
            "sr.py@strong_reject_local",
            candidate.base_url,
            score_key="refusal",
            grader="openai-api/grader/org/judge",
            task_args=("judge_llm=null",),
        )
    finally:
        del os.environ["GRADER_BASE_URL"]
    unscored = {k for k, v in expected.items() if math.isnan(v)}
    assert unscored == set(errors)
    assert kept == {k: v for k, v in expected.items() if k not in unscored}
    assert sorted(kept.values()) == [0.0, 0.0, 1.0]


# -- a grader the task would not ask ----------------------------------------------------------


@needs_catalogue
def test_a_grader_the_task_would_not_use_is_refused_before_any_call(
    tmp_path: Path, scripted_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """strong_reject names its own judge (judge_llm="openai/gpt-4o"): with `grader:` set and that
    left as it is, the grader would go unused and the exam's judge would be another model. Known
    from the task's parameters, so refused at validate, before the candidate is asked anything."""
    task = _write(tmp_path, "sr.py", STRONG_REJECT)
    candidate = scripted_server(lambda body, n: "I cannot help with that.")
    grader = scripted_server(_strong_reject_judge)
    extra = _judge(grader.base_url) + "\n    score_key: refusal"
    config = _config(tmp_path, candidate.base_url, f"{task}@strong_reject_local", extra)
    for argv in (
        ["validate", str(config)],
        ["local", str(config), "--output", str(tmp_path / "o")],
    ):
        code = main(argv, environ={"CI": "1"})
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert code == 2, (argv, err)
        assert "judge_llm" in err and "openai/gpt-4o" in err and "task_args" in err, err
    assert candidate.requests == [] and grader.requests == []


OWN_JUDGE_TASK = """
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import model_graded_qa
from inspect_ai.solver import generate


@task
def t() -> Task:
    samples = [Sample(id=f"s{i}", input=f"Name animal {i}.", target="cat") for i in range(4)]
    # the scorer's judge is written into the task: no parameter says so
    scorer = model_graded_qa(model="openai-api/own/org/own-judge")
    return Task(dataset=MemoryDataset(samples), solver=generate(), scorer=scorer)
"""


@needs_inspect
@pytest.mark.slow
def test_a_grader_the_relay_never_saw_asked_is_refused_naming_the_fix(
    tmp_path: Path,
    scripted_server: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A scorer that asks a judge of its own, written into the task: the run learns it when the
    relay saw none of the grader's calls while the candidate answered; the benchmark is refused
    (exit 2), not scored by another judge than the exam's."""
    task = _write(tmp_path, "task.py", OWN_JUDGE_TASK)
    candidate = scripted_server(lambda body, n: "a cat")
    own = scripted_server(lambda body, n: "GRADE: C")
    grader = scripted_server(lambda body, n: "GRADE: I")
    monkeypatch.setenv("OWN_BASE_URL", own.base_url)
    monkeypatch.setenv("OWN_API_KEY", "none")
    extra = _judge(grader.base_url) + "\n    pass_env: [OWN_BASE_URL, OWN_API_KEY]"
    config = _config(tmp_path, candidate.base_url, f"{task}@t", extra)
    code = _local(tmp_path, config)
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2, err
    assert len(own.requests) == 4 and grader.requests == []
    assert "grader" in err and "never" in err and "task_args" in err, err

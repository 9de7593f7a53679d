"""The workflow's inputs in PR mode: which overrides change the exam, and which steps of the
base's workflows are evalgate's (their inputs are the base's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalgate.action.workflow_inputs import base_step_inputs, exam_overrides


@pytest.mark.parametrize(
    ("override", "exam"),
    [
        ("gate.margin=0.9", True),
        ("eval.max_error_rate=0.5", True),
        ("benchmarks.qa.path=x.jsonl", True),
        ("benchmarks.qa.scorer.type=exact", True),
        ("budget.tokens=10", True),
        ("sampling.temperature=0.5", False),
        ("benchmarks.qa.system_prompt=Hi", False),
        (
            "models.m.base_url=http://x.example/v1",
            False,
        ),  # candidate: its secret routes are checked
        ("no.such.field=1", True),  # unclassified: the exam's (fail closed)
    ],
)
def test_overrides_of_exam_fields_are_the_exams(override: str, exam: bool) -> None:
    fields, candidate = exam_overrides((override,))
    assert bool(fields) == exam and (candidate == ()) == exam


WORKFLOW = """
on: pull_request
jobs:
  a:
    steps:
      - uses: {uses}
        with: {{config: evals/{name}.yaml, working_directory: sub}}
      - uses: actions/checkout@v4
"""


@pytest.mark.parametrize(
    ("uses", "action_yml", "found"),
    [
        ("org/evalgate@0123", None, True),
        ("docker://ghcr.io/org/evalgate:v1", None, True),
        ("./", None, False),  # a user's own local action
        ("./", "name: evalgate\n", True),  # evalgate's own repository
        ("org/other-action@v1", None, False),
    ],
)
def test_the_bases_evalgate_steps(
    tmp_path: Path, uses: str, action_yml: str | None, found: bool
) -> None:
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "e.yml").write_text(WORKFLOW.format(uses=uses, name="x"))
    if action_yml:
        (tmp_path / "action.yml").write_text(action_yml)
    steps = base_step_inputs(tmp_path, {})
    assert steps == ([("evals/x.yaml", "sub")] if found else None)

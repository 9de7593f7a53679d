"""kind: inspect — task files that differ from the shipped example: several @task functions,
one unnamed task, a name that does not exist, a task's own epochs. Each is settled when the
config is validated: it runs, or it is one line with exit 2 that says the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalgate.cli import main
from tests.test_inspect import needs_inspect

TASKS = """
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import match
from inspect_ai.solver import generate

SAMPLES = [Sample(id=f"s{i}", input=f"Say {i}.", target=str(i)) for i in range(3)]


@task
def first() -> Task:
    return Task(dataset=MemoryDataset(SAMPLES), solver=generate(), scorer=match())
"""
SECOND = """

@task
def second() -> Task:
    return Task(dataset=MemoryDataset(SAMPLES), solver=generate(), scorer=match(), epochs=3)
"""


def _validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, task: str, extra: str = ""
) -> tuple[int, str]:
    (tmp_path / "tasks.py").write_text(source)
    config = tmp_path / "evals.yaml"
    config.write_text(
        "models: [{name: m, backend: openai, base_url: 'http://127.0.0.1:9/v1'}]\n"
        f"benchmarks: [{{name: b, kind: inspect, task: '{task}'{extra}}}]\n"
    )
    code = main(["validate", str(config)])
    err = capsys.readouterr().err.strip()
    return code, err


@needs_inspect
def test_a_file_with_one_task_needs_no_task_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _validate(tmp_path, capsys, TASKS, "tasks.py")
    assert code == 0, err


@needs_inspect
def test_a_file_with_two_tasks_names_them_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _validate(tmp_path, capsys, TASKS + SECOND, "tasks.py")
    assert code == 2 and "\n" not in err and "Traceback" not in err, err
    assert "first, second" in err and "tasks.py@first" in err, err


@needs_inspect
def test_a_task_name_that_does_not_exist_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _validate(tmp_path, capsys, TASKS, "tasks.py@nope")
    assert code == 2 and "\n" not in err and "Traceback" not in err, err
    assert "'nope' not found" in err, err


@needs_inspect
@pytest.mark.slow
def test_a_tasks_own_epochs_are_not_silently_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """inspect would run epochs=3; evalgate runs eval.rollouts epochs: unset, that is an error."""
    code, err = _validate(tmp_path, capsys, TASKS + SECOND, "tasks.py@second")
    assert code == 2 and "\n" not in err, err
    assert "epochs=3" in err and "eval: {rollouts: 3}" in err, err
    code, err = _validate(
        tmp_path, capsys, TASKS + SECOND, "tasks.py@second", ", eval: {rollouts: 2}"
    )
    assert code == 0, err  # chosen explicitly: evalgate's rollouts are the epochs


@needs_inspect
def test_a_task_arg_the_task_does_not_take_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """inspect only warns and drops it: a typo in task_args would run the task unchanged."""
    code, err = _validate(tmp_path, capsys, TASKS, "tasks.py@first", ", task_args: {sise: 2}")
    assert code == 2 and "\n" not in err and "Traceback" not in err, err
    assert "'sise' not used by task 'first'" in err, err


@needs_inspect
@pytest.mark.parametrize("task", ["./", "sub/", "/tmp"])
def test_a_folder_is_not_a_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], task: str
) -> None:
    """inspect would scan a folder (relative to where evalgate runs, not evals.yaml) and take
    whatever task it finds: refused, with the two forms a task may take."""
    (tmp_path / "sub").mkdir()
    code, err = _validate(tmp_path, capsys, TASKS, task)
    assert code == 2 and "\n" not in err, err
    assert "is a folder, not a task" in err and "file.py@task_name" in err, err

"""PR mode: an inspect task file the pull request adds cannot rewrite the base's exam.

The PR adds a benchmark whose task file, when inspect loads it, looks for the exam tree (the base
commit's files, materialised for the run) and rewrites the base's task so that the model's wrong
answers match. Before the jail it ran as the job's user with root's file access: the base's
thresholds-only gate PASSed, exit 0. Jailed, the exam tree is not even visible: FAIL, exit 1.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fake_github import FakeGitHub
from test_action import PR, REPO
from test_exam import Exam, _run_pr

INSPECT_PY = os.environ.get("EVALGATE_INSPECT_PYTHON", "")
pytestmark = pytest.mark.skipif(
    not INSPECT_PY
    or subprocess.run([INSPECT_PY, "-c", "import inspect_ai"], capture_output=True).returncode,
    reason="needs EVALGATE_INSPECT_PYTHON with inspect-ai",
)

EXAM_TASK = """
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import match

MARK = "{mark}"


@task
def exam_task():
    samples = [Sample(id=f"s{{i}}", input=f"Q{{i}}", target=f"A{{i}}") for i in range(6)]
    return Task(dataset=MemoryDataset(samples), scorer=match())
"""

# Module-level code of the PR's task: when inspect runs it (after every task was listed and
# hashed), it rewrites the base's task in every exam tree it can find (this test's, by its mark).
HOSTILE_TASK = """
import glob, sys

for path in glob.glob("/tmp/**/exam_task.py", recursive=True) if "run" in sys.argv else ():
    try:
        text = open(path).read()
        if "{mark}" in text and 'target=f"A{{i}}"' in text:
            with open(path, "w") as fh:
                fh.write(text.replace('target=f"A{{i}}"', 'target="wrong"'))
    except OSError:
        pass

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import match


@task
def pwn():
    return Task(dataset=[Sample(id="p", input="Q0", target="A0")], scorer=match())
"""


def _evals(url: str, extra_benchmark: str = "") -> str:
    return f"""
models:
  - {{name: m, backend: openai, base_url: "{url}", model: org/m}}
benchmarks:
{extra_benchmark}  - {{name: ia, kind: inspect, task: evals/exam_task.py@exam_task}}
gate: {{margin: 0.05, thresholds: {{ia: {{accuracy: 0.9}}}}}}
eval: {{max_retries: 0, request_timeout_s: 10}}
"""


@pytest.mark.slow  # two inspect runs in their jail, PR mode, git: ~27 s on 2 cores
def test_a_task_file_the_pr_adds_cannot_rewrite_the_bases_task(
    tmp_path: Path, scripted_server: Any, github: FakeGitHub, pr_event: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    model = scripted_server(lambda body, n: "wrong")  # wrong on every sample
    mark = f"exam-{os.getpid()}-{tmp_path.name}"
    exam = Exam(tmp_path, model.base_url, _evals(model.base_url))
    # The base's task file, committed on main before the PR branches off.
    (exam.ws / "evals").mkdir()
    (exam.ws / "evals" / "exam_task.py").write_text(EXAM_TASK.format(mark=mark))
    exam.base = exam.commit(_evals(model.base_url), "main")
    subprocess.run(["git", "-C", str(exam.ws), "push", "-q", "origin", "main"], check=True)
    pwn = "  - {name: pwn, kind: inspect, task: evals/pwn_task.py@pwn}\n"
    head = exam.pr_files(
        _evals(model.base_url, pwn), {"evals/pwn_task.py": HOSTILE_TASK.format(mark=mark)}
    )
    monkeypatch.setenv("EVALGATE_INSPECT_PYTHON", INSPECT_PY)
    code, log = _run_pr(exam, github, pr_event, head)
    (body,) = github.bodies(REPO, PR)
    assert code == 1, (log, body[:2000])
    assert "evalgate: FAIL" in "\n".join(body.splitlines()[:4]), body[:2000]
    # The base's file in the checkout is untouched, as the exam's copy was.
    assert 'target=f"A{i}"' in (exam.ws / "evals" / "exam_task.py").read_text()

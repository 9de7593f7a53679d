"""A verifiers environment's judge is evalgate's (`judge:`): reached through the judge relay.

Two small environments written here, one per API generation: a v1 taskset whose reward asks a
``vf.Judge`` (verifiers 0.4, the project environment) and a legacy environment whose
``JudgeRubric`` holds its own client on a dead port (verifiers 0.3.1, the side venv:
``.ci/run``). Both graded by a scripted judge server over loopback HTTP: the judge gets the
configured model, its verdicts decide the rewards, and its calls are counted (tokens, cost,
cache) like evalgate's own judge's.
"""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from tests.conftest import answer_arith, read_jsonl

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("verifiers") is None, reason="needs verifiers"
)

# Three different references: JudgeRubric's prompt holds only the reference and the response,
# and evalgate's judge cache rightly answers a repeated prompt itself, so two items with the
# same answer would reach the judge server once or twice depending on which finished first.
ROWS = [("add-2-3", "What is 2 + 3?", "5"), ("add-7-5", "What is 7 + 5?", "12"),
        ("sub-9-3", "What is 9 - 3?", "6")]  # fmt: skip

V1_ENV = f"""
import verifiers.v1 as vf

ROWS = {ROWS!r}
__all__ = ["JudgedConfig", "JudgedTaskset"]


class JudgedData(vf.TaskData):
    answer: str


class YesNo(vf.Judge[bool]):
    prompt = "Question: {{question}}\\nReference: {{answer}}\\nResponse: {{response}}\\nCorrect?"

    def parse(self, response):
        return response.text.strip().lower().endswith("yes")


class JudgedTask(vf.Task[JudgedData]):
    @vf.reward(weight=1.0)
    async def judged(self, trace) -> float:
        # The environment's own judge config: a dead port and a model nobody serves.
        judge = YesNo(vf.JudgeConfig(base_url="http://127.0.0.1:9/v1", model="env/own-judge"))
        got = await judge.evaluate(
            trace=trace, question=self.data.prompt_text, answer=self.data.answer,
            response=trace.last_reply,
        )
        return 1.0 if got.parsed else 0.0


class JudgedConfig(vf.TasksetConfig):
    pass


class JudgedTaskset(vf.Taskset[JudgedTask, JudgedConfig]):
    def load(self):
        ids = "id" in vf.TaskData.model_fields
        return [
            JudgedTask(
                JudgedData(prompt=q, answer=a, **({{"id": i}} if ids else {{}})), self.config.task
            )
            for i, q, a in ROWS
        ]
"""

LEGACY_ENV = f"""
ROWS = {ROWS!r}


async def judged(judge, prompt, completion, answer, state, **kwargs) -> float:
    verdict = await judge(prompt, completion, answer, state)
    return 1.0 if verdict.strip().lower().endswith("yes") else 0.0


def load_environment(**kwargs):
    try:
        import verifiers.legacy as vf
    except ImportError:
        import verifiers as vf
    from datasets import Dataset
    from openai import AsyncOpenAI

    rows = [{{"id": i, "question": q, "answer": a}} for i, q, a in ROWS]
    # The environment's own judge client: a dead port, a model nobody serves.
    rubric = vf.JudgeRubric(
        judge_client=AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="env-own"),
        judge_model="env/own-judge",
    )
    rubric.add_reward_func(judged)
    return vf.SingleTurnEnv(eval_dataset=Dataset.from_list(rows), rubric=rubric)
"""


# A legacy environment whose reward function calls its JudgeRubric's client synchronously, as
# third-party environments do (prime-environments' TruthfulQA: a sync `OpenAI` judge_client and
# `judge_client.chat.completions.create(...)` in the reward function).
LEGACY_SYNC_ENV = (
    LEGACY_ENV.replace(
        """async def judged(judge, prompt, completion, answer, state, **kwargs) -> float:
    verdict = await judge(prompt, completion, answer, state)
    return 1.0 if verdict.strip().lower().endswith("yes") else 0.0
""",
        """def judged(completion, answer, judge_client, judge_model, **kwargs) -> float:
    text = completion[-1]["content"] if isinstance(completion, list) else completion
    reply = judge_client.chat.completions.create(
        model=judge_model,
        messages=[{"role": "user", "content": f"Reference: {answer}\\nResponse: {text}"}],
    )
    verdict = reply.choices[0].message.content
    return 1.0 if verdict.strip().lower().endswith("yes") else 0.0
""",
    )
    .replace("from openai import AsyncOpenAI", "from openai import OpenAI")
    .replace("judge_client=AsyncOpenAI(", "judge_client=OpenAI(")
)


# A legacy environment whose reward function raises on one item: verifiers logs it and scores
# 0, which would read as a wrong answer.
LEGACY_RAISING_ENV = LEGACY_SYNC_ENV.replace(
    """    text = completion[-1]["content"] if isinstance(completion, list) else completion
""",
    """    text = completion[-1]["content"] if isinstance(completion, list) else completion
    if answer == "12":
        raise KeyError("no 'verdict' in the judge's reply")
""",
)


# A legacy environment that grades with a client of its own, in a plain Rubric: nothing in it is
# a JudgeRubric, so nothing would ask evalgate's judge (with a key it would grade with its own).
LEGACY_OWN_CLIENT_ENV = LEGACY_SYNC_ENV.replace(
    "def judged(completion, answer, judge_client, judge_model, **kwargs) -> float:",
    "def judged(completion, answer, **kwargs) -> float:\n"
    "    from openai import OpenAI\n"
    "    judge_client, judge_model = OpenAI(base_url='http://127.0.0.1:9/v1', api_key='x'), 'm'",
).replace("rubric = vf.JudgeRubric(", "rubric = vf.Rubric(); _unused = dict(")


# A legacy environment with a JudgeRubric that its reward function never asks: it grades with a
# client of its own and scores 0 when that fails (a silent 0 on every rollout).
LEGACY_UNASKED_ENV = (
    LEGACY_OWN_CLIENT_ENV.replace(
        "rubric = vf.Rubric(); _unused = dict(", "rubric = vf.JudgeRubric("
    )
    .replace(
        "    reply = judge_client.chat.completions.create(",
        "    try:\n        reply = judge_client.chat.completions.create(",
    )
    .replace(
        "    verdict = reply.choices[0].message.content\n",
        "    except Exception:\n"
        "        return 0.0\n"
        "    verdict = reply.choices[0].message.content\n",
    )
)


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


APIS = [
    pytest.param("v1", marks=pytest.mark.skipif(not _has("verifiers.v1"), reason="no v1")),
    pytest.param(
        "legacy", marks=pytest.mark.skipif(not _has("verifiers.legacy"), reason="no legacy")
    ),
    pytest.param(
        "legacy-sync", marks=pytest.mark.skipif(not _has("verifiers.legacy"), reason="no legacy")
    ),
]


def _candidate(body: dict[str, Any], n: int) -> tuple[int, str, dict[str, str]]:
    reply = {
        "id": f"cmpl-{n}", "object": "chat.completion", "created": 0, "model": body.get("model"),
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": answer_arith(body, n)}}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    }  # fmt: skip
    return 200, json.dumps(reply), {"Content-Type": "application/json"}


def _field(text: str, name: str) -> str:
    # "Response: 5" (the v1 prompt here) or "Response:\n```\n5\n```" (JudgeRubric's default)
    return text.split(name)[1].lstrip(" :`\n").split("\n")[0].strip(" `")


def _strict_judge(body: dict[str, Any], n: int) -> str:
    """Says yes when the response is the reference, except for the reference 12 (7 + 5): the
    verdicts, not the answers, decide the rewards."""
    text = body["messages"][-1]["content"]
    reference = _field(text, "Reference" if "Reference:" in text else "Ground truth answer")
    right = _field(text, "Response") == reference != "12"
    return "Checked.\n" + ("yes" if right else "no")


# The v1 environment with a structured-output judge (`schema`): verifiers asks through the
# OpenAI SDK's `parse` (a `response_format` of type json_schema) and reads `parsed`.
V1_SCHEMA_ENV = (
    V1_ENV.replace(
        "class YesNo(vf.Judge[bool]):",
        "from pydantic import BaseModel\n\n\nclass Verdict(BaseModel):\n    correct: bool\n\n\n"
        "class YesNo(vf.Judge[Verdict]):\n    schema = Verdict",
    )
    .replace(
        """    def parse(self, response):
        return response.text.strip().lower().endswith("yes")
""",
        "",
    )
    .replace("return 1.0 if got.parsed else 0.0", "return 1.0 if got.parsed.correct else 0.0")
)


def _setup(tmp_path: Path, api: str, model_url: str, judge_url: str) -> Path:
    env_dir = tmp_path / "envs"
    (env_dir / "judged_arith").mkdir(parents=True, exist_ok=True)
    source = {
        "v1": V1_ENV,
        "legacy": LEGACY_ENV,
        "legacy-sync": LEGACY_SYNC_ENV,
        "legacy-raises": LEGACY_RAISING_ENV,
        "v1-schema": V1_SCHEMA_ENV,
        "legacy-own": LEGACY_OWN_CLIENT_ENV,
        "legacy-unasked": LEGACY_UNASKED_ENV,
    }[api]
    (env_dir / "judged_arith" / "__init__.py").write_text(textwrap.dedent(source))
    config = tmp_path / "evals.yaml"
    config.write_text(
        f"""
models:
  - {{name: scripted, backend: openai, base_url: "{model_url}", model: org/candidate}}
benchmarks:
  - name: vfj
    kind: verifiers
    env_id: judged-arith
    env_path: envs
    api: {api.split("-")[0]}
    eval: {{rollouts: 1}}
    judge:
      model: {{name: judge, backend: openai, base_url: "{judge_url}", model: org/judge}}
      sampling: {{temperature: 0.0, max_tokens: 77}}
eval:
  max_retries: 0
"""
    )
    return config


def _run(tmp_path: Path, config: Path) -> tuple[int, Path]:
    out = tmp_path / "out"
    return main(["local", str(config), "--output", str(out)], environ={"CI": "true"}), out


def _run_dir(out: Path) -> Path:
    return sorted((out / "evals").glob("vfj--org--candidate/*"))[-1]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.slow
def test_the_environments_judge_is_evalgates(
    tmp_path: Path, scripted_server: Any, api: str
) -> None:
    model, judge = scripted_server(_candidate), scripted_server(_strict_judge)
    config = _setup(tmp_path, api, model.base_url, judge.base_url)
    code, out = _run(tmp_path, config)
    run = _run_dir(out)
    records = read_jsonl(run / "results.jsonl")
    assert all(r["error"] is None for r in records), [r["error"] for r in records]
    # The verdicts decide: every answer is right, the judge rejects 7 + 5.
    rewards = {r["prompt"][-1]["content"]: r["reward"] for r in records}
    assert rewards == {"What is 2 + 3?": 1.0, "What is 7 + 5?": 0.0, "What is 9 - 3?": 1.0}
    assert code in (0, 1)
    # Each judge call reached evalgate's judge with the configured model and sampling (not
    # the environment's client on port 9, nor its model).
    assert len(judge.requests) == 3
    assert {b["model"] for b in judge.requests} == {"org/judge"}
    assert {b["max_tokens"] for b in judge.requests} == {77}
    assert all(b["model"] == "org/candidate" for b in model.requests)
    # Counted by the relay: the record's judge tokens and calls, the metadata's sums.
    for r in records:
        assert r["judge"]["calls"] == 1 and r["judge"]["usage"]["prompt_tokens"] > 0
        assert r["judge"]["replies"][0].startswith("Checked.")
    meta = json.loads((run / "metadata.json").read_text())
    assert meta["judge_usage"]["prompt_tokens"] == sum(
        r["judge"]["usage"]["prompt_tokens"] for r in records
    )
    assert meta["judge"]["model_id"] == "org/judge"
    assert meta["judge"]["requests"]["calls"] == 3
    # A re-run: every judgement from evalgate's cache, the judge asked nothing more.
    _, out2 = _run(tmp_path, config)
    assert len(judge.requests) == 3
    meta2 = json.loads((_run_dir(out2) / "metadata.json").read_text())
    assert meta2["judge"]["requests"]["cache_hits"] == 3


@pytest.mark.skipif(not _has("verifiers.v1"), reason="no v1")
@pytest.mark.slow
def test_a_structured_output_judge_reads_its_verdict_through_the_relay(
    tmp_path: Path, scripted_server: Any
) -> None:
    def judge(body: dict[str, Any], n: int) -> str:
        fmt = body.get("response_format") or {}
        if fmt.get("type") != "json_schema":
            return "not JSON"  # verifiers could not parse this: the rollout would error
        return json.dumps({"correct": _strict_judge(body, n).endswith("yes")})

    model, judged = scripted_server(_candidate), scripted_server(judge)
    code, out = _run(tmp_path, _setup(tmp_path, "v1-schema", model.base_url, judged.base_url))
    records = read_jsonl(_run_dir(out) / "results.jsonl")
    assert all(r["error"] is None for r in records), [r["error"] for r in records]
    rewards = {r["prompt"][-1]["content"]: r["reward"] for r in records}
    assert rewards == {"What is 2 + 3?": 1.0, "What is 7 + 5?": 0.0, "What is 9 - 3?": 1.0}
    schemas = {b["response_format"]["json_schema"]["name"] for b in judged.requests}
    assert schemas == {"Verdict"} and {b["model"] for b in judged.requests} == {"org/judge"}
    assert code in (0, 1)


@pytest.mark.parametrize("api", APIS)
def test_a_failing_judge_is_an_error_never_a_zero(
    tmp_path: Path, scripted_server: Any, api: str
) -> None:
    model = scripted_server(_candidate)
    judge = scripted_server(lambda body, n: (500, "judge down", {}))
    code, out = _run(tmp_path, _setup(tmp_path, api, model.base_url, judge.base_url))
    records = read_jsonl(_run_dir(out) / "results.jsonl")
    assert len(records) == 3
    # Whatever the environment did with the exception, the rollout is a judge error.
    assert all((r["error"] or "").startswith("judge_http_500") for r in records), records
    assert all(r["reward"] is None for r in records)
    assert code == 3


def test_the_environments_judge_is_part_of_the_measurement(tmp_path: Path) -> None:
    """Another judge model or sampling is another measurement (in PR mode: the base's decides);
    no `judge:` leaves the measurement as it was (older runs stay comparable)."""
    from evalgate.config.load import load_config
    from evalgate.config.split import field_role
    from evalgate.run.fingerprint import measurement

    def bench(judge: str) -> Any:
        config = tmp_path / "evals.yaml"
        config.write_text(
            "models: [{name: m, backend: openai, base_url: 'http://x/v1'}]\n"
            f"benchmarks:\n  - {{name: v, kind: verifiers, env_id: judged-arith{judge}}}\n"
        )
        return load_config(config, []).benchmarks[0]

    model = ", judge: {{model: {{name: j, backend: openai, base_url: 'http://j/v1', model: {}}}}}"
    plain, one, other = bench(""), bench(model.format("org/a")), bench(model.format("org/b"))
    assert "judge" not in measurement(plain)
    assert measurement(one)["judge"]["model"]["model"] == "org/a"
    assert measurement(one) != measurement(other)
    assert field_role("benchmarks[].judge.model.model") == "exam"


@pytest.mark.skipif(not _has("verifiers.legacy"), reason="no legacy")
@pytest.mark.slow
def test_a_reward_function_that_raised_is_an_error_never_a_zero(
    tmp_path: Path, scripted_server: Any
) -> None:
    model, judge = scripted_server(_candidate), scripted_server(_strict_judge)
    config = _setup(tmp_path, "legacy-raises", model.base_url, judge.base_url)
    _, out = _run(tmp_path, config)
    records = {r["example_id"]: r for r in read_jsonl(_run_dir(out) / "results.jsonl")}
    raised = records["add-7-5"]
    assert raised["reward"] is None, raised
    assert raised["error"].startswith("vf_reward_error: judged: KeyError"), raised["error"]
    assert records["add-2-3"]["reward"] == 1.0 and records["sub-9-3"]["error"] is None


@pytest.mark.skipif(not _has("verifiers.legacy"), reason="no legacy")
def test_a_judge_the_environment_has_no_place_for_is_refused_before_any_call(
    tmp_path: Path, scripted_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """`judge:` on a legacy environment without a JudgeRubric: nothing would ask it (a reward
    function's own client grades instead, or fails and scores 0): refused when the environment
    loads, before the candidate or the judge is asked anything."""
    model, judge = scripted_server(_candidate), scripted_server(_strict_judge)
    code, _ = _run(tmp_path, _setup(tmp_path, "legacy-own", model.base_url, judge.base_url))
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2, err
    assert "judge:" in err and "JudgeRubric" in err, err
    assert model.requests == [] and judge.requests == []


# -- a third-party-style JudgeRubric environment, per item as vf-eval scores it ---------------
# Modelled on prime-environments' TruthfulQA (local rows here): a plain-string `task` column,
# a synchronous `OpenAI` judge client in a JudgeRubric, reward functions that call
# `rubric.judge_client.chat.completions.create(...)` themselves, scores kept in the state.
TRUTHFUL_ENV = Path(__file__).parent / "data" / "vf_truthful" / "truthful_local" / "__init__.py"

TRUTHFUL_ANSWERS = {
    "gum": "It stays in you for seven years",
    "Great Wall": "No",
    "10%": "I have no comment",
    "sun": "White",
    "knuckles": "Yes",
    "bats": "No",
}


def _truthful_candidate(body: dict[str, Any], n: int) -> str:
    text = body["messages"][-1]["content"]
    return next(v for k, v in TRUTHFUL_ANSWERS.items() if k in text)


def _truthful_judge(body: dict[str, Any], n: int) -> str:
    text = body["messages"][-1]["content"]
    said = text.split("Answer: ")[1].split("\n")[0]
    if text.startswith("TRUTHFULNESS"):
        wrong = text.split("Incorrect: ")[1]
        return "UNTRUTHFUL" if said.split()[0] in wrong or "seven" in said else "TRUTHFUL"
    return "UNINFORMATIVE" if "no comment" in said else "INFORMATIVE"


def _vf_eval(tmp_path: Path, env_dir: Path, model_url: str, judge_url: str) -> dict[str, float]:
    """vf-eval 0.3.1 itself (its env server, as users run it) on the same scripted servers:
    reward per question."""
    import os
    import subprocess
    import sys

    vf_eval = Path(sys.executable).with_name("vf-eval")
    if not vf_eval.exists():
        pytest.skip("no vf-eval beside this interpreter")
    out = tmp_path / "vf-eval"
    argv = [str(vf_eval), "truthful-local", "-m", "org/candidate", "-b", model_url, "-k", "KEY"]
    argv += ["-n", "6", "-r", "1", "-s", "-o", str(out), "--disable-tui"]
    argv += ["-a", json.dumps({"judge_base_url": judge_url, "judge_model": "org/judge"})]
    env = {**os.environ, "PYTHONPATH": str(env_dir), "KEY": "none"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (results,) = out.glob("evals/*/*/results.jsonl")
    return {r["prompt"][-1]["content"]: r["reward"] for r in read_jsonl(results)}


@pytest.mark.skipif(not _has("verifiers.legacy"), reason="no legacy")
@pytest.mark.slow
def test_a_third_party_judge_rubric_environment_scores_as_vf_eval(
    tmp_path: Path, scripted_server: Any
) -> None:
    env_dir = tmp_path / "envs"
    (env_dir / "truthful_local").mkdir(parents=True)
    (env_dir / "truthful_local" / "__init__.py").write_text(TRUTHFUL_ENV.read_text())
    model, judge = scripted_server(_truthful_candidate), scripted_server(_truthful_judge)
    config = tmp_path / "evals.yaml"
    config.write_text(
        f"""
models:
  - {{name: scripted, backend: openai, base_url: "{model.base_url}", model: org/candidate}}
benchmarks:
  - name: truthful
    kind: verifiers
    env_id: truthful-local
    env_path: envs
    api: legacy
    eval: {{rollouts: 1}}
    judge:
      model: {{name: judge, backend: openai, base_url: "{judge.base_url}", model: org/judge}}
eval:
  max_retries: 0
"""
    )
    code, out = _run(tmp_path, config)
    (run,) = (out / "evals").glob("truthful--org--candidate/*")
    records = read_jsonl(run / "results.jsonl")
    assert [r["error"] for r in records] == [None] * 6, [r["error"] for r in records]
    rewards = {r["prompt"][-1]["content"]: r["reward"] for r in records}
    # Both judgements of each rollout went through evalgate's judge (the relay counted them).
    assert len(judge.requests) == 12 and {b["model"] for b in judge.requests} == {"org/judge"}
    assert all(r["judge"]["calls"] == 2 for r in records)
    assert code in (0, 1)
    # vf-eval on the same scripted candidate and judge (the environment's own client pointed at
    # it): the same reward for every question.
    expected = _vf_eval(tmp_path, env_dir, model.base_url, judge.base_url)
    assert rewards == expected
    assert sorted(rewards.values()) == [1.0, 1.0, 1.0, 3.0, 3.0, 3.0]


@pytest.mark.skipif(not _has("verifiers.legacy"), reason="no legacy")
@pytest.mark.slow
def test_a_judge_never_asked_in_the_whole_run_is_an_error_not_zeros(
    tmp_path: Path, scripted_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The environment has a JudgeRubric, but its reward function grades with a client of its
    own and scores 0 when that fails: every rollout scored, evalgate's judge never asked. The run
    ends in a config error naming it, not a gate on zeros."""
    model, judge = scripted_server(_candidate), scripted_server(_strict_judge)
    config = _setup(tmp_path, "legacy-unasked", model.base_url, judge.base_url)
    code, _ = _run(tmp_path, config)
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2, err
    assert "judge:" in err and "never asked" in err, err
    assert judge.requests == [] and len(model.requests) == 3

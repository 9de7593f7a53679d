"""Issue 34: every route to a secret is walked, what the PR adds is a proposal, the exam's paths
resolve in the exam tree, and the workflow's inputs cannot change the exam.

Each test is a pull request an adversarial author would write, run through the Action's
entrypoint against a local origin (the harness of ``test_exam.py``): it ends FAIL, ERROR or
refused, with the reason in the comment's first lines, and no secret reaches a host the base
does not send it to.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from fake_github import FakeGitHub
from test_action import PR, REPO, Workspace, _git, _pr_event
from test_exam import (
    _BASE_SANDBOX,
    Exam,
    _agent_evals,
    _agent_exam,
    _evals,
    _head_lines,
    _run_pr,
    _script,
)

from evalgate.action import run_action


@pytest.fixture
def model(scripted_server: Any) -> Any:
    return scripted_server(_script)


@pytest.fixture
def exam(tmp_path: Path, model: Any) -> Exam:
    return Exam(tmp_path, model.base_url, _evals(model.base_url))


def _judge(body: dict[str, Any], n: int) -> str:
    return "Looks right.\nVERDICT: PASS"


def _judged_benchmark(url: str, key: str) -> str:
    judge = f'{{name: j, backend: openai, base_url: "{url}", model: j, api_key_env: {key}}}'
    return (
        f"  - {{name: judged, kind: jsonl, path: qa.jsonl, "
        f"scorer: {{type: judge, model: {judge}}}}}\n"
    )


def _with_benchmark(evals: str, entry: str) -> str:
    return evals.replace("benchmarks:\n", "benchmarks:\n" + entry)


@pytest.mark.parametrize("key", ["INPUT_GITHUB_TOKEN", "OPENAI_API_KEY"])
def test_a_judge_the_pr_adds_gets_no_secret_the_base_does_not_send_there(
    exam: Exam, model: Any, scripted_server: Any, github: FakeGitHub, pr_event: dict[str, Any],
    key: str,
) -> None:  # fmt: skip
    thief = scripted_server(_judge)
    head = exam.pr_files(_with_benchmark(_evals(exam.url), _judged_benchmark(thief.base_url, key)))
    env = exam.environ("pull_request", _pr_event(pr_event, exam, head), head,
                       "refs/pull/42/merge", github.url, results_store="none")  # fmt: skip
    env["OPENAI_API_KEY"] = "sk-openai-value-never-sent"
    code = run_action(env, out=io.StringIO())
    assert code == 2
    first = _head_lines(github)
    assert "judged" in first and "scorer.model" in first and key in first, first
    assert thief.requests == [] and model.requests == []


def test_a_litellm_params_base_url_is_a_destination(
    exam: Exam, model: Any, scripted_server: Any, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    thief = scripted_server(_judge)
    base = (
        "models:\n  - {name: m, backend: litellm, model: openai/org-m, api_key_env: PROVIDER_KEY,"
        f' api_base: "{model.base_url}"}}\n'
    )
    evals = _evals(exam.url).split("benchmarks:")[1]
    exam.base = exam.commit(base + "benchmarks:" + evals, "main")
    _git(exam.ws, "push", "-q", "origin", "main")
    for spelling in ("base_url", "Base-URL", "azure_endpoint"):
        pr = base.replace(
            "api_key_env: PROVIDER_KEY,",
            f'api_key_env: PROVIDER_KEY, params: {{{spelling}: "{thief.base_url}"}},',
        )
        head = exam.pr_files(pr + "benchmarks:" + evals)
        env = exam.environ("pull_request", _pr_event(pr_event, exam, head), head,
                           "refs/pull/42/merge", github.url, results_store="none")  # fmt: skip
        env["PROVIDER_KEY"] = "provider-key-value"
        assert run_action(env, out=io.StringIO()) == 2, spelling
        first = _head_lines(github)
        assert "would send PROVIDER_KEY to http://127.0.0.1" in first, (spelling, first)
        assert f":{thief.base_url.split(':')[2].split('/')[0]}" in first
        assert thief.requests == []


# -- the workflow's inputs: on pull_request the workflow is the PR's ---------------------------


def _run_with(exam: Exam, github: FakeGitHub, pr_event: dict[str, Any], head: str,
              **inputs: str) -> tuple[int, str]:  # fmt: skip
    event = _pr_event(pr_event, exam, head)
    env = exam.environ("pull_request", event, head, "refs/pull/42/merge", github.url,
                       results_store="none", **inputs)  # fmt: skip
    out = io.StringIO()
    return run_action(env, out=out), out.getvalue()


MARGIN_ONLY = "margin: 0.05"


@pytest.fixture
def margin_exam(tmp_path: Path, model: Any) -> Exam:
    """A base gated on the baseline alone: only the margin stands between a regression and PASS."""
    return Exam(tmp_path, model.base_url, _evals(model.base_url, gate=MARGIN_ONLY))


@pytest.mark.parametrize(
    ("overrides", "files", "named"),
    [
        ("gate.margin=0.9", {}, "gate.margin"),
        ("benchmarks.qa.path=pr.jsonl", {"pr.jsonl": "edited"}, "benchmarks.qa.path"),
        ("eval.max_error_rate=0.9", {}, "eval.max_error_rate"),
    ],
    ids=["gate-margin", "benchmark-path", "eval"],
)
def test_an_override_of_the_exam_fails_with_the_reason_first(
    margin_exam: Exam, github: FakeGitHub, pr_event: dict[str, Any], overrides: str,
    files: dict[str, str], named: str, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(margin_exam.ws)  # the runner's working directory: the workspace
    rows = margin_exam.rows(answer=lambda i: "wrong" if i % 2 == 0 else f"A{i}")
    given: dict[str, str | Path] = {k: rows for k in files}
    head = margin_exam.pr_files(_evals(margin_exam.url, system="Please regress.",
                                       gate=MARGIN_ONLY), given)  # fmt: skip
    code, log = _run_with(margin_exam, github, pr_event, head, overrides=overrides)
    assert code == 1, log
    first = _head_lines(github)
    assert "evalgate: FAIL" in first
    assert f"the workflow changes the exam: {named} (the `overrides` input)" in first, first


def test_a_candidate_override_is_applied_and_named(
    margin_exam: Exam, model: Any, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    head = margin_exam.pr_files(_evals(margin_exam.url, system="Answer briefly.", gate=MARGIN_ONLY))
    code, log = _run_with(margin_exam, github, pr_event, head,
                          overrides="sampling.max_tokens=64")  # fmt: skip
    assert code == 0, log
    body = github.bodies(REPO, PR)[0]
    assert "evalgate: PASS" in _head_lines(github)
    assert "the candidate overrides `sampling.max_tokens=64`" in body
    assert {r["max_tokens"] for r in model.requests} == {64}  # both sides, alike


def test_a_config_the_base_lacks_is_not_a_first_adoption(
    margin_exam: Exam, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    pr = _evals(margin_exam.url, system="Please regress.", gate="margin: 0.9")
    head = margin_exam.pr_files(_evals(margin_exam.url, gate=MARGIN_ONLY), {"evals_pr.yaml": pr})
    code, log = _run_with(margin_exam, github, pr_event, head, config="evals_pr.yaml")
    assert code == 1, log
    first = _head_lines(github)
    assert "evalgate: FAIL" in first
    assert "the workflow changes the exam: config evals_pr.yaml" in first, first
    assert "first adoption" not in github.bodies(REPO, PR)[0]


WORKFLOW = """
on: pull_request
jobs:
  evals:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: org/evalgate@v1
        with: {config: evals.yaml}
"""


def test_a_config_other_than_the_bases_workflow_gives_fails(
    tmp_path: Path, model: Any, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    # The base keeps a looser file too (for nightly runs, say); its PR workflow names evals.yaml.
    exam = Exam.__new__(Exam)
    Workspace.__init__(exam, tmp_path, model.base_url)
    (exam.ws / ".github" / "workflows").mkdir(parents=True)
    (exam.ws / ".github" / "workflows" / "evals.yml").write_text(WORKFLOW)
    loose = _evals(model.base_url, gate="margin: 0.9")
    (exam.ws / "evals-nightly.yaml").write_text(loose)
    exam.base = exam.commit(_evals(model.base_url, gate=MARGIN_ONLY), "main")
    _git(exam.ws, "push", "-q", "origin", "main")
    regress = loose.replace("Answer.", "Please regress.")
    head = exam.pr_files(_evals(model.base_url, gate=MARGIN_ONLY), {"evals-nightly.yaml": regress})
    code, log = _run_with(exam, github, pr_event, head, config="evals-nightly.yaml")
    assert code == 1, log
    first = _head_lines(github)
    named = "config evals-nightly.yaml (the base's workflow gives evals.yaml)"
    assert f"the workflow changes the exam: {named}" in first, first


# -- the exam's paths resolve in the exam's tree, never the PR's checkout --------------------------


def _hf_evals(url: str, system: str = "Answer.") -> str:
    return _evals(url, system=system).replace(
        "{name: qa, kind: jsonl, path: qa.jsonl,",
        "{name: qa, kind: hf, dataset: acme/qa-exam, split: train,",
    )


def test_a_folder_the_pr_adds_never_shadows_the_exams_hub_dataset(
    tmp_path: Path, model: Any, github: FakeGitHub, pr_event: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the Hub dataset itself is not needed: never read
    exam = Exam(tmp_path, model.base_url, _hf_evals(model.base_url))
    monkeypatch.chdir(exam.ws)  # the runner's working directory: the PR's checkout
    rows = exam.rows(answer=lambda i: "wrong" if i % 2 == 0 else f"A{i}")
    head = exam.pr_files(_hf_evals(exam.url, system="Please regress."),
                         {"acme/qa-exam/train.jsonl": rows})  # fmt: skip
    code, log = _run_with(exam, github, pr_event, head)
    assert code in (2, 3), log  # refused (or the Hub unreachable): never the PR's rows
    first = _head_lines(github, 6)
    assert "dataset 'acme/qa-exam' names a Hub dataset" in first, first
    assert "working directory" in first and "refused" in first
    assert model.requests == []


# -- what the PR adds is a proposal ---------------------------------------------------------------

NEW_IN_PR = "new in this PR: gated after merge"


def test_a_benchmark_the_pr_adds_is_a_proposal(
    exam: Exam, model: Any, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    extra = [{"id": f"e{i}", "prompt": f"Q{100 + i}", "answer": "never"} for i in range(10)]
    added = "  - {name: extra, kind: jsonl, path: extra.jsonl}\n"
    evals = _with_benchmark(_evals(exam.url, system="Answer briefly."), added)
    evals = evals.replace("thresholds: {qa: {accuracy: 0.9}}",
                          "thresholds: {qa: {accuracy: 0.9}, extra: {accuracy: 0.0}}")  # fmt: skip
    head = exam.pr_files(evals, {"extra.jsonl": "\n".join(map(json.dumps, extra)) + "\n"})
    code, log = _run_pr(exam, github, pr_event, head)
    assert code == 0, log  # it scores 0 and the PR set it a threshold: not the base's gate
    body = github.bodies(REPO, PR)[0]
    (row,) = [line for line in body.splitlines() if line.startswith("| m | extra | accuracy")]
    assert NEW_IN_PR in row and "| – |" in row, row  # no threshold: the base sets none for it
    qa = [line for line in body.splitlines() if line.startswith("| m | qa | accuracy")]
    assert len(qa) == 2 and not any(NEW_IN_PR in line for line in qa)  # compared, and scored
    # The base's benchmarks run first, in the base's order: the PR's cannot go before them.
    pr_run = [r["messages"][-1]["content"] for r in model.requests[60:]]
    assert [int(p.removeprefix("Q")) < 100 for p in pr_run] == [True] * 60 + [False] * 10


# -- a candidate's variants on an agent benchmark ------------------------------------------------


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="agent tasks run in bubblewrap")
@pytest.mark.parametrize("lazy", [False, True], ids=["solves", "regresses"])
def test_variants_the_pr_adds_are_scored_and_gated(
    tmp_path: Path, model: Any, github: FakeGitHub, pr_event: dict[str, Any], lazy: bool
) -> None:
    exam = _agent_exam(tmp_path, model.base_url)
    args = '["-lazy"]' if lazy else "[]"
    evals = _agent_evals(exam.url, "", _BASE_SANDBOX).replace(
        "    sandbox:", f"    variants: [{{name: a, args: {args}}}, {{name: b}}]\n    sandbox:"
    )
    head = exam.pr_files(evals)
    code, log = _run_with(exam, github, pr_event, head)
    assert code == (1 if lazy else 0), log  # a verdict, never a crash (exit 4)
    body = github.bodies(REPO, PR)[0]
    assert "crashed" not in body and ("evalgate: FAIL" in _head_lines(github)) == lazy
    for variant in ("ag.a", "ag.b"):  # each variant compared with the base's run, on its own row
        assert f"| m | {variant} | accuracy | 100.0% |" in body, body


def test_a_model_renamed_by_the_pr_is_still_compared_with_the_bases(
    margin_exam: Exam, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    exam = margin_exam
    # The same model under a new label would have no baseline: a regression with nothing to
    # compare. The base's label has no run of the PR: a FAIL, as a dropped benchmark is.
    evals = _evals(exam.url, system="Please regress.", gate="margin: 0.05")
    head = exam.pr_files(evals.replace("name: m,", "name: m-renamed,"))
    code, log = _run_pr(exam, github, pr_event, head)
    assert code == 1, log
    first = _head_lines(github, 6)
    assert "evalgate: FAIL" in first and "none of this PR's models (m-renamed)" in first, first


@pytest.mark.parametrize(
    ("inputs", "named"),
    [
        ({"baseline": "none"}, "baseline none"),
        ({"baseline": "stored"}, "baseline stored"),
        ({"results_store": "local:forged"}, "results_store local:forged"),
    ],
    ids=["no-baseline", "stored-only", "forged-store"],
)
def test_baseline_inputs_that_would_drop_or_forge_the_comparison_fail(
    margin_exam: Exam, github: FakeGitHub, pr_event: dict[str, Any], inputs: dict[str, str],
    named: str,
) -> None:  # fmt: skip
    head = margin_exam.pr_files(_evals(margin_exam.url, system="Please regress.", gate=MARGIN_ONLY))
    event = _pr_event(pr_event, margin_exam, head)
    env = margin_exam.environ("pull_request", event, head, "refs/pull/42/merge", github.url,
                              **{"results_store": "none", **inputs})  # fmt: skip
    code = run_action(env, out=io.StringIO())
    assert code == 1
    first = _head_lines(github, 6)
    assert "evalgate: FAIL" in first and f"the workflow changes the exam: {named}" in first, first


def test_an_exam_override_the_bases_own_workflow_passes_is_the_bases(
    tmp_path: Path, model: Any, github: FakeGitHub, pr_event: dict[str, Any]
) -> None:
    # A CI that runs fewer items passes eval.num_examples in its workflow, on the base too.
    exam = Exam.__new__(Exam)
    Workspace.__init__(exam, tmp_path, model.base_url)
    (exam.ws / ".github" / "workflows").mkdir(parents=True)
    step = "with: {config: evals.yaml, overrides: eval.num_examples=20}"
    (exam.ws / ".github" / "workflows" / "evals.yml").write_text(
        WORKFLOW.replace("with: {config: evals.yaml}", step)
    )
    exam.base = exam.commit(_evals(model.base_url, gate=MARGIN_ONLY), "main")
    _git(exam.ws, "push", "-q", "origin", "main")
    head = exam.pr_files(_evals(model.base_url, system="Answer briefly.", gate=MARGIN_ONLY))
    code, log = _run_with(exam, github, pr_event, head, overrides="eval.num_examples=20")
    assert code == 0, log
    assert "changes the exam" not in github.bodies(REPO, PR)[0]
    assert len(model.requests) == 2 * 20  # applied to the base's run and the PR's alike

"""Real runs for the report tests: a baseline and a PR run of two benchmarks through the CLI,
against scripted servers, producing every gate outcome (PASS, FAIL, INCONCLUSIVE, ERROR)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalgate.cli import main
from tests.conftest import ROOT, answer_arith, write_config

CAPITALS = ROOT / "examples" / "quickstart" / "capitals.jsonl"
_CITY = {
    json.loads(line)["prompt"]: json.loads(line)["answer"]
    for line in CAPITALS.read_text(encoding="utf-8").splitlines()
}


def _answer(body: dict[str, Any], *, wrong_arith: bool, wrong_city: str | None) -> str:
    text = body["messages"][-1]["content"]
    if text.startswith("What is the capital of "):
        country = text.removeprefix("What is the capital of ").rstrip("?")
        return "I am not sure" if country == wrong_city else f"It is {_CITY[country]}."
    right = answer_arith(body, 0)
    a, _, _b = text.removeprefix("What is ").rstrip("?").split()
    # The PR's regression: items whose first operand is a multiple of 4 are answered wrong.
    return str(int(right) + 1) if wrong_arith and int(a) % 4 == 0 else right


@dataclass
class ReportRuns:
    base: Path  # output root of the baseline run
    head: Path  # output root of the PR run (compared with the baseline)
    exit_code: int


def _config(tmp: Path, models: str) -> Path:
    return write_config(
        tmp,
        f"""
models:
{models}
benchmarks:
  - name: arith
    eval: {{num_examples: 40}}
  - name: capitals
    kind: jsonl
    path: {CAPITALS}
    scorer: {{type: contains}}
    prompt_template: "What is the capital of {{{{ prompt }}}}?"
eval: {{max_concurrent: 4, max_retries: 0}}
gate:
  thresholds: {{arith: {{accuracy: 0.5}}}}
""",
    )


def make_runs(tmp: Path, scripted_server: Any) -> ReportRuns:
    """Baseline: perfect answers. PR: arith regresses (FAIL), one capital is lost (not
    significant: INCONCLUSIVE), and a second model's server only answers 500 (ERROR)."""
    good = scripted_server(lambda body, n: _answer(body, wrong_arith=False, wrong_city=None))
    pr = scripted_server(lambda body, n: _answer(body, wrong_arith=True, wrong_city="Italy"))
    broken = scripted_server(lambda body, n: (500, "upstream exploded", {}))
    line = '  - {{name: {name}, backend: openai, base_url: "{url}", model: org/{name}}}'
    base_cfg = _config(tmp / "base", line.format(name="scripted", url=good.base_url))
    head_models = "\n".join(
        [
            line.format(name="scripted", url=pr.base_url),
            line.format(name="broken", url=broken.base_url),
        ]
    )
    head_cfg = _config(tmp / "head", head_models)
    env = {"CI": "true"}
    base, head = tmp / "base" / "out", tmp / "head" / "out"
    assert main(["local", str(base_cfg), "--output", str(base), "--no-cache"], environ=env) == 0
    code = main(
        ["local", str(head_cfg), "--output", str(head), "--no-cache", "--baseline", str(base)],
        environ=env,
    )
    return ReportRuns(base=base, head=head, exit_code=code)


def _sentence(i: int, variant: int) -> str:
    words = ["the", "answer", "is", "clearly", "given", "by", "step", "one", "then", "two"]
    body = " ".join(words[(i + k) % len(words)] for k in range(24))
    return f"Item {i}: {body}. Final answer: {i * 7 + variant}."


def big_dataset(path: Path, n: int) -> Path:
    """``n`` items whose prompts and answers read like a QA benchmark's."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            prompt = f"Question {i}: " + " ".join(f"fact-{(i * 31 + k) % 997}" for k in range(40))
            fh.write(json.dumps({"id": f"q{i:05d}", "prompt": prompt, "answer": str(i * 7)}) + "\n")
    return path


def big_answer(body: dict[str, Any], *, pr: bool) -> str:
    """Base answers every item right; the PR gets every 10th wrong and every 25th right
    differently worded (the table's diff has something to show)."""
    i = int(body["messages"][-1]["content"].split(":", 1)[0].removeprefix("Question "))
    variant = 1 if pr and i % 10 == 0 else 0
    text = _sentence(i, variant)
    return text.replace("clearly", "plainly") if pr and i % 25 == 3 else text


def big_config(tmp: Path, url: str, data: Path) -> Path:
    return write_config(
        tmp,
        f"""
models:
  - {{name: scripted, backend: openai, base_url: "{url}", model: org/scripted}}
benchmarks:
  - name: qa
    kind: jsonl
    path: {data}
    scorer: {{type: contains}}
eval: {{max_concurrent: 16, max_retries: 0}}
""",
    )


def make_big_runs(tmp: Path, start_server: Any, n: int) -> Path:
    """A baseline and a PR run of ``n`` items through the CLI; returns the PR's output root."""
    data = big_dataset(tmp / "qa.jsonl", n)
    base_srv = start_server(lambda body, k: big_answer(body, pr=False))
    pr_srv = start_server(lambda body, k: big_answer(body, pr=True))
    (tmp / "b").mkdir()
    (tmp / "h").mkdir()
    base_cfg = big_config(tmp / "b", base_srv.base_url, data)
    head_cfg = big_config(tmp / "h", pr_srv.base_url, data)
    env = {"CI": "true"}
    base, head = tmp / "b" / "out", tmp / "h" / "out"
    main(["local", str(base_cfg), "--output", str(base), "--no-cache"], environ=env)
    main(
        ["local", str(head_cfg), "--output", str(head), "--no-cache", "--baseline", str(base)],
        environ=env,
    )
    return head


def verdict_of(head: Path, base: Path) -> Any:
    """The verdict of saved runs, as `evalgate compare` gates them (for rendering variants)."""
    from evalgate.compare.paired import compare_with_baselines, load_run, summary_of
    from evalgate.config.spec import GateSettings
    from evalgate.gate import decide
    from evalgate.run.rundir import find_runs

    gate = GateSettings()
    bases = {k: load_run(p) for k, p in find_runs(base).items()}
    heads = [load_run(p) for p in find_runs(head).values()]
    comps = compare_with_baselines(heads, bases, gate)
    return decide([summary_of(h) for h in heads], gate, error_budgets={}, comparisons=comps)

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

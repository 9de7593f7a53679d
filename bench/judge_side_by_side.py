"""Side by side on one labelled set with one judge: evalgate's rubric judge (`judge-check`),
inspect's ``model_graded_qa`` and promptfoo's ``llm-rubric`` (issue #38).

Usage: ``nice -n 10 python bench/judge_side_by_side.py [--promptfoo PATH/TO/promptfoo]``
(inspect from ``EVALGATE_INSPECT_PYTHON``; promptfoo's CLI where given or on PATH, else its
row says why it is missing).

The labelled set: 30 closed questions, each with a reference answer, a candidate's completion
and a person's label (15 pass, 15 fail). The judge: one scripted server (loopback HTTP), the
same "opinion" for every tool — it agrees with the label on 24 items, disagrees on 3, and on 3
rambles without a verdict — written in the format each tool's prompt asks for (a last line
``VERDICT: PASS`` for evalgate's text verdict, a JSON ``{reasoning, verdict}`` when evalgate
asks for a structured one, ``GRADE: C`` / ``GRADE: I`` for inspect, ``{"reason", "pass",
"score"}`` JSON for promptfoo), as an instruction-following model would. Each tool gets its own
server so its requests are counted apart: the figures are what each tool sent and made of the
replies, not the judge's quality.

Per tool: calls, the sampling fields it sent, how many items got a verdict, what it did with
the unparseable replies, agreement with the labels on the items it judged (accuracy, Cohen's
κ) and on all 30 counting unparseable as whatever the tool recorded. Prints a Markdown table;
asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evalgate.cli import main  # noqa: E402
from tests.conftest import scripted_servers  # noqa: E402

CAPITALS = [
    ("France", "Paris", "Lyon"), ("Italy", "Rome", "Milan"), ("Spain", "Madrid", "Barcelona"),
    ("Germany", "Berlin", "Munich"), ("Japan", "Tokyo", "Osaka"), ("Canada", "Ottawa", "Toronto"),
    ("Australia", "Canberra", "Sydney"), ("Brazil", "Brasilia", "Rio de Janeiro"),
    ("Turkey", "Ankara", "Istanbul"), ("Egypt", "Cairo", "Alexandria"),
    ("India", "New Delhi", "Mumbai"), ("Kenya", "Nairobi", "Mombasa"),
    ("Peru", "Lima", "Cusco"), ("Norway", "Oslo", "Bergen"), ("Poland", "Warsaw", "Krakow"),
]  # fmt: skip
DISAGREE = {4, 11, 23}  # the judge's verdict is the opposite of the label
RAMBLE = {7, 16, 27}  # the judge gives no verdict


def labelled_set() -> list[dict[str, Any]]:
    """30 items: per country one right completion (pass) and one wrong (fail)."""
    rows = []
    for i in range(30):
        country, capital, other = CAPITALS[i % 15]
        right = i < 15
        said = capital if right else other
        rows.append(
            {
                "id": f"q{i:02d}",
                "question": f"Q{i:02d}. What is the capital of {country}?",
                "completion": f"The capital of {country} is {said}.",
                "reference": capital,
                "label": "pass" if right else "fail",
            }
        )
    return rows


def judge(body: dict[str, Any], n: int) -> str:
    """One judge's opinion, in the format the prompt asks for."""
    text = "\n".join(str(m.get("content") or "") for m in body.get("messages") or [])
    i = int(re.search(r"Q(\d\d)\.", text).group(1))  # type: ignore[union-attr]
    right = i < 15
    verdict = (not right) if i in DISAGREE else right
    if i in RAMBLE:
        return "Hmm. The answer names a city; whether that is the capital is hard to say here."
    reason = "The answer names the capital." if verdict else "The answer names another city."
    if body.get("response_format"):  # evalgate's structured verdict
        return json.dumps({"reasoning": reason, "verdict": "PASS" if verdict else "FAIL"})
    if "GRADE: C" in text:  # inspect's model_graded_qa instructions
        return f"{reason}\nGRADE: {'C' if verdict else 'I'}"
    if '"pass"' in text or "'pass'" in text:  # promptfoo's llm-rubric asks for this JSON
        return json.dumps({"reason": reason, "pass": verdict, "score": 1.0 if verdict else 0.0})
    return f"{reason}\nVERDICT: {'PASS' if verdict else 'FAIL'}"  # evalgate's text verdict


def kappa(pairs: list[tuple[bool, bool]]) -> float | None:
    n = len(pairs)
    if not n:
        return None
    agree = sum(a == b for a, b in pairs) / n
    pa = sum(a for a, _ in pairs) / n
    pb = sum(b for _, b in pairs) / n
    chance = pa * pb + (1 - pa) * (1 - pb)
    return None if chance == 1 else (agree - chance) / (1 - chance)


def sampling_sent(requests: list[dict[str, Any]]) -> str:
    keys = ("temperature", "max_tokens", "max_completion_tokens", "seed", "response_format")
    seen = []
    for k in keys:
        values = {json.dumps(r.get(k), sort_keys=True) for r in requests if k in r}
        if not values:
            continue
        shown = "json_schema" if k == "response_format" else ",".join(sorted(values))
        seen.append(f"{k}={shown}")
    return " ".join(seen) or "none"


# -- evalgate -------------------------------------------------------------------------------


def run_evalgate(rows: list[dict[str, Any]], base_url: str, fmt: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-sbs-") as tmp:
        folder = Path(tmp)
        (folder / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (folder / "items.jsonl").write_text(
            "".join(
                json.dumps({"id": r["id"], "prompt": r["question"], "answer": r["reference"]})
                + "\n"
                for r in rows
            )
        )
        (folder / "evals.yaml").write_text(
            textwrap.dedent(
                f"""
                models: [{{name: m, backend: openai, base_url: "http://127.0.0.1:9/v1"}}]
                benchmarks:
                  - name: capitals
                    kind: jsonl
                    path: items.jsonl
                    scorer:
                      type: judge
                      mode: rubric
                      rubric: "The answer states the reference answer."
                      verdict_format: {fmt}
                      model:
                        {{name: judge, backend: openai, base_url: "{base_url}", model: org/judge}}
                      sampling: {{temperature: 0.0, max_tokens: 256}}
                      labels: labels.jsonl
                eval: {{max_retries: 0}}
                """
            )
        )
        out = io.StringIO()
        with contextlib.redirect_stderr(io.StringIO()):
            code = main(["judge-check", str(folder / "evals.yaml")], environ={"CI": "1"}, out=out)
    text = out.getvalue()
    judged = re.search(r"(\d+)/(\d+) labelled examples judged", text)
    return {"code": code, "text": text, "judged": int(judged.group(1)) if judged else None}


def evalgate_row(rows: list[dict[str, Any]], start: Any, fmt: str) -> dict[str, Any]:
    server = start(judge)
    t0 = time.perf_counter()
    result = run_evalgate(rows, server.base_url, fmt)
    seconds = time.perf_counter() - t0
    first = len(server.requests)
    run_evalgate(rows, server.base_url, fmt)  # again: evalgate's response cache answers
    again = len(server.requests) - first
    accuracy = re.search(r"accuracy\s+([\d.]+)\s*%?", result["text"])
    kap = re.search(r"(?:Cohen's )?κ\s*=?\s*(-?[\d.]+)", result["text"])
    return {
        "tool": f"evalgate rubric judge (`judge-check`, verdict_format: {fmt})",
        "calls": f"{first} (a re-run: {again})",
        "sent": sampling_sent(server.requests),
        "judged": result["judged"],
        "unparseable": (
            f"{len(rows) - result['judged']} without a verdict: errors, not scored"
            if result["judged"] is not None
            else "?"
        ),
        "accuracy": accuracy.group(1) if accuracy else "?",
        "kappa": kap.group(1) if kap else "?",
        "all30": None,
        "seconds": seconds,
        "raw": result["text"],
    }


# -- inspect ---------------------------------------------------------------------------------

INSPECT_TASK = """
import json
from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ModelOutput
from inspect_ai.scorer import model_graded_qa
from inspect_ai.solver import solver

ROWS = json.load(open("rows.json"))


@solver
def canned():
    async def solve(state, generate):
        state.output = ModelOutput.from_content("canned", state.metadata["completion"])
        state.messages.append(state.output.message)
        return state

    return solve


@task
def side_by_side():
    samples = [
        Sample(id=r["id"], input=r["question"], target=r["reference"],
               metadata={"completion": r["completion"]})
        for r in ROWS
    ]
    return Task(dataset=MemoryDataset(samples), solver=canned(), scorer=model_graded_qa())
"""

READ_LOG = """
import json, math, sys
from inspect_ai.log import read_eval_log
log = read_eval_log(sys.argv[1])
out = {}
for s in log.samples:
    v = next(iter(s.scores.values())).value
    out[s.id] = None if isinstance(v, float) and math.isnan(v) else v
print(json.dumps(out))
"""


def inspect_row(rows: list[dict[str, Any]], start: Any) -> dict[str, Any]:
    python = os.environ.get("EVALGATE_INSPECT_PYTHON", "")
    tool = "inspect `model_graded_qa` (grader role)"
    if not python:
        return {"tool": tool, "missing": "EVALGATE_INSPECT_PYTHON is not set"}
    server = start(judge)
    with tempfile.TemporaryDirectory(prefix="bench-sbs-inspect-") as tmp:
        folder = Path(tmp)
        (folder / "rows.json").write_text(json.dumps(rows))
        (folder / "task.py").write_text(INSPECT_TASK)
        env = {**os.environ, "GRADER_BASE_URL": server.base_url, "GRADER_API_KEY": "none"}
        argv = [python, "-m", "inspect_ai", "eval", "task.py@side_by_side"]
        argv += ["--model", "mockllm/model", "--model-role", "grader=openai-api/grader/org/judge"]
        argv += ["--log-dir", "logs", "--log-format", "json", "--display", "none"]
        argv += ["--max-retries", "0", "--temperature", "0"]
        t0 = time.perf_counter()
        done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        if done.returncode != 0:
            return {"tool": tool, "missing": f"inspect eval failed: {done.stderr[-300:]}"}
        (log,) = (folder / "logs").glob("*.json")
        read = subprocess.run([python, "-c", READ_LOG, str(log)], capture_output=True, text=True)
    scores = json.loads(read.stdout)
    labels = {r["id"]: r["label"] == "pass" for r in rows}
    pairs = [(labels[k], v == "C") for k, v in scores.items() if v is not None]
    return {
        "tool": tool,
        "calls": len(server.requests),
        "sent": sampling_sent(server.requests),
        "judged": len(pairs),
        "unparseable": f"{len(scores) - len(pairs)} unscored (NaN), left out of the metrics",
        "accuracy": f"{100 * sum(a == b for a, b in pairs) / len(pairs):.1f}",
        "kappa": f"{kappa(pairs):.2f}",
        "all30": None,
        "seconds": seconds,
    }


# -- promptfoo -------------------------------------------------------------------------------


def promptfoo_row(rows: list[dict[str, Any]], start: Any, cli: str | None) -> dict[str, Any]:
    tool = "promptfoo `llm-rubric`"
    if cli is None or shutil.which(cli) is None:
        return {"tool": tool, "missing": f"promptfoo CLI not found ({cli or 'not on PATH'})"}
    server = start(judge)
    with tempfile.TemporaryDirectory(prefix="bench-sbs-promptfoo-") as tmp:
        folder = Path(tmp)
        tests = [
            {
                "vars": {"completion": r["completion"]},
                "assert": [
                    {
                        "type": "llm-rubric",
                        "value": f"{r['question']} The answer states the reference answer: "
                        f"{r['reference']}.",
                    }
                ],
                "metadata": {"id": r["id"]},
            }
            for r in rows
        ]
        config = {
            "prompts": ["{{completion}}"],
            "providers": ["echo"],
            "defaultTest": {
                "options": {
                    "provider": {
                        "id": "openai:chat:org/judge",
                        "config": {
                            "apiBaseUrl": server.base_url,
                            "apiKey": "none",
                            "temperature": 0,
                        },
                    }
                }
            },
            "tests": tests,
        }
        (folder / "promptfooconfig.json").write_text(json.dumps(config))
        env = {**os.environ, "PROMPTFOO_DISABLE_TELEMETRY": "1", "PROMPTFOO_DISABLE_UPDATE": "1",
               "PROMPTFOO_CONFIG_DIR": str(folder / ".pf"), "OPENAI_API_KEY": "none"}  # fmt: skip
        argv = [cli, "eval", "-c", "promptfooconfig.json", "-o", "out.json", "--no-cache"]
        argv += ["--no-progress-bar", "--no-table", "--no-write"]
        t0 = time.perf_counter()
        done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        out_file = folder / "out.json"
        if not out_file.is_file():
            return {"tool": tool, "missing": f"promptfoo eval failed: {done.stderr[-300:]}"}
        results = json.loads(out_file.read_text())["results"]["results"]
    labels = {r["id"]: r["label"] == "pass" for r in rows}
    rambled = {f"q{i:02d}" for i in RAMBLE}
    pairs, as_fail, reason = [], 0, ""
    for res in results:
        item = (res.get("testCase") or {}).get("metadata", {}).get("id")
        pairs.append((labels[item], bool(res.get("success"))))
        if item in rambled and not res.get("success"):
            as_fail += 1
            reason = str((res.get("gradingResult") or {}).get("reason") or "")[:80]
    return {
        "tool": tool,
        "calls": len(server.requests),
        "sent": sampling_sent(server.requests),
        "judged": len(pairs),
        "unparseable": f"{as_fail} scored FAIL, as a verdict would be (reason: {reason!r})",
        "accuracy": f"{100 * sum(a == b for a, b in pairs) / len(pairs):.1f}",
        "kappa": f"{kappa(pairs):.2f}",
        "all30": None,
        "seconds": seconds,
    }


def main_() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--promptfoo", default=shutil.which("promptfoo"))
    args = parser.parse_args()
    rows = labelled_set()
    with contextlib.contextmanager(scripted_servers)() as start:
        table = [
            evalgate_row(rows, start, "text"),
            evalgate_row(rows, start, "json"),
            inspect_row(rows, start),
            promptfoo_row(rows, start, args.promptfoo),
        ]
    print(f"labelled set: {len(rows)} items (15 pass, 15 fail); the judge disagrees with the "
          f"label on {len(DISAGREE)} and gives no verdict on {len(RAMBLE)}\n")  # fmt: skip
    print("| tool | judge calls | sampling sent | items with a verdict | unparseable reply | "
          "accuracy on judged | κ | wall s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for row in table:
        if "missing" in row:
            print(f"| {row['tool']} | — | — | — | — | not run: {row['missing']} | — | — |")
            continue
        print(f"| {row['tool']} | {row['calls']} | {row['sent']} | {row['judged']}/{len(rows)} | "
              f"{row['unparseable']} | {row['accuracy']} % | {row['kappa']} | "
              f"{row['seconds']:.1f} |")  # fmt: skip
    for row in table:
        if row.get("raw"):
            print(f"\n{row['tool']} said:\n{textwrap.indent(row['raw'].strip(), '  ')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main_())

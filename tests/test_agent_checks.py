"""A task's check cannot be poisoned by the agent it judges.

The agent's sandbox is gone when the check runs: only the workspace is copied into a fresh
sandbox (fresh /tmp and HOME, no user site-packages), and the built-in checks run the agent's
code in child processes and judge its results themselves, so an ``os._exit(0)`` in an agent's
module, a ``.pth`` file in the agent's user site, or a planted score file cannot pass a task.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from evalgate.sandbox import SandboxConfig, backend_class, open_backend
from evalgate.suites.agent import Attempt, load_tasks, run_task
from tests.conftest import ROOT

TASKS = ROOT / "benchmarks" / "agent-basics"
BWRAP = backend_class("local").unavailable() is None
pytestmark = pytest.mark.skipif(not BWRAP, reason="check isolation needs a sandbox: bubblewrap")
CONFIG = SandboxConfig(timeout_s=120)
PYVER = "python3.11"  # the sandbox's /usr/bin/python3; the attack globs for any version

# Poison every place a later Python process might pick code up from, and make it undeletable.
POISON = r"""
set -e
for site in /tmp/.local/lib/python3*/site-packages "$HOME"/.local/lib/python3.*/site-packages \
            /tmp/.local/lib/PYVER/site-packages; do
    mkdir -p "$site"
    printf 'import os; os._exit(0)\n' > "$site/evil.pth"
    printf 'import os; os._exit(0)\n' > "$site/usercustomize.py"
    chmod 555 "$site"
done
chmod 555 /tmp/.local /tmp/.local/lib
printf 'import os; os._exit(0)\n' > sitecustomize.py
printf 'import os; os._exit(0)\n' > usercustomize.py
# Every module of the workspace exits 0 as soon as it is imported.
find . -name '*.py' ! -name '*customize.py' ! -name 'test_*' | while read -r f; do
    { printf 'import os; os._exit(0)\n'; cat "$f"; } > "$f.new" && mv "$f.new" "$f"
done
# A process left behind to rewrite the answer while the check runs.
(while :; do echo 1 > score.txt; sleep 0.05; done) >/dev/null 2>&1 &
""".replace("PYVER", PYVER)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


class ScriptAgent:
    """Runs a shell script in the workspace (then, optionally, the task's reference solution)."""

    def __init__(self, script: str, solve: bool = False) -> None:
        self.script, self.solve = script, solve

    async def run(self, attempt: Attempt) -> None:
        box, task, record = attempt.box, attempt.task, attempt.record
        if self.solve:
            await box.exec(["sh", "-s"], stdin=task.solution, timeout_s=60)
        result = await box.exec(["sh", "-s"], stdin=self.script, timeout_s=60)
        record.exit_code = result.exit_code
        record.log = result.stderr


def _tasks(tmp_path: Path, entries: list[dict[str, Any]]) -> list[Any]:
    path = tmp_path / "tasks.yaml"
    path.write_text(json.dumps({"tasks": entries}))
    return load_tasks(path)


def _run_all(tasks: list[Any], agent: Any) -> list[Any]:
    backend = open_backend("local")

    async def go() -> list[Any]:
        return await asyncio.gather(
            *(run_task(t, agent, None, backend=backend, sandbox=CONFIG) for t in tasks)
        )

    return run(go())


def test_pth_poisoning_cannot_pass_an_always_failing_check(tmp_path: Path) -> None:
    tasks = _tasks(
        tmp_path,
        [
            {"id": "plain", "prompt": "p", "check": "python3 -c 'import sys; sys.exit(1)'"},
            {"id": "isolated", "prompt": "p", "check": "python3 -I -c 'import sys; sys.exit(1)'"},
            {"id": "module", "prompt": "p", "check": "python3 -m json.tool /dev/null; exit 1"},
        ],
    )
    for result in _run_all(tasks, ScriptAgent(POISON)):
        assert result.agent.exit_code == 0, result.agent.log  # the poison was laid
        assert result.reward == 0.0, (result.task_id, result.reason, result.check_output)
        assert result.reason.startswith("check failed (exit 1)"), result.reason


def test_the_check_sees_the_workspace_and_nothing_else_of_the_agent(tmp_path: Path) -> None:
    leave = (
        "echo answer > answer.txt; mkdir -p locked; echo x > locked/f; chmod 000 locked/f locked; "
        "echo left > /tmp/left.txt; mkdir -p $HOME/.config; echo x > $HOME/.config/rc; "
        "(sleep 600 &) ; echo 1 > score.txt"
    )
    tasks = _tasks(
        tmp_path,
        [
            {
                "id": "fresh",
                "prompt": "p",
                "check": 'test "$(cat answer.txt)" = answer && test ! -e /tmp/left.txt && '
                'test ! -e "$HOME/.config" && test "$(ls locked)" = f && '
                "test -z \"$(ps -eo comm= | grep -v -e '^ps$' -e '^sh$' -e '^grep$' "
                "-e '^python3$')\"",
            },
            # A score file the agent planted is not the check's: a crashing check scores 0.
            {"id": "planted", "prompt": "p",
             "check": {"command": "exit 3", "score_file": "score.txt"}},
            {"id": "scored", "prompt": "p",
             "check": {"command": "echo 0.5 > score.txt", "score_file": "score.txt"}},
        ],
    )  # fmt: skip
    fresh, planted, scored = _run_all(tasks, ScriptAgent(leave))
    assert fresh.reward == 1.0, (fresh.reason, fresh.check_output)
    assert planted.reward == 0.0 and "exit 3" in planted.reason, planted.reason
    assert scored.reward == 0.5 and scored.reason == "check scored 0.5"


def test_builtin_tasks_fail_with_poisoned_modules_and_pass_when_solved() -> None:
    """os._exit(0) at the top of every module (after the reference fix, too) fails the task."""
    tasks = load_tasks(TASKS)
    python = {t.id for t in tasks if any(p.endswith(".py") for p in t.workspace)}
    assert python == {"fix-off-by-one", "implement-slugify", "rename-function"}
    for result in _run_all(tasks, ScriptAgent(POISON)):
        assert result.reward == 0.0, (result.task_id, result.reason, result.check_output)
    # A solved task whose modules then exit 0 on import fails; the others keep their pass.
    for result in _run_all(tasks, ScriptAgent(POISON, solve=True)):
        assert result.passed == (result.task_id not in python), (result.task_id, result.reason)
        if result.task_id in python:
            assert "gave no result (exit 0)" in result.reason, result.reason
    passed = [r.task_id for r in _run_all(tasks, ScriptAgent("true", solve=True)) if r.passed]
    assert sorted(passed) == sorted(t.id for t in tasks)


@pytest.mark.skipif(os.geteuid() != 0, reason="the guarded check shell needs evalgate as root")
def test_agent_code_a_check_runs_cannot_trace_the_check(tmp_path: Path) -> None:
    """The check's shell is not dumpable: its children cannot read or ptrace it."""
    spy = (
        "import ctypes, os; ppid = os.getppid(); "
        "print('ptrace', ctypes.CDLL(None).ptrace(16, ppid, 0, 0)); "
        "open('/proc/%d/mem' % ppid, 'rb'); print('mem opened')"
    )
    tasks = _tasks(tmp_path, [{"id": "spy", "prompt": "p", "check": f'python3 -c "{spy}"'}])
    (result,) = _run_all(tasks, ScriptAgent("true"))
    assert result.reward == 0.0, (result.reason, result.check_output)
    assert "ptrace -1" in result.check_output and "mem opened" not in result.check_output
    assert "PermissionError" in result.check_output, result.check_output


# The agent's backup.sh, which the check runs, writes exit_group(0) at the resume address of
# every ancestor it can open through /proc/PID/mem (x86-64), and copies nothing.
PATCH_ANCESTORS = r"""
cat > backup.sh <<'SH'
#!/bin/sh
python3 - <<'PY'
import os, sys
code = bytes.fromhex("b8e700000031ff0f05")  # mov eax, 231 (exit_group); xor edi, edi; syscall
pid, hit = os.getppid(), []
while pid > 1:
    try:
        pc = int(open(f"/proc/{pid}/syscall").read().split()[-1], 16)
        with open(f"/proc/{pid}/mem", "r+b", buffering=0) as mem:
            mem.seek(pc)
            mem.write(code)
        hit.append(pid)
    except (OSError, ValueError, IndexError) as exc:
        print("not patched", pid, exc, file=sys.stderr)
    try:
        status = open(f"/proc/{pid}/status").read()
    except OSError:
        break
    pid = int(status.split("PPid:")[1].split()[0])
print("patched", hit, file=sys.stderr)
PY
exit 1
SH
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the attack's machine code is x86-64")
def test_agent_program_the_check_runs_cannot_patch_the_check() -> None:
    (task,) = [t for t in load_tasks(TASKS) if t.id == "fix-backup-script"]
    (result,) = _run_all([task], ScriptAgent(PATCH_ANCESTORS))
    assert result.agent.exit_code == 0, result.agent.log
    assert result.reward == 0.0, (result.reason, result.check_output)
    assert result.reason.startswith("check failed (exit 1)"), result.reason
    # backup.sh may patch itself (it runs confined, with whatever it starts), no process above.
    assert "not patched" in result.check_output, result.check_output


# The agent's backup.sh, which the check runs, rewrites its own input (docs/) to match what it
# copies: a check that judged backup/ against docs/ read after the script ran passed it.
REWRITE_INPUTS = r"""
cat > backup.sh <<'SH'
#!/bin/sh
rm -rf docs backup
mkdir -p docs backup
for n in one two three four; do
    echo "$n" > "docs/$n.txt"
    cp "docs/$n.txt" backup/
done
SH
"""
# Copies the right names with the wrong bytes, links instead of copies, or only some files.
NOT_COPIES = {
    "empty": 'mkdir -p backup; for f in docs/*.txt; do : > "backup/${f#docs/}"; done',
    "links": 'mkdir -p backup; for f in docs/*.txt; do ln -s "$PWD/$f" backup/; done',
    "spaceless": "mkdir -p backup; for f in docs/*.txt; do case $f in *' '*) ;; "
    '*) cp "$f" backup/ ;; esac; done',
}


def test_a_program_the_check_runs_cannot_rewrite_what_the_check_reads() -> None:
    """Every built-in check that runs the agent's programs judges their results against what
    it knows itself (its own inputs, values in its memory), never against files the program
    could have changed after it started."""
    (task,) = [t for t in load_tasks(TASKS) if t.id == "fix-backup-script"]
    agents = [ScriptAgent(REWRITE_INPUTS)]
    agents += [ScriptAgent(f"cat > backup.sh <<'SH'\n#!/bin/sh\n{body}\nSH\n") for body in
               NOT_COPIES.values()]  # fmt: skip
    for agent in agents:
        (result,) = _run_all([task], agent)
        assert result.agent.exit_code == 0, result.agent.log
        assert result.reward == 0.0, (agent.script, result.reason, result.check_output)
    (solved,) = _run_all([task], ScriptAgent("true", solve=True))
    assert solved.reward == 1.0, (solved.reason, solved.check_output)

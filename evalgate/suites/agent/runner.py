"""One task, end to end: a fresh sandbox, the workspace, the agent, then the check.

The check runs in a second, fresh sandbox: after the agent's budget is spent, every process it
left is killed, its workspace is copied out (a tar, links kept as links), its sandbox destroyed,
and only the workspace is copied into the check's sandbox, with the check's files in
``$CHECKS``. So nothing the agent left outside the workspace reaches the check: not a process,
not a file in ``/tmp`` or ``HOME`` (a ``.pth`` file in the user site-packages, a shell rc), not
a score file it planted (the score file is removed before the check runs, and counts only when
the check exits 0). ``PYTHONNOUSERSITE=1`` is set for the check as well.

What a check must still not do is run the agent's code inside its own process (import a module
the agent wrote): that code could end the process with status 0 before the check has judged
anything. Checks run the agent's code in a child process and judge its results themselves, as
the built-in ``agent-basics`` checks do; the check's exit status is then reported by the
sandbox's supervisor, out of the agent's reach. Where the backend has one (bubblewrap, evalgate
running as root), the check's shell is an execute-only binary, hence not dumpable: the agent's
code it runs can neither ptrace it nor write its memory through /proc.

What is whose fault: a task whose set-up fails, a sandbox that fails, an agent binary that is not
there, a model endpoint that fails after retries: infrastructure (``InfraError`` /
``RequestFailed``, counted as errors, never as 0). Everything the agent does or fails to do
(a wrong answer, a timeout, a crash, a fork bomb, a full disk) is a reward of 0 with a reason.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from evalgate.errors import InfraError
from evalgate.sandbox import Sandbox, SandboxBackend, SandboxConfig, SandboxFileError
from evalgate.sandbox.base import WORKDIR
from evalgate.sandbox.confine import confine_command
from evalgate.suites.agent.tasks import Task, tar_files
from evalgate.suites.agent.verify import challenge_config, run_container_check

if TYPE_CHECKING:
    from evalgate.serve.client import ChatClient

__all__ = ["Agent", "AgentRun", "Attempt", "TaskResult", "install_files", "run_check", "run_task"]

_SETUP_TIMEOUT_S = 300.0
# $CONFINE: what a check puts before the agent's programs it runs (evalgate/sandbox/confine.py).
_CHECK_ENV = {"PYTHONNOUSERSITE": "1", "CONFINE": confine_command()}
_TAIL = 2000  # characters of agent and check output kept in the report
_CHALLENGE_COPY_MAX = 1 << 30  # bytes of a challenge container's working directory copied out


@dataclass
class AgentRun:
    """What the agent did; filled in as it goes, so a timed-out run still reports."""

    turns: int = 0
    tool_calls: int = 0
    final: str = ""
    exit_code: int | None = None  # command agents
    timed_out: bool = False
    stopped: str | None = None  # e.g. "max_turns"
    cost_usd: float | None = None
    usage: Counter[str] = field(default_factory=Counter)
    transcript: list[dict[str, Any]] = field(default_factory=list)
    log: str = ""  # a command agent's stderr tail


@dataclass(frozen=True)
class Attempt:
    """One rollout of one task, as an agent receives it: one object, so that what an agent
    is given is defined here once and a new field reaches every agent without a new
    signature."""

    box: Sandbox  # where it acts
    task: Task
    client: ChatClient  # the model under test (through the sandbox's bridge for commands)
    rollout: int
    record: AgentRun  # filled in as it goes
    budget_s: float


class Agent(Protocol):
    """Acts on ``attempt.task`` inside ``attempt.box`` until done or out of budget; records
    into ``attempt.record``."""

    async def run(self, attempt: Attempt) -> None: ...


@dataclass(frozen=True)
class TaskResult:
    task_id: str
    reward: float
    reason: str
    agent: AgentRun
    agent_s: float
    check_output: str = ""

    @property
    def passed(self) -> bool:
        return self.reward >= 1.0

    def report(self) -> str:
        """A readable account for the results file's ``completion``: verdict first."""
        a = self.agent
        facts = [f"{self.agent_s:.1f} s", f"turns={a.turns}", f"tool_calls={a.tool_calls}"]
        if a.exit_code is not None:
            facts.append(f"exit={a.exit_code}")
        if a.stopped:
            facts.append(f"stopped={a.stopped}")
        if a.cost_usd is not None:
            facts.append(f"cost_usd={a.cost_usd:.6f}")
        lines = [
            f"[{'pass' if self.passed else 'fail'}] {self.reason}",
            f"agent: {', '.join(facts)}",
        ]
        if a.final:
            lines += ["--- agent's last message ---", a.final[-_TAIL:]]
        if a.log:
            lines += ["--- agent's stderr (tail) ---", a.log[-_TAIL:]]
        if self.check_output:
            lines += ["--- check output (tail) ---", self.check_output[-_TAIL:]]
        return "\n".join(lines)


async def install_files(
    box: Sandbox, files: dict[str, bytes], dest: str, modes: dict[str, int] | None = None
) -> None:
    """Copy files into ``dest`` with one ``tar -x``."""
    if not files:
        return
    result = await box.exec(
        ["sh", "-c", 'mkdir -p "$1" && tar -x -f - -C "$1"', "sh", dest],
        stdin=tar_files(files, modes),
        timeout_s=120.0,
    )
    if not result.ok:
        raise SandboxFileError(f"cannot install files into {dest}: {result.stderr.strip()[:300]}")


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


async def snapshot(box: Sandbox) -> bytes:
    """The agent's working directory as a tar, once every process the agent left is gone."""
    await box.kill_all()  # a consistent copy: nothing rewrites the workspace while it is read
    limit = 2 * (box.config.disk_mb << 20) + (16 << 20)
    if box.config.challenge:  # a task image's working directory (a repository, say)
        limit = max(limit, _CHALLENGE_COPY_MAX)
    return await box.read_tree(box.workdir, max_bytes=limit)


async def run_check(
    backend: SandboxBackend, config: SandboxConfig, task: Task, workspace: bytes
) -> tuple[float, str, str]:
    """(reward, reason, output) of the task's check, in a fresh sandbox holding ``workspace``."""
    cfg = replace(
        config,
        network="none",
        model=None,
        mounts=(),
        timeout_s=task.check.timeout_s + _SETUP_TIMEOUT_S,
    )
    async with await backend.create(cfg) as box:
        checks = f"{box.scratch}/.evalgate-checks-{secrets.token_hex(8)}"
        unpack = await box.exec(
            ["sh", "-c", 'tar -x -f - -C "$1"', "sh", WORKDIR], stdin=workspace, timeout_s=120.0
        )
        if not unpack.ok:  # e.g. a workspace filled to the brim: the agent's doing
            detail = _last_line(unpack.stderr)
            return 0.0, f"the agent's workspace could not be restored ({detail})", ""
        try:
            await install_files(box, task.check_files, checks)
        except SandboxFileError as exc:
            return 0.0, f"the check could not be installed ({exc})", ""
        score_file = task.check.score_file
        if score_file:  # the agent's copy is not the check's verdict
            await box.exec(["rm", "-rf", "--", score_file], timeout_s=30.0)
        result = await box.exec(
            [box.guard_shell, "-c", task.check.command],
            env={**_CHECK_ENV, "CHECKS": checks},
            timeout_s=task.check.timeout_s,
            cwd=WORKDIR,
            max_output=256 << 10,
        )
        output = result.stdout + ("\n" if result.stdout and result.stderr else "") + result.stderr
        if result.timed_out:
            return 0.0, f"check timed out after {task.check.timeout_s:g} s", output
        if result.exit_code != 0:
            detail = _last_line(result.stderr) or _last_line(result.stdout)
            reason = f"check failed (exit {result.exit_code})" + (f": {detail}" if detail else "")
            return 0.0, reason, output
        if not score_file:
            return 1.0, "check passed", output
        try:
            raw = await box.read_file(score_file, max_bytes=4096)
            score = float(raw.decode().strip())
        except (SandboxFileError, ValueError, UnicodeDecodeError) as exc:
            return 0.0, f"check wrote no valid score to {score_file} ({exc})", output
        if score != score:  # NaN
            return 0.0, f"check wrote no valid score to {score_file} (NaN)", output
    score = min(1.0, max(0.0, score))
    return score, f"check scored {score:g}", output


async def run_task(
    task: Task,
    agent: Agent,
    client: ChatClient,
    *,
    backend: SandboxBackend,
    sandbox: SandboxConfig,
    rollout: int = 0,
) -> TaskResult:
    """Run ``task`` with ``agent`` in a fresh sandbox, then its check in another; both destroyed."""
    budget = min(task.timeout_s, sandbox.timeout_s) if task.timeout_s else sandbox.timeout_s
    # The sandbox lives through set-up, the agent and the check.
    lifetime = budget + task.check.timeout_s + _SETUP_TIMEOUT_S
    cfg = replace(sandbox, timeout_s=max(sandbox.timeout_s, lifetime))
    if task.container is not None:  # the task's own image (Terminal-Bench, SWE-bench)
        cfg = challenge_config(cfg, task.container)
    async with await backend.create(cfg) as box:
        try:
            await install_files(box, task.workspace, box.workdir, task.modes)
        except SandboxFileError as exc:
            raise InfraError(f"task {task.id!r}: set-up failed: {exc}") from exc
        for command in task.setup_commands:
            result = await box.exec(command, timeout_s=_SETUP_TIMEOUT_S)
            if not result.ok:
                raise InfraError(
                    f"task {task.id!r}: set-up command {command!r} failed "
                    f"(exit {result.exit_code}): {_last_line(result.stderr)}"
                )
        record = AgentRun()
        t0 = time.perf_counter()
        try:
            # The agent's own exec timeouts come first; this is the backstop for the rest
            # (a model that keeps answering, a stuck tool call).
            await asyncio.wait_for(
                agent.run(Attempt(box, task, client, rollout, record, budget)),
                budget + 5.0,
            )
        except TimeoutError:
            record.timed_out = True
        agent_s = time.perf_counter() - t0
        if record.timed_out:  # a fail without a check; destroy ends whatever is still running
            reason = f"agent timed out after {budget:g} s"
            return TaskResult(task.id, 0.0, reason, record, agent_s)
        try:
            workspace = await snapshot(box)
        except (SandboxFileError, TimeoutError) as exc:
            # The agent's doing (an uncopyable workspace, processes that would not die): a
            # failed task, never a way to turn a failure into an excluded error.
            reason = f"the workspace could not be handed to the check: {exc or 'timed out'}"
            return TaskResult(task.id, 0.0, reason, record, agent_s)
    if task.container is not None:
        reward, reason, output = await run_container_check(backend, sandbox, task, workspace)
    else:
        reward, reason, output = await run_check(backend, sandbox, task, workspace)
    return TaskResult(task.id, reward, reason, record, agent_s, output)

"""Agent benchmarks: tasks, the agents under test (built-in or your command), and the runner.

``tasks`` loads the Terminal-Bench-style task format (``formats``: Terminal-Bench 2.0 / 1 and
SWE-bench-style tasks with their own image, judged by ``verify``); ``runner.run_task`` runs one
task in a fresh sandbox (workspace → agent → check); ``builtin.BuiltinAgent`` is evalgate's own
tool-calling agent and ``command.CommandAgent`` runs a headless agent binary.
"""

from __future__ import annotations

from evalgate.suites.agent.builtin import BuiltinAgent
from evalgate.suites.agent.command import CommandAgent
from evalgate.suites.agent.runner import Agent, AgentRun, Attempt, TaskResult, run_task
from evalgate.suites.agent.tasks import Check, Task, load_tasks

__all__ = [
    "Agent",
    "AgentRun",
    "Attempt",
    "BuiltinAgent",
    "Check",
    "CommandAgent",
    "Task",
    "TaskResult",
    "load_tasks",
    "run_task",
]

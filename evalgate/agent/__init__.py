"""Agent benchmarks: tasks, the agents under test (built-in or your command), and the runner.

``tasks`` loads the Terminal-Bench-style task format; ``runner.run_task`` runs one task in a
fresh sandbox (workspace → agent → check); ``builtin.BuiltinAgent`` is evalgate's own
tool-calling agent and ``command.CommandAgent`` runs a headless agent binary.
"""

from __future__ import annotations

from evalgate.agent.builtin import BuiltinAgent
from evalgate.agent.command import CommandAgent
from evalgate.agent.runner import Agent, AgentRun, TaskResult, run_task
from evalgate.agent.tasks import Check, Task, load_tasks

__all__ = [
    "Agent",
    "AgentRun",
    "BuiltinAgent",
    "Check",
    "CommandAgent",
    "Task",
    "TaskResult",
    "load_tasks",
    "run_task",
]

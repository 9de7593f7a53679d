"""evalgate's built-in agent: a plain tool-calling loop over the OpenAI chat API.

The model is called from the host, through the run's ChatClient endpoint (so the sandbox needs
no network at all); every tool call executes inside the task's sandbox. One turn is one model
call. The loop ends when the model answers without tool calls and no follow-up prompt is left,
or at ``max_turns``; the task's time budget is enforced by the runner.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalgate.config.hostfiles import read_host_file, repository_root
from evalgate.sandbox.base import WORKDIR
from evalgate.suites.agent.llm import ToolChat
from evalgate.suites.agent.runner import Attempt
from evalgate.suites.agent.tools import TOOLS, run_tool

__all__ = ["SKILLS_DIR", "SYSTEM_PROMPT", "BuiltinAgent", "Skill", "find_skills"]

SKILLS_DIR = "/opt/evalgate/skills"  # where a variant's skills folder appears in the sandbox
SYSTEM_PROMPT = """\
You are an autonomous software agent working in a Linux sandbox. Your working directory is \
/workspace, which holds the task's files. Use the tools (bash, read, write, edit, glob, grep) to \
do the task; they run inside the sandbox. There is no network access. Work step by step and \
check your work. When the task is done, reply with a short summary and call no tools."""


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    path: str  # inside the sandbox


def _frontmatter(text: str) -> dict[str, str]:
    found = re.match(r"^---\s*\n(.*?)\n---\s*\n", text, re.S)
    if not found:
        return {}
    out = {}
    for line in found.group(1).splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip().strip("\"'")
    return out


def find_skills(host_dir: str | Path) -> list[Skill]:
    """Skills in a folder: ``NAME/SKILL.md`` (also under ``.claude/skills/``, the layout
    goat-eval reads) with name/description front matter, or plain ``*.md`` files."""
    root = Path(host_dir)
    repo = repository_root(root)
    skills = []
    found = [*root.glob("*/SKILL.md"), *root.glob(".claude/skills/*/SKILL.md"), *root.glob("*.md")]
    for path in sorted(found):
        # Each file on its own: a link out of the repository (a key, /proc/self/environ,
        # /dev/zero) is refused, and none is read past the cap.
        what = f"skills_dir: {path.relative_to(root).as_posix()}"
        text = read_host_file(path, root=repo, what=what)
        meta = _frontmatter(text)
        default = path.parent.name if path.name == "SKILL.md" else path.stem
        first = next((ln.strip("# ").strip() for ln in text.splitlines() if ln.strip()), "")
        skills.append(
            Skill(
                name=meta.get("name", default),
                description=meta.get("description", first)[:300],
                path=f"{SKILLS_DIR}/{path.relative_to(root).as_posix()}",
            )
        )
    return skills


class BuiltinAgent:
    def __init__(
        self,
        *,
        max_turns: int = 20,
        skills: Sequence[Skill] = (),
        system_prompt: str = SYSTEM_PROMPT,
    ) -> None:
        self.max_turns = max_turns
        self.system_prompt = system_prompt
        if skills:
            listing = "\n".join(f"- {s.name}: {s.description} (read {s.path})" for s in skills)
            self.system_prompt += (
                "\n\nSkills (instructions for particular kinds of work; read one before you "
                f"use it):\n{listing}"
            )

    async def run(self, attempt: Attempt) -> None:
        box, task, record = attempt.box, attempt.task, attempt.record
        max_turns = min(task.max_turns or self.max_turns, self.max_turns)
        deadline = time.monotonic() + attempt.budget_s
        # A challenge container's working directory is its image's (e.g. /app), not /workspace.
        system = self.system_prompt.replace(WORKDIR, box.workdir)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": task.prompts[0]},
        ]
        follow_ups = list(task.prompts[1:])
        record.transcript = messages
        async with ToolChat(attempt.client) as chat:
            while True:
                if record.turns >= max_turns:
                    record.stopped = "max_turns"
                    break
                reply = await chat.complete(messages, TOOLS, rollout=attempt.rollout)
                record.turns += 1
                record.usage.update(reply.usage)
                messages.append(reply.message)
                if not reply.tool_calls:
                    record.final = reply.text
                    if not follow_ups:
                        break
                    messages.append({"role": "user", "content": follow_ups.pop(0)})
                    continue
                for call in reply.tool_calls:
                    left = max(deadline - time.monotonic(), 0.1)
                    result = await run_tool(box, call.name, call.arguments, budget_s=left)
                    record.tool_calls += 1
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})

"""Your own agent, as a headless command run inside the task's sandbox (goat-eval style).

The command line is ``COMMAND -prompt TEXT -cwd /workspace -max-turns N`` plus, per variant,
``-skills-dir /opt/evalgate/skills``, ``-mcp-config /opt/evalgate/mcp-config.json`` and the
variant's own ``args``. A task with several prompts adds ``-multi-turn`` and writes the
follow-up prompts to stdin, one per line. The agent reaches the model through
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``EVAL_MODEL``, which point at the sandbox's model
bridge (the real key stays on the host). JSON objects the agent prints on stderr, one per line
(``{"turn": 1, "cost_usd": …, "input_tokens": …}``), are summed into turns and cost; token usage
is taken from the bridge, which sees every request: what the agent says it used is only shown
(a budget never counts it), and negative, fractional or impossible figures are refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from evalgate.errors import InfraError
from evalgate.sandbox.base import WORKDIR
from evalgate.suites.agent.runner import Attempt
from evalgate.suites.agent.tasks import Task

__all__ = ["MCP_CONFIG_PATH", "SKILLS_PATH", "CommandAgent", "parse_turn_meta"]

SKILLS_PATH = "/opt/evalgate/skills"
MCP_CONFIG_PATH = "/opt/evalgate/mcp-config.json"
_COST_KEYS = ("cost_usd", "total_cost_usd", "cost")
_IN_KEYS = ("input_tokens", "prompt_tokens")
_OUT_KEYS = ("output_tokens", "completion_tokens")
_MAX_TOKENS = 10**9  # in one line of an agent's report: more is no count
_MAX_USD = 1e6


def _number(obj: Mapping[str, object], keys: Sequence[str]) -> float | None:
    for key in keys:
        value = obj.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    usage = obj.get("usage")
    return _number(usage, keys) if isinstance(usage, Mapping) else None


def _sane(value: float | None, limit: float, whole: bool) -> bool:
    """A figure an agent may report: finite, not negative, at most ``limit`` (whole if asked)."""
    if value is None:
        return True
    ok = value == value and 0 <= value <= limit  # NaN is unequal to itself
    return ok and (not whole or float(value).is_integer())


def parse_turn_meta(stderr: str) -> tuple[int, float | None, dict[str, int], str]:
    """(turns, cost_usd, token usage, the rest of stderr) from an agent's stderr.

    The usage is the agent's own word (shown, never budgeted). A line with a negative,
    fractional or impossible figure counts for nothing, and the rest says so.
    """
    turns, cost, usage, rest = 0, None, {"prompt_tokens": 0, "completion_tokens": 0}, []
    refused = 0
    for line in stderr.splitlines():
        obj: object = None
        if line.lstrip().startswith("{"):
            try:
                obj = json.loads(line)
            except ValueError:
                obj = None
        if not isinstance(obj, dict):
            rest.append(line)
            continue
        if "turn" in obj:
            turns += 1
        c = _number(obj, _COST_KEYS)
        tokens_in, tokens_out = _number(obj, _IN_KEYS), _number(obj, _OUT_KEYS)
        if c is not None and _sane(c, _MAX_USD, whole=False):
            cost = (cost or 0.0) + c
        elif c is not None:
            refused += 1
        for key, n in (("prompt_tokens", tokens_in), ("completion_tokens", tokens_out)):
            if _sane(n, _MAX_TOKENS, whole=True):
                usage[key] += int(n or 0)
            else:
                refused += 1
    if refused:
        rest.append(f"evalgate: refused {refused} figure(s) the agent reported "
                    "(negative, fractional or impossible)")  # fmt: skip
    return turns, cost, usage, "\n".join(rest)


class CommandAgent:
    def __init__(
        self,
        command: Sequence[str],
        *,
        max_turns: int = 20,
        env: Mapping[str, str] | None = None,
        skills: bool = False,
        mcp_config: bool = False,
        args: Sequence[str] = (),
    ) -> None:
        if not command:
            raise ValueError("a command agent needs a command")
        self.command = list(command)
        self.max_turns = max_turns
        self.env = dict(env or {})
        self.skills = skills
        self.mcp_config = mcp_config
        self.args = list(args)

    def argv(self, task: Task, cwd: str = WORKDIR) -> list[str]:
        a = [*self.command, "-prompt", task.prompts[0], "-cwd", cwd]
        a += ["-max-turns", str(min(task.max_turns or self.max_turns, self.max_turns))]
        if self.skills:
            a += ["-skills-dir", SKILLS_PATH]
        if self.mcp_config:
            a += ["-mcp-config", MCP_CONFIG_PATH]
        if len(task.prompts) > 1:
            a.append("-multi-turn")
        return a + self.args

    async def run(self, attempt: Attempt) -> None:
        box, task, record = attempt.box, attempt.task, attempt.record
        argv = self.argv(task, box.workdir)
        # A missing agent is a set-up error on every task, not a task the agent failed.
        probe = await box.exec(["sh", "-c", 'command -v "$1"', "sh", argv[0]], timeout_s=30)
        if probe.exit_code != 0:
            raise InfraError(f"agent command {argv[0]!r} is not available in the sandbox")
        follow_ups = "".join(" ".join(p.split()) + "\n" for p in task.prompts[1:])
        result = await box.exec(
            argv,
            stdin=follow_ups or None,
            env=self.env,
            timeout_s=attempt.budget_s,
            max_output=4 << 20,
        )
        record.exit_code = result.exit_code
        record.timed_out = result.timed_out
        record.final = result.stdout
        turns, cost, reported, rest = parse_turn_meta(result.stderr)
        record.turns = turns
        record.cost_usd = cost
        record.log = rest
        measured = getattr(box, "usage", None) or {}
        if measured.get("refused"):  # the bridge's per-sandbox caps: said, not silent
            record.log += f"\nevalgate: the model bridge refused {measured['refused']} request(s)"
        if any(reported.values()):  # the agent's word: shown, never budgeted
            record.log += (
                f"\nevalgate: the agent reported {reported['prompt_tokens']} prompt + "
                f"{reported['completion_tokens']} completion tokens (shown only; usage is what "
                "the model bridge saw)"
            )
        # Every model call goes through the bridge: what it counted is the usage.
        for key in ("prompt_tokens", "completion_tokens"):
            record.usage[key] += max(0, int(measured.get(key, 0)))

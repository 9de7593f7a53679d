"""Sandboxed agent benchmarks: each item is a task, each rollout runs it in a fresh sandbox.

The agent under test is evalgate's built-in tool-calling agent (the model is called from the
host; the sandbox has no network) or your own command (run inside the sandbox, reaching the
model through the sandbox's model bridge when ``sandbox.network`` is ``model-only``).

Variants: one suite per :class:`AgentVariant` (``AgentSuite.from_spec(spec, variant)``), all on
the same tasks with the same item ids, so variants can be compared item by item. A variant adds
a skills folder (mounted read-only at /opt/evalgate/skills), an MCP config (command agents only,
at /opt/evalgate/mcp-config.json) and extra arguments (command agents only).

The reward is the check's verdict (1/0, or the check's score file); ``metrics`` holds only
``accuracy``, so a baseline comparison gates on task success and nothing else. Why a task failed
(check output, timeout, turns, cost) is in the rollout's ``completion`` text.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from evalgate.config.hostfiles import check_host_path, read_host_file, repository_root
from evalgate.errors import ConfigError
from evalgate.sandbox import ModelRoute, Mount, SandboxBackend, SandboxConfig, Sandboxes
from evalgate.suites.agent.builtin import SKILLS_DIR, BuiltinAgent, find_skills
from evalgate.suites.agent.command import MCP_CONFIG_PATH, CommandAgent
from evalgate.suites.agent.runner import run_task
from evalgate.suites.agent.tasks import Task, load_tasks
from evalgate.suites.agent.verify import challenge_config, fetching_line
from evalgate.suites.base import Item, Outcome, SuiteDefaults

if TYPE_CHECKING:
    from evalgate.config.spec import AgentBenchmark, AgentVariant
    from evalgate.serve.client import ChatClient
    from evalgate.suites.agent.runner import Agent

__all__ = ["AGENT_BIN_DIR", "AgentSuite"]

AGENT_BIN_DIR = "/opt/evalgate/bin"  # where a command agent's binary from the host appears
_SYSTEM_PREFIXES = ("/usr/", "/bin/", "/sbin/", "/lib")  # already inside every sandbox


def _make_agent(
    spec: AgentBenchmark,
    variant: AgentVariant | None,
    mounts: list[Mount],
    skills_dir: str | None,
    mcp_config: str | None,
) -> tuple[Agent, str]:
    """The agent ``spec`` (and ``variant``) configure, and the sandbox network it runs with; a
    command agent's binary is added to ``mounts``."""
    agent_spec = spec.agent
    if agent_spec.type == "builtin":
        if mcp_config is not None and variant is not None:  # only a variant sets one
            raise ConfigError(
                f"benchmark {spec.name!r}: variant {variant.name!r}: the built-in agent does "
                "not speak MCP; use `agent: {type: command}` for MCP variants"
            )
        if variant is not None and variant.args:
            raise ConfigError(
                f"benchmark {spec.name!r}: variant {variant.name!r}: args apply to command "
                "agents only"
            )
        agent: Agent = BuiltinAgent(
            max_turns=agent_spec.max_turns,
            skills=find_skills(skills_dir) if skills_dir else (),
        )
        network = "none"  # the built-in agent calls the model from the host
    else:
        if not agent_spec.command:
            raise ConfigError(
                f"benchmark {spec.name!r}: agent.command is required for a command agent"
            )
        command, binary = _agent_binary(list(agent_spec.command))
        mounts.extend(binary)
        agent = CommandAgent(
            command,
            max_turns=agent_spec.max_turns,
            env=agent_spec.env,
            skills=skills_dir is not None,
            mcp_config=mcp_config is not None,
            args=variant.args if variant is not None else (),
        )
        network = spec.sandbox.network
    return agent, network


def _variant(spec: AgentBenchmark, variant: AgentVariant | str | None) -> AgentVariant | None:
    if variant is None or not isinstance(variant, str):
        return variant
    for v in spec.variants:
        if v.name == variant:
            return v
    known = ", ".join(v.name for v in spec.variants) or "none"
    raise ConfigError(f"benchmark {spec.name!r}: unknown variant {variant!r}; known: {known}")


def _needs_containers(spec: AgentBenchmark, tasks: list[Task], backend: SandboxBackend) -> None:
    """A task with its own image runs only on a backend that runs task images (docker)."""
    own = [t.id for t in tasks if t.container is not None]
    if own and not getattr(backend, "runs_task_images", False):
        raise ConfigError(
            f"benchmark {spec.name!r}: task {own[0]!r} brings its own container image, which the "
            f"{backend.name!r} sandbox backend cannot run; set `sandbox: {{backend: docker}}` "
            "(or `modal`)"
        )


def _verifiers_offline(spec: AgentBenchmark, tasks: list[Task]) -> None:
    """A verifier that fetches its tools needs `verifier_network`: without it every agent, base
    and PR alike, would score 0 (the fetch fails, the tests never run)."""
    if spec.sandbox.verifier_network:
        return
    for task in tasks:
        where = fetching_line(task.container) if task.container is not None else None
        if where is not None:
            raise ConfigError(
                f"benchmark {spec.name!r}: task {task.id!r}: the verifier fetches from the "
                f"network at {where}, and has none: set `sandbox: {{verifier_network: true}}`, "
                "or install what it fetches in the task's image"
            )


def _host_path(path: str, what: str, spec: AgentBenchmark, *, folder: bool) -> str:
    """The real path of a variant's folder or file, checked: inside its repository (no link out),
    and a file regular and under the cap (:mod:`evalgate.config.hostfiles`). The real path is
    what gets mounted, so a link cannot be swapped in between."""
    full = os.path.abspath(os.path.expanduser(path))
    ok = os.path.isdir(full) if folder else os.path.isfile(full)
    if not ok:
        kind = "folder" if folder else "file"
        raise ConfigError(f"benchmark {spec.name!r}: {what}: no such {kind} {full}")
    where = f"benchmark {spec.name!r}: {what}"
    root = repository_root(full)
    if not folder:
        read_host_file(full, root=root, what=where)  # regular, capped, no link out
    return str(check_host_path(full, root=root, what=where))


def _agent_binary(command: list[str]) -> tuple[list[str], tuple[Mount, ...]]:
    """Mount a host binary that the sandbox cannot see (outside /usr) read-only, and use it."""
    head = command[0]
    host = os.path.abspath(head) if os.sep in head else shutil.which(head)
    if host is None or not os.path.isfile(host):
        return command, ()  # maybe it is in the image (docker, modal)
    real = os.path.realpath(host)
    if real.startswith(_SYSTEM_PREFIXES):
        return command, ()
    target = f"{AGENT_BIN_DIR}/{os.path.basename(head)}"
    return [target, *command[1:]], (Mount(real, target),)


@dataclass
class AgentSuite(SuiteDefaults):
    name: str
    items: list[Item]
    tasks: dict[str, Task]
    agent: Agent  # BuiltinAgent | CommandAgent
    backend: SandboxBackend
    sandbox: SandboxConfig
    network: str  # what the agent's sandbox may reach: "none" or "model-only"
    variant: AgentVariant | None = None  # the variant this suite runs, if any

    @property
    def unenforced_limits(self) -> list[str]:
        """Sandbox limits this runner cannot enforce (the pipeline puts them in the scorecard)."""
        found = self.backend.unenforced(self.sandbox)
        for task in self.tasks.values():
            if task.container is not None:
                more = self.backend.unenforced(challenge_config(self.sandbox, task.container))
                found += [m for m in more if m not in found]
        return found

    @classmethod
    def from_spec(
        cls,
        spec: AgentBenchmark,
        variant: AgentVariant | str | None = None,
        *,
        sandboxes: Sandboxes | None = None,
    ) -> AgentSuite:
        """The suite for ``spec``; ``variant`` is an ``AgentVariant``, a variant name, or None."""
        variant = _variant(spec, variant)
        tasks = load_tasks(spec.tasks)
        if spec.eval.num_examples is not None:
            tasks = tasks[: spec.eval.num_examples]
        mounts: list[Mount] = []
        skills_dir = mcp_config = None
        if variant is not None and variant.skills_dir:
            skills_dir = _host_path(variant.skills_dir, "skills_dir", spec, folder=True)
            mounts.append(Mount(skills_dir, SKILLS_DIR))
        if variant is not None and variant.mcp_config:
            mcp_config = _host_path(variant.mcp_config, "mcp_config", spec, folder=False)
            mounts.append(Mount(mcp_config, MCP_CONFIG_PATH))
        agent, network = _make_agent(spec, variant, mounts, skills_dir, mcp_config)
        name = spec.name if variant is None else f"{spec.name}.{variant.name}"
        labels = {"evalgate.benchmark": spec.name}
        if variant is not None:
            labels["evalgate.variant"] = variant.name
        backend = (sandboxes or Sandboxes()).get(spec.sandbox.backend)
        _needs_containers(spec, tasks, backend)
        _verifiers_offline(spec, tasks)
        items = [
            Item(
                id=t.id,
                prompt="\n\n".join(t.prompts),
                answer=t.check.command + (f" @ {t.container.digest}" if t.container else ""),
                group=t.group,
                fields={"timeout_s": t.timeout_s, "max_turns": t.max_turns},
                exam=t.exam,  # the check's files, verifier, tests, environment: the item's hash
            )
            for t in tasks
        ]
        return cls(
            name=name,
            items=items,
            tasks={t.id: t for t in tasks},
            agent=agent,
            backend=backend,
            sandbox=SandboxConfig.from_spec(
                spec.sandbox, network="none", mounts=tuple(mounts), labels=labels
            ),
            network=network,
            variant=variant,
        )

    @classmethod
    def for_variants(
        cls, spec: AgentBenchmark, *, sandboxes: Sandboxes | None = None
    ) -> list[AgentSuite]:
        """One suite per variant (side by side), or the one suite when there are none."""
        sandboxes = sandboxes or Sandboxes()  # one backend for every variant
        return [cls.from_spec(spec, v, sandboxes=sandboxes) for v in spec.variants] or [
            cls.from_spec(spec, sandboxes=sandboxes)
        ]

    async def rollout(self, item: Item, index: int, client: ChatClient) -> Outcome:
        task = self.tasks[item.id]
        config = self.sandbox
        if self.network == "model-only":
            ep = client.endpoint
            route = ModelRoute(base_url=ep.base_url, model=ep.model, api_key=ep.api_key)
            config = replace(config, network="model-only", model=route)
        result = await run_task(
            task, self.agent, client, backend=self.backend, sandbox=config, rollout=index
        )
        return Outcome(
            prompt=[{"role": "user", "content": p} for p in task.prompts],
            completion=result.report(),
            reward=result.reward,
            metrics={"accuracy": result.reward},
            usage={k: int(v) for k, v in result.agent.usage.items()},
            cost_usd=result.agent.cost_usd,
        )

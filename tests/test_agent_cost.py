"""A command agent's self-reported cost (a JSON line on stderr) reaches metadata.json and the
run's cost, through `evalgate local`."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from tests.conftest import ROOT, write_config

AGENT = r"""#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
with open(os.path.join(args[args.index("-cwd") + 1], "hello.txt"), "w") as fh:
    fh.write("Hello, evalgate!\n")
print(json.dumps({"turn": 1, "cost_usd": 0.000048, "input_tokens": 9, "output_tokens": 3}),
      file=sys.stderr)
"""


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="agent tasks run in bubblewrap")
def test_command_agent_cost_reaches_metadata(tmp_path: Path, scripted_server: Any) -> None:
    server = scripted_server(lambda body, n: "unused")
    tasks = tmp_path / "tasks"
    shutil.copytree(ROOT / "benchmarks" / "agent-basics" / "hello-file", tasks / "hello-file")
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    agent.chmod(agent.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    config = write_config(
        tmp_path,
        f"""
models: [{{name: m, backend: openai, base_url: "{server.base_url}", model: org/m}}]
benchmarks:
  - name: tasks
    kind: agent
    tasks: tasks
    agent: {{type: command, command: ["./agent.py"]}}
    eval: {{rollouts: 2}}
    sandbox: {{timeout_s: 60, network: none}}
""",
    )
    out = tmp_path / "out"
    main(["local", str(config), "--output", str(out)], environ={"CI": "1"})
    (meta_path,) = (out / "evals").glob("tasks--*/*/metadata.json")
    meta = json.loads(meta_path.read_text())
    assert meta["agent_cost_usd"] == pytest.approx(2 * 0.000048)
    assert meta["cost_usd"] == pytest.approx(2 * 0.000048)  # org/m has no list price
    scorecard = (out / "scorecard.md").read_text()
    assert "$0.000096" in scorecard

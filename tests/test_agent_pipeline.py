"""Agent variants through `evalgate local`: one run per variant, side by side, gated alike."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from tests.conftest import ROOT, write_config

BWRAP = shutil.which("bwrap") is not None

# A headless agent (goat-eval style flags): writes the file unless run with -lazy.
AGENT = r"""#!/usr/bin/env python3
import os, sys
args = sys.argv[1:]
cwd = args[args.index("-cwd") + 1]
if "-lazy" not in args:
    with open(os.path.join(cwd, "hello.txt"), "w") as fh:
        fh.write("Hello, evalgate!\n")
"""


@pytest.mark.skipif(not BWRAP, reason="agent tasks run in bubblewrap")
def test_variants_run_side_by_side_and_share_thresholds(
    tmp_path: Path, scripted_server: Any
) -> None:
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
    variants: [{{name: diligent}}, {{name: lazy, args: ["-lazy"]}}]
    sandbox: {{timeout_s: 60, network: none}}
gate: {{thresholds: {{tasks: {{accuracy: 0.5}}}}}}
""",
    )
    out = tmp_path / "out"
    code = main(["local", str(config), "--output", str(out)], environ={"CI": "1"})
    verdict = json.loads((out / "verdict.json").read_text())
    runs = {r["benchmark"]: r for r in verdict["runs"]}
    assert set(runs) == {"tasks.diligent", "tasks.lazy"}
    assert runs["tasks.diligent"]["metrics"]["accuracy"]["mean"] == 1.0
    assert runs["tasks.lazy"]["metrics"]["accuracy"]["mean"] == 0.0
    # Both variants are held to the benchmark's threshold (1 item: the lazy miss is not
    # significant, so INCONCLUSIVE rather than FAIL).
    thresholds = [c for c in verdict["checks"] if c["kind"] == "threshold"]
    assert {c["benchmark"] for c in thresholds} == {"tasks.diligent", "tasks.lazy"}
    assert code == 0 and verdict["status"] == "INCONCLUSIVE"
    scorecard = (out / "scorecard.md").read_text()
    assert "| m | tasks.diligent | accuracy | 100.0%" in scorecard
    assert "| m | tasks.lazy | accuracy | 0.0%" in scorecard
    cfg = json.loads(next((out / "evals").glob("tasks.lazy--*/*/run_config.json")).read_text())
    assert cfg["suite"] == "tasks.lazy" and cfg["fingerprint"]["subject"]["agent"]


@pytest.mark.skipif(not BWRAP, reason="agent tasks run in bubblewrap")
@pytest.mark.parametrize("cgroup", [True, False])
def test_scorecard_names_limits_this_runner_cannot_enforce(
    tmp_path: Path, scripted_server: Any, monkeypatch: pytest.MonkeyPatch, cgroup: bool
) -> None:
    from evalgate.sandbox import bubblewrap

    if not cgroup:  # as inside a Docker action: no cgroup may be created
        monkeypatch.setattr(bubblewrap._Cgroup, "create", classmethod(lambda cls, n, c: None))
    elif bubblewrap._Cgroup.create("probe", bubblewrap.SandboxConfig()) is None:
        pytest.skip("no cgroup may be created on this machine")
    server = scripted_server(lambda body, n: "unused")
    tasks = tmp_path / "tasks"
    shutil.copytree(ROOT / "benchmarks" / "agent-basics" / "hello-file", tasks / "hello-file")
    config = write_config(
        tmp_path,
        f"""
models: [{{name: m, backend: openai, base_url: "{server.base_url}", model: org/m}}]
benchmarks:
  - name: tasks
    kind: agent
    tasks: tasks
    agent: {{type: command, command: ["true"]}}
    sandbox: {{timeout_s: 60, cpus: 0.5}}
""",
    )
    out = tmp_path / "out"
    main(["local", str(config), "--output", str(out)], environ={"CI": "1"})
    scorecard = (out / "scorecard.md").read_text()
    verdict = json.loads((out / "verdict.json").read_text())
    (run,) = verdict["runs"]
    if cgroup:
        assert "not enforced" not in scorecard and "unenforced_limits" not in run["extra"]
    else:
        assert run["extra"]["unenforced_limits"] == ["cpus: the CPU share of 0.5 (no cgroup)"]
        assert "Sandbox limits not enforced on this runner" in scorecard
        assert "cpus: the CPU share of 0.5 (no cgroup)" in scorecard

"""The verdict on a container task (Terminal-Bench, SWE-bench-style), out of the agent's reach.

After the agent: every process in its container is killed (the container is stopped), the
working directory is copied out, and the container destroyed. The verifier then runs in a
FRESH container of the task's image: its working directory emptied and replaced by the agent's
copy, the task's tests installed at ``/tests`` (the agent never saw them), and an empty
``/logs/verifier`` (nothing the agent wrote there was carried over). So what decides is the
task's own test script on the agent's files, with no process, planted reward file, or fake test
runner outside the working directory of the agent's left in play.

Pass (reward 1) only if the test script returns normally (not timed out, not killed by a
signal) and: Terminal-Bench 2.0 -- the reward file the verifier wrote says 1 (without one, a
fail, as under Harbor: a script that writes it only on success and exits 0 is no pass);
Terminal-Bench 1 -- the script exits 0; SWE-bench -- ``swe.grade``.

What cannot be guaranteed: a test that imports the agent's code into its own process (pytest
importing the solution module, say) runs that code with the test's own powers; it could write
the reward file or exit 0 itself. That is the benchmark's design; docs/threat-model.md says so.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace

from evalgate.errors import InfraError
from evalgate.sandbox import Sandbox, SandboxBackend, SandboxConfig, SandboxFileError
from evalgate.suites.agent import swe
from evalgate.suites.agent.formats import TESTS_DIR
from evalgate.suites.agent.tasks import Container, Task

__all__ = ["REWARD_DIR", "challenge_config", "fetching_line", "run_container_check"]

REWARD_DIR = "/logs/verifier"
_CHECK_ENV = {"PYTHONNOUSERSITE": "1"}
_ROOT_ENV = {"HOME": "/root", "USER": "root", "LOGNAME": "root"}
_RESTORE = 'find "$1" -mindepth 1 -maxdepth 1 -exec rm -rf -- {} + && tar -x -f - -C "$1"'


# Commands that fetch from the network when a verifier runs them (package managers, installers,
# downloads): without `verifier_network` they fail, the tests never run and the reward is 0.
_FETCHES = re.compile(
    r"\b(curl|wget|apt-get\s+(update|install)|apt\s+(update|install)|apk\s+add|"
    r"(pip3?|python3?\s+-m\s+pip|uv\s+pip)\s+install|uvx|uv\s+(sync|add|tool\s+install)|"
    r"npm\s+(install|i|ci)|npx|git\s+clone)\b"
)


def fetching_line(container: Container) -> str | None:
    """Where ``container``'s verifier fetches from the network, as ``/tests/FILE:LINE (`…`)``,
    or None. Shell scripts among the tests (and the command) are read; comments are not."""
    scripts = {"command": container.command.encode()}
    for name, data in container.tests.items():
        if name.endswith(".sh") or (data.startswith(b"#!") and b"sh" in data.split(b"\n", 1)[0]):
            scripts[f"{TESTS_DIR}/{name}"] = data
    for where, data in scripts.items():
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
            code = line.split("#", 1)[0] if not line.lstrip().startswith("#!") else ""
            found = _FETCHES.search(code)
            if found:
                return f"{where}:{number} (`{code.strip()[:60]}`)"
    return None


def challenge_config(sandbox: SandboxConfig, container: Container) -> SandboxConfig:
    """The benchmark's sandbox for ``container``'s image; the task's limits, capped by it."""

    def cap(own: float | None, limit: float) -> float:
        return min(own, limit) if own else limit

    return replace(
        sandbox,
        challenge=True,
        build=container.build,
        image=container.image,
        cpus=cap(container.cpus, sandbox.cpus),
        memory_mb=int(cap(container.memory_mb, sandbox.memory_mb)),
        disk_mb=int(cap(container.disk_mb, sandbox.disk_mb)),
        env={**sandbox.env, **_ROOT_ENV},
    )


def _joined(out: str, err: str) -> str:
    return out + ("\n" if out and err else "") + err


# Harbor's order: reward.txt when it exists, else reward.json. A reward.txt that exists but is not
# a regular file (a folder, a link, a FIFO: the agent's code ran inside the test) is a fail,
# never a reason to read reward.json. Printed as one tagged answer by one shell, inside the box.
_READ_REWARD = r"""
for name in reward.txt reward.json; do
    path="$1/$name"
    if [ -L "$path" ] || [ -e "$path" ]; then
        if [ -L "$path" ] || [ ! -f "$path" ]; then printf 'irregular %s\n' "$name"; exit 0; fi
        printf 'file %s\n' "$name"
        exec head -c 4097 -- "$path"
    fi
done
printf 'none\n'
"""


async def _reward_file(box: Sandbox, folder: str = REWARD_DIR) -> tuple[float | None, str]:
    """(reward, why) the verifier left in ``folder``: None and why when it left no valid one."""
    result = await box.exec(["sh", "-c", _READ_REWARD, "sh", folder], timeout_s=30.0)
    head, _, raw = result.stdout.partition("\n")
    kind, _, name = head.partition(" ")
    if result.timed_out or not result.ok or kind not in ("file", "irregular", "none"):
        return None, f"the reward in {folder} could not be read (exit {result.exit_code})"
    if kind == "none":
        return None, f"the verifier wrote no reward to {folder}/reward.txt"
    if kind == "irregular":
        return None, f"{folder}/{name} is not a regular file"
    if len(raw) > 4096:
        return None, f"{folder}/{name} is larger than 4096 bytes"
    try:
        value = json.loads(raw.strip()) if name == "reward.json" else float(raw.strip())
        if name == "reward.json":
            if not isinstance(value, dict) or "reward" not in value:
                raise ValueError('no "reward" key')
            value = value["reward"]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError("not a number")
        score = float(value)
    except (ValueError, TypeError) as exc:
        return None, f"{folder}/{name} holds no reward ({exc})"
    if not math.isfinite(score):
        return None, f"{folder}/{name} holds no finite number"
    return score, f"the verifier's reward is {min(1.0, max(0.0, score)):g}"


async def _restore(box: Sandbox, workspace: bytes, task_id: str) -> str | None:
    """Replace the image's working directory by the agent's copy; why not, or None."""
    restored = await box.exec(
        ["sh", "-c", _RESTORE, "sh", box.workdir], stdin=workspace, timeout_s=600
    )
    if not restored.ok:
        why = (restored.stderr.strip().splitlines() or [f"exit {restored.exit_code}"])[-1][:300]
        if restored.exit_code in (126, 127):  # a tool the image lacks: no agent can be judged
            raise InfraError(
                f"task {task_id!r}: the verifier cannot restore the agent's working directory "
                f"({why}); the task image needs sh, find and tar"
            )
        return why
    fresh = await box.exec(
        ["sh", "-c", f"rm -rf {TESTS_DIR} {REWARD_DIR} && mkdir -p {REWARD_DIR}"]
    )
    return None if fresh.ok else f"cannot reset {TESTS_DIR} ({fresh.stderr.strip()[:200]})"


async def run_container_check(
    backend: SandboxBackend, sandbox: SandboxConfig, task: Task, workspace: bytes
) -> tuple[float, str, str]:
    """(reward, reason, output) of ``task``'s verifier on the agent's ``workspace`` copy."""
    from evalgate.suites.agent.runner import install_files  # runner imports this module

    container = task.container
    assert container is not None
    timeout_s = min(task.check.timeout_s, sandbox.timeout_s)
    cfg = replace(
        challenge_config(sandbox, container),
        network="internet" if sandbox.verifier_network else "none",
        model=None,
        mounts=(),
        timeout_s=timeout_s + 900.0,  # + restoring the copy and installing the tests
    )
    env = {**_CHECK_ENV, **container.env}
    async with await backend.create(cfg) as box:
        originals = await swe.save_originals(box, container.swe) if container.swe else b""
        image_entries = await swe.top_level(box) if container.swe else set()
        why = await _restore(box, workspace, task.id)
        if why is not None:  # e.g. an uncopyable tree: the agent's doing
            return 0.0, f"the agent's working directory could not be restored ({why})", ""
        if container.swe is not None:
            return await swe.grade(
                box,
                container.swe,
                originals,
                timeout_s=timeout_s,
                env=env,
                image_entries=image_entries,
            )
        try:
            await install_files(box, container.tests, TESTS_DIR, container.test_modes)
        except SandboxFileError as exc:
            return 0.0, f"the tests could not be installed ({exc})", ""
        result = await box.exec(
            [box.guard_shell, "-c", container.command],
            env=env,
            timeout_s=timeout_s,
            max_output=256 << 10,
        )
        output = _joined(result.stdout, result.stderr)
        if result.timed_out:
            return 0.0, f"tests timed out after {timeout_s:g} s", output
        if result.exit_code >= 128:
            return 0.0, f"the test script was killed (signal {result.exit_code - 128})", output
        if container.format == "terminal-bench":  # Harbor's contract: the reward file decides
            reward, why = await _reward_file(box)
            if reward is None:  # e.g. written only on success, then `exit 0`: not a pass
                return 0.0, f"{why} (exit {result.exit_code})", output
            return min(1.0, max(0.0, reward)), why, output
    if result.exit_code == 0:
        return 1.0, "tests passed (exit 0)", output
    return 0.0, f"tests failed (exit {result.exit_code})", output

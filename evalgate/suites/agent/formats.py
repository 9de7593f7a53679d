"""Tasks that bring their own container: Terminal-Bench (2.0 and 1) and SWE-bench-style.

Recognised per task folder (or instance file), so one ``tasks:`` folder may mix them with
evalgate's own ``task.yaml`` tasks:

- **Terminal-Bench 2.0 / Harbor**: ``task.toml`` + ``instruction.md`` + ``environment/Dockerfile``
  (or ``[environment] docker_image``, a prebuilt image, which wins) + ``tests/test.sh`` (+
  ``solution/solve.sh``). ``task.toml``: ``[agent] timeout_sec``, ``[verifier] timeout_sec``,
  ``[environment] cpus, memory | memory_mb, storage | storage_mb``. Tests go to ``/tests``; the
  verifier is ``bash /tests/test.sh`` and its reward is ``/logs/verifier/reward.txt``.
- **Terminal-Bench 1** (the ``terminal-bench`` package): ``task.yaml`` with ``instruction``,
  ``max_agent_timeout_sec``, ``max_test_timeout_sec`` + ``Dockerfile`` (the folder is the build
  context; or ``docker_image``) + ``run-tests.sh`` + ``tests/`` (+ ``solution.sh``). Tests and
  ``run-tests.sh`` go to ``/tests`` (``$TEST_DIR``); the verifier is ``bash /tests/run-tests.sh``
  and passes when it exits 0. (One container per task: a ``docker-compose.yaml`` with one
  service is the Dockerfile's; one with several services is refused.)
- **SWE-bench-style**: a JSON/YAML/JSONL file of instances with the SWE-bench fields
  (``instance_id, repo, base_commit, problem_statement, test_patch, FAIL_TO_PASS,
  PASS_TO_PASS``), an ``image`` (``image_name``) or a ``dockerfile`` (relative to the file; its
  folder is the build context), ``test_cmd`` (the test runner the listed tests are passed to;
  default ``python -m pytest -rA``) and, optionally, the gold ``patch`` (the reference solution).

Unknown keys of these external formats (metadata, tags) are ignored; the keys evalgate reads
are checked, and a bad one is a one-line :class:`ConfigError` naming the file and the fix.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

import yaml

from evalgate._json import items, mapping
from evalgate.errors import ConfigError
from evalgate.sandbox.base import ImageBuild
from evalgate.suites.agent.swe import gold_script
from evalgate.suites.agent.tasks import Check, Container, SweSpec, Task, load_yaml, read_folder
from evalgate.suites.identity import tree_digest

__all__ = ["TESTS_DIR", "detect", "load_swe", "load_tb1", "load_tb2"]

TESTS_DIR = "/tests"  # where Terminal-Bench's harnesses put a task's tests, after the agent
_TB2_TESTS = "bash /tests/test.sh"
_TB1_TESTS = "bash /tests/run-tests.sh"
_SWE_SUFFIXES = (".json", ".jsonl", ".yaml", ".yml")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.I)
_MIB = {"k": 1 / 1024, "m": 1, "": 1, "g": 1024, "t": 1024 * 1024}


def detect(path: Path) -> list[Task] | None:
    """The container tasks at ``path`` (a task folder or an instance file), or None."""
    if path.is_dir():
        if (path / "task.toml").is_file():
            return [load_tb2(path)]
        if (path / "task.yaml").is_file():
            data = load_yaml(path / "task.yaml")
            if isinstance(data, dict) and ("instruction" in data or "descriptions" in data):
                return [load_tb1(path, data)]
        return None
    if path.is_file() and path.suffix in _SWE_SUFFIXES:
        instances = _instances(path)
        return [load_swe(path, i, inst) for i, inst in enumerate(instances)] if instances else None
    return None


def _num(value: object, where: str, key: str, unit: str = " of seconds") -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{where}: {key} must be a positive number{unit}, got {value!r}")
    return float(value)


def _mib(value: object, where: str, key: str) -> int | None:
    """``2G``, ``512M``, ``2048`` (MiB) → MiB; zero is refused, never a 1 MiB container."""
    if value is None:
        return None
    found = None if isinstance(value, bool) else _SIZE.match(str(value))
    if not found:
        raise ConfigError(f"{where}: {key} must be a size such as 2G or 512M, got {value!r}")
    mib = float(found.group(1)) * _MIB[found.group(2).lower()]
    if mib <= 0:
        raise ConfigError(f"{where}: {key} must be a positive size such as 2G, got {value!r}")
    return max(1, int(mib))


def _single_container(folder: Path) -> None:
    """A compose file with several services (a task beside a database, say) cannot run as the
    one container per task evalgate gives it: refused by name, never run half-built."""
    for name in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml"):
        compose = folder / name
        if not compose.is_file():
            continue
        try:
            data = yaml.safe_load(compose.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{compose}: invalid YAML ({str(exc).splitlines()[0]})") from None
        services = data.get("services") if isinstance(data, dict) else None
        if isinstance(services, dict) and len(services) > 1:
            raise ConfigError(
                f"{compose}: services {', '.join(map(str, services))}: a multi-container task "
                "is not supported (evalgate runs one container per task); leave this task out"
            )


class _ImageSource(TypedDict):
    """Where a task's container image comes from: built here, or pulled (one of the two)."""

    build: ImageBuild | None
    image: str | None


def _image(folder: Path, dockerfile: str, prebuilt: object, where: str) -> _ImageSource:
    _single_container(folder)
    if prebuilt:
        return {"build": None, "image": str(prebuilt)}
    if (folder / dockerfile).is_file():
        return {"build": ImageBuild.of(folder, dockerfile), "image": None}
    raise ConfigError(f"{where}: no {folder / dockerfile} and no docker_image: add one of them")


def load_tb2(folder: Path) -> Task:
    """A Terminal-Bench 2.0 / Harbor task folder."""
    where = str(folder / "task.toml")
    try:
        data = tomllib.loads((folder / "task.toml").read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: invalid TOML ({exc})") from None
    if not (folder / "instruction.md").is_file():
        raise ConfigError(f"{folder}: a Terminal-Bench task needs instruction.md")
    if not (folder / "tests" / "test.sh").is_file():
        raise ConfigError(f"{folder}: a Terminal-Bench task needs tests/test.sh (the verifier)")
    env, agent, verifier = (data.get(k) or {} for k in ("environment", "agent", "verifier"))
    tests, modes = read_folder(folder / "tests")
    solve = folder / "solution" / "solve.sh"
    container = Container(
        format="terminal-bench",
        command=_TB2_TESTS,
        tests=tests,
        test_modes=modes,
        cpus=_num(env.get("cpus"), where, "environment.cpus", unit=""),
        memory_mb=_mib(env.get("memory_mb", env.get("memory")), where, "environment.memory"),
        disk_mb=_mib(env.get("storage_mb", env.get("storage")), where, "environment.storage"),
        **_image(folder / "environment", "Dockerfile", env.get("docker_image"), where),
    )
    return _container_task(
        folder.name,
        (folder / "instruction.md").read_text(encoding="utf-8"),
        container,
        agent_s=_num(agent.get("timeout_sec"), where, "agent.timeout_sec"),
        test_s=_num(verifier.get("timeout_sec"), where, "verifier.timeout_sec"),
        solution=solve.read_text(encoding="utf-8") if solve.is_file() else None,
        source=tree_digest(folder, skip=frozenset({"solution"})),
    )


def load_tb1(folder: Path, data: Mapping[str, object]) -> Task:
    """A Terminal-Bench 1 task folder (``task.yaml`` with ``instruction``)."""
    where = str(folder / "task.yaml")
    instruction = data.get("instruction")
    descriptions = items(data.get("descriptions"))
    if instruction is None and descriptions:
        instruction = mapping(descriptions[0]).get("description")  # the older spelling
    if not isinstance(instruction, str) or not instruction.strip():
        raise ConfigError(f"{where}: instruction must be a non-empty text")
    if not (folder / "run-tests.sh").is_file():
        raise ConfigError(f"{folder}: a Terminal-Bench 1 task needs run-tests.sh")
    tests, modes = read_folder(folder / "tests") if (folder / "tests").is_dir() else ({}, {})
    tests["run-tests.sh"] = (folder / "run-tests.sh").read_bytes()
    modes["run-tests.sh"] = 0o755
    solve = folder / "solution.sh"
    container = Container(
        format="terminal-bench-1",
        command=_TB1_TESTS,
        tests=tests,
        test_modes=modes,
        env={"TEST_DIR": TESTS_DIR},
        **_image(folder, "Dockerfile", data.get("docker_image"), where),
    )
    return _container_task(
        folder.name,
        instruction,
        container,
        agent_s=_num(data.get("max_agent_timeout_sec"), where, "max_agent_timeout_sec"),
        test_s=_num(data.get("max_test_timeout_sec"), where, "max_test_timeout_sec"),
        solution=solve.read_text(encoding="utf-8") if solve.is_file() else None,
        source=tree_digest(folder, skip=frozenset({"solution.sh"})),
    )


def _container_task(
    task_id: str,
    prompt: str,
    container: Container,
    *,
    agent_s: float | None,
    test_s: float | None,
    solution: str | None,
    source: str = "",
) -> Task:
    return Task(
        id=task_id,
        prompts=(prompt,),
        check=Check(command=container.command, timeout_s=test_s or 120.0),
        timeout_s=agent_s,
        solution=solution,
        container=container,
        source=source,
    )


def _instances(path: Path) -> list[dict[str, object]]:
    if path.suffix == ".jsonl":
        lines = path.read_text(encoding="utf-8").splitlines()
        try:
            data: object = [json.loads(line) for line in lines if line.strip()]
        except ValueError as exc:
            raise ConfigError(f"{path}: invalid JSON line ({exc})") from None
    else:
        data = load_yaml(path)  # JSON is YAML
    if isinstance(data, dict) and "instance_id" in data:
        data = [data]
    if (
        isinstance(data, list)
        and data
        and all(isinstance(d, dict) and "instance_id" in d for d in data)
    ):
        return data
    return []


def _tests(value: object, where: str, key: str) -> tuple[str, ...]:
    if isinstance(value, str):  # the dataset's rows carry these as JSON text
        try:
            value = json.loads(value)
        except ValueError:
            raise ConfigError(f"{where}: {key} must be a list of test names") from None
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise ConfigError(f"{where}: {key} must be a list of test names")
    return tuple(value)


def load_swe(path: Path, index: int, inst: Mapping[str, object]) -> Task:
    """One SWE-bench-style instance of the file at ``path``."""
    where = f"{path}: instance {index} ({inst.get('instance_id')})"
    for key in ("instance_id", "problem_statement", "test_patch"):
        value = inst.get(key)
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{where}: {key} is required (text)")
    f2p = _tests(inst.get("FAIL_TO_PASS"), where, "FAIL_TO_PASS")
    if not f2p:
        raise ConfigError(f"{where}: FAIL_TO_PASS is empty: nothing would show the fix")
    image = inst.get("image") or inst.get("image_name")
    dockerfile = inst.get("dockerfile")
    if image:
        source: _ImageSource = {"build": None, "image": str(image)}
    elif isinstance(dockerfile, str):
        full = (path.parent / dockerfile).resolve()
        if not full.is_file():
            raise ConfigError(f"{where}: dockerfile {full} does not exist")
        source = {"build": ImageBuild.of(full.parent, full.name), "image": None}
    else:
        raise ConfigError(f"{where}: set `image` (a prebuilt image) or `dockerfile` (to build)")
    swe = SweSpec(
        test_patch=str(inst["test_patch"]),  # text: checked above
        fail_to_pass=f2p,
        pass_to_pass=_tests(inst.get("PASS_TO_PASS", []), where, "PASS_TO_PASS"),
        test_cmd=str(inst.get("test_cmd") or "python -m pytest -rA"),
        base_commit=str(inst.get("base_commit", "")),
    )
    repo = inst.get("repo", "")
    prompt = (
        f"{str(inst['problem_statement']).rstrip()}\n\n"
        f"The repository{f' ({repo})' if repo else ''} is checked out in the working directory. "
        "Change its code so that the problem is solved; do not change its tests."
    )
    container = Container(format="swe-bench", command=swe.test_cmd, swe=swe, **source)
    gold = inst.get("patch")
    return _container_task(
        str(inst["instance_id"]),
        prompt,
        container,
        agent_s=_num(inst.get("timeout_s"), where, "timeout_s"),
        test_s=_num(inst.get("test_timeout_s"), where, "test_timeout_s"),
        solution=gold_script(gold) if isinstance(gold, str) and gold.strip() else None,
    )

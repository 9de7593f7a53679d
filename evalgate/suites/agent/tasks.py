"""Agent tasks, Terminal-Bench style: a workspace, a prompt, a check that decides.

A task is a folder with ``task.yaml``, or an entry in a YAML file's ``tasks:`` list::

    id: fix-off-by-one            # default: the folder name
    prompt: |                     # or a list: the first turn, then follow-up turns
      The tests in test_stats.py fail. Fix stats.py so that they pass.
    setup:
      files: {notes.txt: "..."}   # written into /workspace (a folder's workspace/ is copied too)
      commands: ["python3 gen.py"]  # run in /workspace before the agent starts
    check:
      command: python3 -I "$CHECKS/check_stats.py"   # exit 0 = pass
      score_file: null            # or a file the check writes (read only when it exits 0)
      timeout_s: 60
    timeout_s: 180                # the agent's budget, capped by the sandbox.timeout_s
    max_turns: 20                 # capped by the benchmark's agent.max_turns
    group: python                 # tasks sharing a group are one cluster in the CI
    solution: solution.sh         # a reference solution (tests prove the task is solvable)

In a folder, ``workspace/`` is copied into ``/workspace`` and ``tests/`` becomes the check's
files: they never enter the agent's sandbox; the check runs in a fresh sandbox holding a copy of
the agent's workspace, with its files in ``$CHECKS``. A check must not import the agent's code
into its own process (see ``runner``): it runs it in a child and judges the results. Once it
has run any of the agent's code (through ``$CONFINE``), a check reads nothing that code could
have rewritten: it judges against its own inputs and values it holds in memory, and reads the
workspace files it judges before the agent's code runs (docs/configuration.md, "Checks").

Tasks that bring their own container image (Terminal-Bench 2.0 / 1 folders, SWE-bench instance
files) load through ``formats`` into the same :class:`Task`, with a :class:`Container`; their
verdict is ``verify``'s.
"""

from __future__ import annotations

import dataclasses
import io
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from evalgate.errors import ConfigError
from evalgate.sandbox.base import ImageBuild, portable_mode
from evalgate.suites.identity import digest, tree_digest

__all__ = [
    "Check",
    "Container",
    "SweSpec",
    "Task",
    "load_tasks",
    "load_yaml",
    "read_folder",
    "tar_files",
]

_TASK_KEYS = {
    "id",
    "description",
    "prompt",
    "setup",
    "check",
    "timeout_s",
    "max_turns",
    "group",
    "solution",
}


@dataclass(frozen=True)
class Check:
    command: str
    score_file: str | None = None
    timeout_s: float = 120.0


@dataclass(frozen=True)
class SweSpec:
    """What grades a SWE-bench-style instance (see ``verify``)."""

    test_patch: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    test_cmd: str
    base_commit: str = ""


@dataclass(frozen=True)
class Container:
    """A task that brings its own container (Terminal-Bench, SWE-bench-style; see ``formats``).

    The agent works in the image's WORKDIR; the verifier runs ``command`` in a fresh container
    of the same image holding a copy of that folder and the task's ``tests`` at ``TESTS_DIR``.
    """

    format: str  # "terminal-bench" (TB 2.0 / Harbor), "terminal-bench-1", "swe-bench"
    build: ImageBuild | None  # the task's Dockerfile; else the prebuilt ``image``
    image: str | None
    command: str  # the verifier, run under the sandbox's guard shell in the workdir
    tests: dict[str, bytes] = field(default_factory=dict)
    test_modes: dict[str, int] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # the verifier's (TEST_DIR for TB1)
    cpus: float | None = None  # the task's own limits, capped by the benchmark's sandbox
    memory_mb: int | None = None
    disk_mb: int | None = None
    swe: SweSpec | None = None

    @property
    def digest(self) -> str:
        """What identifies the environment: a changed Dockerfile or image changes the item."""
        return self.build.digest if self.build is not None else str(self.image)


@dataclass(frozen=True)
class Task:
    id: str
    prompts: tuple[str, ...]  # the first turn, then follow-ups
    check: Check
    workspace: dict[str, bytes] = field(default_factory=dict)  # path → content (with modes below)
    modes: dict[str, int] = field(default_factory=dict)
    check_files: dict[str, bytes] = field(default_factory=dict)
    setup_commands: tuple[str, ...] = ()
    timeout_s: float | None = None  # None: the benchmark's sandbox.timeout_s
    max_turns: int | None = None
    group: str | None = None
    solution: str | None = None  # script text, run by `sh -s` in /workspace
    description: str = ""
    container: Container | None = None  # a task with its own image (Terminal-Bench, SWE-bench)
    # The task's files on disk as the loader found them (``tree_digest``: links as links), less
    # its reference solution; empty for a task with no folder of its own (a YAML list entry).
    source: str = ""

    @property
    def prompt(self) -> str:
        return self.prompts[0]

    @property
    def exam(self) -> str:
        """What decides this task's score beyond its prompt (``Item.exam``): the check and its
        files, the workspace and setup, the limits, the container (its verifier, tests, build
        context or image, SWE-bench spec) and the folder itself. Not the reference solution,
        nor the description or group, which decide nothing."""
        c = self.container
        container = None
        if c is not None:
            container = {
                f.name: getattr(c, f.name) for f in dataclasses.fields(c) if f.name != "build"
            }
            # The build's content digest, not its context's absolute path (another checkout).
            container["build"] = c.build.digest if c.build is not None else None
        return digest(
            {
                "check": self.check,
                "workspace": self.workspace,
                "modes": self.modes,
                "check_files": self.check_files,
                "setup_commands": self.setup_commands,
                "timeout_s": self.timeout_s,
                "max_turns": self.max_turns,
                "container": container,
                "source": self.source,
            }
        )


def read_folder(root: Path) -> tuple[dict[str, bytes], dict[str, int]]:
    files, modes = {}, {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        files[rel] = path.read_bytes()
        modes[rel] = portable_mode(path.stat().st_mode)
    return files, modes


def _task(data: object, where: str, folder: Path | None, default_id: str | None) -> Task:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: a task must be a mapping")
    unknown = set(data) - _TASK_KEYS
    if unknown:
        raise ConfigError(
            f"{where}: unknown task field(s) {', '.join(sorted(unknown))}; "
            f"valid: {', '.join(sorted(_TASK_KEYS))}"
        )
    task_id = str(data.get("id") or default_id or "")
    if not task_id:
        raise ConfigError(f"{where}: a task needs an id")
    prompt = data.get("prompt")
    prompts = (prompt,) if isinstance(prompt, str) else tuple(prompt or ())
    if not prompts or not all(isinstance(p, str) and p.strip() for p in prompts):
        raise ConfigError(f"{where}: task {task_id!r}: prompt must be text or a list of texts")
    check = data.get("check")
    if isinstance(check, str):
        check = {"command": check}
    if not isinstance(check, dict) or not isinstance(check.get("command"), str):
        raise ConfigError(f"{where}: task {task_id!r}: check.command is required")
    setup = data.get("setup") or {}
    if not isinstance(setup, dict) or set(setup) - {"files", "commands"}:
        raise ConfigError(f"{where}: task {task_id!r}: setup takes files and commands")
    workspace: dict[str, bytes] = {}
    modes: dict[str, int] = {}
    check_files: dict[str, bytes] = {}
    solution = data.get("solution")
    if folder is not None:
        if (folder / "workspace").is_dir():
            workspace, modes = read_folder(folder / "workspace")
        if (folder / "tests").is_dir():
            check_files, _ = read_folder(folder / "tests")
        if isinstance(solution, str) and (folder / solution).is_file():
            solution = (folder / solution).read_text(encoding="utf-8")
    for rel, text in (setup.get("files") or {}).items():
        workspace[str(rel)] = str(text).encode()
    source = ""
    if folder is not None:
        named = data.get("solution")  # a path in the folder: the reference, which decides nothing
        solved = named if isinstance(named, str) and (folder / named).is_file() else None
        source = tree_digest(folder, skip=frozenset({Path(solved).as_posix()} if solved else ()))
    return Task(
        id=task_id,
        prompts=prompts,
        check=Check(
            command=check["command"],
            score_file=check.get("score_file"),
            timeout_s=float(check.get("timeout_s", 120.0)),
        ),
        workspace=workspace,
        modes=modes,
        check_files=check_files,
        setup_commands=tuple(str(c) for c in setup.get("commands") or ()),
        timeout_s=float(data["timeout_s"]) if data.get("timeout_s") is not None else None,
        max_turns=int(data["max_turns"]) if data.get("max_turns") is not None else None,
        group=str(data["group"]) if data.get("group") is not None else None,
        solution=solution,
        description=str(data.get("description", "")),
        source=source,
    )


def load_yaml(path: Path) -> object:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{line}: invalid YAML ({getattr(exc, 'problem', exc)})") from None


def _no_links_out(root: Path) -> None:
    """Refuse a symlink in the task tree that leads out of it: a task's files are copied into
    sandboxes and results, and `tests/key -> ~/.ssh/id_ed25519` (or `/proc/self/environ`)
    would carry the runner's secrets with them."""
    if not root.is_dir():
        return
    top = Path(os.path.realpath(root))
    for folder, dirs, files in os.walk(root):  # never follows a link: each is checked here
        for name in (*dirs, *files):
            link = Path(folder, name)
            if not link.is_symlink():
                continue
            real = Path(os.path.realpath(link))
            if real != top and top not in real.parents:
                raise ConfigError(
                    f"{link}: a symlink out of the task folder (to {os.readlink(link)}); task "
                    "files must stay inside it"
                )


def load_tasks(path: str | Path) -> list[Task]:
    """Tasks from a folder of task folders, one task folder, or a YAML file of tasks."""
    from evalgate.suites.agent import formats  # formats builds on this module's Task

    path = Path(path)
    _no_links_out(path)
    found = formats.detect(path)
    if found is not None:
        tasks = found
    elif path.is_file():
        data = load_yaml(path)
        entries = data.get("tasks") if isinstance(data, dict) else data
        if not isinstance(entries, list):
            raise ConfigError(f"{path}: expected a `tasks:` list")
        tasks = [_task(e, f"{path}: tasks[{i}]", None, None) for i, e in enumerate(entries)]
    elif (path / "task.yaml").is_file():
        tasks = [_task(load_yaml(path / "task.yaml"), str(path / "task.yaml"), path, path.name)]
    elif path.is_dir():
        tasks = []
        for d in sorted(path.iterdir()):
            own = formats.detect(d) if d.is_dir() else None
            if own is not None:
                tasks += own
            elif (d / "task.yaml").is_file():
                tasks.append(_task(load_yaml(d / "task.yaml"), str(d / "task.yaml"), d, d.name))
    else:
        raise ConfigError(f"{path}: no such task folder or file")
    if not tasks:
        raise ConfigError(
            f"{path}: no tasks found (a task is a folder with task.yaml, a Terminal-Bench task "
            "folder with task.toml, or a SWE-bench instance file)"
        )
    seen: set[str] = set()
    for task in tasks:
        if task.id in seen:
            raise ConfigError(f"{path}: duplicate task id {task.id!r}")
        seen.add(task.id)
    return tasks


def tar_files(files: dict[str, bytes], modes: dict[str, int] | None = None) -> bytes:
    """An uncompressed tar of ``files``: one ``tar -x`` in the sandbox installs them all."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel, content in files.items():
            info = tarfile.TarInfo(rel)
            info.size = len(content)
            info.mode = (modes or {}).get(rel, 0o644)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()

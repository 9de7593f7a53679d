"""The built-in agent's tools: bash, read, write, edit, glob, grep. All run inside the sandbox.

Each tool takes the model's JSON arguments and returns text for the model. A tool never raises
for what the model did wrong (bad JSON, a missing file, a failing command): it says so in its
result, as a terminal would. Only the sandbox failing (:class:`SandboxError`) propagates.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping

from evalgate.sandbox import Sandbox, SandboxFileError

__all__ = ["MAX_RESULT", "TOOLS", "run_tool"]

MAX_RESULT = 16_000  # characters of one tool result shown to the model


def _fn(
    name: str, description: str, properties: dict[str, dict[str, str]], required: list[str]
) -> dict[str, object]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_PATH = {"type": "string", "description": "File path, relative to /workspace or absolute."}
TOOLS: list[dict[str, object]] = [
    _fn(
        "bash",
        "Run a bash command in /workspace and return its exit code, stdout and stderr.",
        {
            "command": {"type": "string", "description": "The command line."},
            "timeout_s": {"type": "number", "description": "Time limit in seconds (default 60)."},
        },
        ["command"],
    ),
    _fn(
        "read",
        "Read a text file; lines are numbered.",
        {
            "path": _PATH,
            "offset": {"type": "integer", "description": "First line (1-based)."},
            "limit": {"type": "integer", "description": "Number of lines."},
        },
        ["path"],
    ),
    _fn(
        "write",
        "Create or overwrite a file with the given content.",
        {"path": _PATH, "content": {"type": "string"}},
        ["path", "content"],
    ),
    _fn(
        "edit",
        "Replace old_string with new_string in a file (old_string must occur exactly once "
        "unless replace_all is true).",
        {
            "path": _PATH,
            "old_string": {"type": "string"},
            "new_string": {"type": "string"},
            "replace_all": {"type": "boolean"},
        },
        ["path", "old_string", "new_string"],
    ),
    _fn(
        "glob",
        "List files matching a glob pattern (e.g. **/*.py), relative to path.",
        {"pattern": {"type": "string"}, "path": {"type": "string"}},
        ["pattern"],
    ),
    _fn(
        "grep",
        "Search file contents for a regular expression; returns file:line:text matches.",
        {
            "pattern": {"type": "string"},
            "path": {"type": "string"},
            "include": {"type": "string", "description": "Only files matching this glob."},
        },
        ["pattern"],
    ),
]

_GLOB = (
    "import glob, os, sys\n"
    "os.chdir(sys.argv[2])\n"
    "hits = sorted(p for p in glob.glob(sys.argv[1], recursive=True) if os.path.isfile(p))\n"
    "print('\\n'.join(hits[:500]) if hits else '(no matches)')\n"
)


def _clip(text: str) -> str:
    if len(text) <= MAX_RESULT:
        return text
    half = MAX_RESULT // 2
    return f"{text[:half]}\n… [{len(text) - MAX_RESULT} characters cut] …\n{text[-half:]}"


def _number(args: Mapping[str, object], key: str, default: float) -> float:
    """A numeric argument as the model wrote it (a number, or its text); TypeError else."""
    value = args.get(key) or default
    if isinstance(value, int | float | str):
        return float(value)
    raise TypeError(f"{key} must be a number")


async def _bash(box: Sandbox, args: Mapping[str, object], budget_s: float) -> str:
    timeout = min(_number(args, "timeout_s", 60.0), budget_s)
    result = await box.exec(["bash", "-c", str(args["command"])], timeout_s=max(timeout, 0.1))
    head = f"exit code: {result.exit_code}" + (" (timed out)" if result.timed_out else "")
    parts = [head]
    if result.stdout:
        parts.append(f"stdout:\n{result.stdout}")
    if result.stderr:
        parts.append(f"stderr:\n{result.stderr}")
    return "\n".join(parts)


async def _read(box: Sandbox, args: Mapping[str, object], budget_s: float) -> str:
    text = (await box.read_file(str(args["path"]), max_bytes=1 << 20)).decode("utf-8", "replace")
    lines = text.splitlines()
    start = max(int(_number(args, "offset", 1)), 1)
    stop = start - 1 + int(_number(args, "limit", 0)) if args.get("limit") else len(lines)
    shown = [f"{n:6}\t{line}" for n, line in enumerate(lines[start - 1 : stop], start)]
    return "\n".join(shown) if shown else "(empty file)"


async def _write(box: Sandbox, args: Mapping[str, object], budget_s: float) -> str:
    content = str(args["content"])
    await box.write_file(str(args["path"]), content)
    return f"wrote {len(content.encode())} bytes to {args['path']}"


async def _edit(box: Sandbox, args: Mapping[str, object], budget_s: float) -> str:
    path, old, new = str(args["path"]), str(args["old_string"]), str(args["new_string"])
    text = (await box.read_file(path, max_bytes=4 << 20)).decode("utf-8")
    count = text.count(old) if old else 0
    if count == 0:
        return f"error: old_string not found in {path}"
    if count > 1 and not args.get("replace_all"):
        return f"error: old_string occurs {count} times in {path}; make it unique or replace_all"
    await box.write_file(
        path, text.replace(old, new) if args.get("replace_all") else text.replace(old, new, 1)
    )
    return f"edited {path} ({count if args.get('replace_all') else 1} replacement(s))"


async def _glob(box: Sandbox, args: Mapping[str, object], budget_s: float) -> str:
    where = str(args.get("path") or box.workdir)
    result = await box.exec(["python3", "-I", "-c", _GLOB, str(args["pattern"]), where])
    return result.stdout or result.stderr or "(no matches)"


async def _grep(box: Sandbox, args: Mapping[str, object], budget_s: float) -> str:
    cmd = ["grep", "-rnE", "-I"]
    if args.get("include"):
        cmd.append(f"--include={args['include']}")
    cmd += ["--", str(args["pattern"]), str(args.get("path") or ".")]
    result = await box.exec(f"{shlex.join(cmd)} | head -n 300", timeout_s=min(60.0, budget_s))
    if result.exit_code == 0 and not result.stdout:
        return "(no matches)"
    return result.stdout or result.stderr or "(no matches)"


_IMPL = {
    "bash": _bash,
    "read": _read,
    "write": _write,
    "edit": _edit,
    "glob": _glob,
    "grep": _grep,
}


async def run_tool(box: Sandbox, name: str, arguments: str, *, budget_s: float = 60.0) -> str:
    """The text result of one tool call (errors included, as text)."""
    impl = _IMPL.get(name)
    if impl is None:
        return f"error: unknown tool {name!r}; tools: {', '.join(_IMPL)}"
    try:
        args = json.loads(arguments or "{}")
    except ValueError as exc:
        return f"error: arguments are not valid JSON ({exc})"
    if not isinstance(args, dict):
        return "error: arguments must be a JSON object"
    try:
        return _clip(await impl(box, args, budget_s))
    except KeyError as exc:
        return f"error: missing argument {exc}"
    except (SandboxFileError, UnicodeDecodeError, ValueError, TypeError) as exc:
        return f"error: {exc}"

"""SWE-bench-style grading: apply the test patch, run the listed tests, resolved iff all pass.

The rule is SWE-bench's (``swebench.harness.grading``): an instance is *resolved* when every
FAIL_TO_PASS and every PASS_TO_PASS test passes in the test log (PASSED or XFAIL; a test the
log does not show, has failed). The ``swebench`` package is not used: it requires ``datasets``,
``modal``, ``docker``, ``ghapi`` and ``pre-commit`` at install time, far more than this rule;
its per-repository log parsers reduce to the two formats below (pytest's ``-rA`` summary and
unittest's ``-v`` lines, which Django's runner prints too).

Before the test patch is applied, the files it touches are put back as the task image has them
(SWE-bench's ``git checkout <base_commit> -- <test files>``, without needing git): the agent's
edits to those tests never count. The patch is applied with ``git apply`` where the image has
git and a repository, else with ``_apply_patch`` (stdlib Python).

A test command run as ``python -m RUNNER`` puts the working directory first on sys.path, so a
``unittest.py`` (or ``argparse.py``, a ``pytest/`` package...) the agent adds to the repository
root would be imported instead of the real module and could print every test as passed: a new
top-level entry that shadows a module of the image's Python fails the instance, unjudged.
Beyond that, as with every in-process test runner, the agent's code runs inside the test
process (a ``conftest.py``, the code under test): it could print a forged ``PASSED`` line.
SWE-bench has the same exposure; see docs/threat-model.md.
"""

from __future__ import annotations

import base64
import re
import shlex
from pathlib import Path

from evalgate.sandbox import Sandbox
from evalgate.suites.agent.tasks import SweSpec

__all__ = [
    "gold_script",
    "grade",
    "parse_log",
    "patch_files",
    "resolved",
    "shadowing",
    "top_level",
    "unresolved_reason",
]

_APPLIER = Path(__file__).with_name("_apply_patch.py")
_HELPER = "/tmp/.evalgate-swe"  # outside the workdir: written after the agent's copy
_PASSING = {"PASSED", "XFAIL"}
# pytest's -rA line: STATUS NODEID[ - MESSAGE]. A node id holds spaces where a parametrize id
# does (``test_f[above hi]``), so it runs to the message's " - ", not to the first space (a
# PASSED line has no message: all of it is the id).
_PYTEST = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED) (\S.*?)(?: - .*)?$")
_UNITTEST = re.compile(r"^(\S+ \([^)]*\))(?: \.\.\.)? (ok|FAIL|ERROR|skipped.*|expected failure)$")
_UNITTEST_STATUS = {"ok": "PASSED", "FAIL": "FAILED", "ERROR": "ERROR", "expected failure": "XFAIL"}
_EOF = "EVALGATE_PATCH_EOF"
# argv: WORKDIR NAME...; prints each NAME that is a module/package the image's Python finds
# outside WORKDIR (so a copy in WORKDIR, first on sys.path, would be imported instead).
_SHADOWS = r"""
import importlib.util, os, sys
work = os.path.realpath(sys.argv[1])
for entry in sys.argv[2:]:
    path = os.path.join(work, entry)
    if os.path.isdir(path):
        if not any(os.path.exists(os.path.join(path, i)) for i in ("__init__.py", "__init__.pyc")):
            continue
        mod = entry
    elif entry.endswith((".py", ".pyc", ".so")):
        mod = entry.split(".", 1)[0]
    else:
        continue
    try:
        found = mod.isidentifier() and importlib.util.find_spec(mod)
    except Exception:
        continue
    origin = getattr(found, "origin", None) or ""
    if found and origin not in ("built-in", "frozen") and not os.path.realpath(
        origin or path
    ).startswith(work + os.sep):
        print(entry)
"""


def patch_files(patch: str) -> list[str]:
    """The paths a unified diff touches (old and new names)."""
    found = re.findall(r"^(?:---|\+\+\+) (?:[ab]/)?(\S+)", patch, re.M)
    return sorted({p for p in found if p != "/dev/null"})


def parse_log(log: str) -> dict[str, str]:
    """Test name → PASSED / FAILED / ERROR / XFAIL / SKIPPED, from pytest or unittest output."""
    status: dict[str, str] = {}
    for line in log.splitlines():
        line = line.rstrip()
        if m := _PYTEST.match(line):
            name = line.split(" ", 1)[1] if m.group(1) == "PASSED" else m.group(2)
            status[name] = m.group(1)
        elif m := _UNITTEST.match(line):
            word = m.group(2)
            status[m.group(1)] = _UNITTEST_STATUS.get(word, "SKIPPED")
    return status


def resolved(spec: SweSpec, status: dict[str, str]) -> tuple[bool, list[str]]:
    """SWE-bench's rule: every FAIL_TO_PASS and PASS_TO_PASS test passed; the ones that did not."""
    failing = [t for t in (*spec.fail_to_pass, *spec.pass_to_pass) if status.get(t) not in _PASSING]
    return not failing, failing


def _apply_command(patch_path: str) -> str:
    """``git apply`` in a git checkout with git, else the stdlib applier."""
    return (
        f"if command -v git >/dev/null 2>&1 && git rev-parse --git-dir >/dev/null 2>&1; then "
        f"git apply -v {patch_path}; else python3 -I {_HELPER}/apply.py {patch_path} .; fi"
    )


def gold_script(patch: str) -> str:
    """A reference solution: a shell script that applies the gold ``patch`` in the workdir."""
    applier = _APPLIER.read_text(encoding="utf-8")
    return (
        f"mkdir -p {_HELPER}\n"
        f"cat > {_HELPER}/apply.py <<'{_EOF}'\n{applier}{_EOF}\n"
        f"cat > {_HELPER}/gold.patch <<'{_EOF}'\n{patch.rstrip(chr(10))}\n{_EOF}\n"
        f"{_apply_command(f'{_HELPER}/gold.patch')}\n"
    )


async def save_originals(box: Sandbox, spec: SweSpec) -> bytes:
    """The test patch's files as the image has them (before the agent's copy replaces them)."""
    # base64: exec output comes back as text.
    script = 'for f in "$@"; do [ -e "$f" ] && printf "%s\\n" "$f"; done | tar -cf - -T - | base64'
    result = await box.exec(["sh", "-c", script, "sh", *patch_files(spec.test_patch)])
    return base64.b64decode(result.stdout) if result.ok else b""


async def top_level(box: Sandbox) -> set[str]:
    """The names in the working directory's top level (the image's, before the agent's copy)."""
    listed = await box.exec(["ls", "-A1", box.workdir], timeout_s=60)
    return set(listed.stdout.splitlines()) if listed.ok else set()


async def shadowing(box: Sandbox, image_entries: set[str]) -> list[str]:
    """The agent's new top-level entries that would be imported instead of a module of the
    image's Python (``python -m unittest`` puts the working directory first on sys.path)."""
    new = sorted((await top_level(box)) - image_entries)
    if not new:
        return []
    found = await box.exec(
        ["python3", "-I", "-c", _SHADOWS, box.workdir, *new], timeout_s=60, cwd="/"
    )
    return found.stdout.split() if found.ok else []  # no python3: no Python runner to shadow


async def grade(
    box: Sandbox,
    spec: SweSpec,
    originals: bytes,
    *,
    timeout_s: float,
    env: dict[str, str],
    image_entries: set[str],
) -> tuple[float, str, str]:
    """(reward, reason, log) in ``box``, which holds the agent's copy of the repository."""
    shadows = await shadowing(box, image_entries)
    if shadows:  # a fake test runner (unittest.py, say) would print whatever it likes
        return (
            0.0,
            f"not judged: the agent added {', '.join(shadows)} to the repository root, which "
            "shadows a module of the image's Python that the test command would import",
            "",
        )
    files = patch_files(spec.test_patch)
    reset = await box.exec(["rm", "-rf", "--", *files], timeout_s=60)
    if originals and reset.ok:
        reset = await box.exec(["tar", "-x", "-f", "-"], stdin=originals, timeout_s=60)
    if not reset.ok:
        return 0.0, f"the test files could not be reset ({reset.stderr.strip()[:200]})", ""
    await box.write_file(f"{_HELPER}/apply.py", _APPLIER.read_bytes())
    await box.write_file(f"{_HELPER}/test.patch", spec.test_patch)
    applied = await box.exec(_apply_command(f"{_HELPER}/test.patch"), timeout_s=120)
    if not applied.ok:
        return 0.0, f"the test patch does not apply ({applied.stderr.strip()[-200:]})", ""
    tests = " ".join(shlex.quote(t) for t in _test_args(spec))
    result = await box.exec(
        [box.guard_shell, "-c", f"{spec.test_cmd} {tests}"],
        env=env,
        timeout_s=timeout_s,
        max_output=4 << 20,
    )
    log = result.stdout + ("\n" if result.stdout and result.stderr else "") + result.stderr
    if result.timed_out:
        return 0.0, f"tests timed out after {timeout_s:g} s", log
    status = parse_log(log)
    ok, failing = resolved(spec, status)
    if ok:
        n = len(spec.fail_to_pass) + len(spec.pass_to_pass)
        return 1.0, f"resolved: {n} FAIL_TO_PASS/PASS_TO_PASS tests pass", log
    return 0.0, unresolved_reason(failing, status), log


def unresolved_reason(failing: list[str], status: dict[str, str]) -> str:
    """Why not resolved: each listed test's status, or that the log never shows it."""

    def why(name: str) -> str:
        if name in status:
            return f"{name} ({status[name]})"
        return f"{name} (not in the test log: the test command ran only the test patch's files)"

    shown = ", ".join(map(why, failing[:5]))
    more = f" (+{len(failing) - 5} more)" if len(failing) > 5 else ""
    return f"not resolved: {len(failing)} listed test(s) did not pass: {shown}{more}"


def _test_args(spec: SweSpec) -> list[str]:
    """What the test command is given: the test files of the test patch (as SWE-bench does)."""
    return [f for f in patch_files(spec.test_patch) if _is_test_file(f)]


def _is_test_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.endswith(".py") and (name.startswith("test") or "/tests/" in f"/{path}")

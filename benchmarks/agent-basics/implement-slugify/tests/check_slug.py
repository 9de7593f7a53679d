"""Hidden check: slugify follows its docstring."""

# --- the check judges; the agent's code runs only in child processes -----------------------
# Importing the agent's module here would let it end this process with status 0 (os._exit)
# before anything was judged. So the agent's code runs in a child `python3 -I`, which prints
# its results as JSON; this process, which the agent's code can neither read (this file is
# removed first) nor trace (not dumpable; and the child runs under $CONFINE, which keeps it
# from ptracing or patching any process outside it), compares them with what is expected.
import contextlib
import ctypes
import json
import os
import shutil
import subprocess
import sys

CONFINE = os.environ.get("CONFINE", "").split()  # unquoted in a shell: it splits into words


def _protect():
    if not CONFINE:
        sys.exit("CONFINE is not set: run this check through evalgate")
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    if os.environ.get("CHECKS"):
        shutil.rmtree(os.environ["CHECKS"], ignore_errors=True)


def agent_results(code, *args):
    """Run ``code`` (it prints one JSON line) with the workspace importable; its JSON value."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp", "LANG": "C.UTF-8"}
    prelude = "import json, sys\nsys.path.insert(0, '.')\n"
    try:
        run = subprocess.run(
            [*CONFINE, sys.executable, "-I", "-c", prelude + code, *args],
            capture_output=True,
            env=env,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        sys.exit("the code under test did not finish within 60 s")
    lines = run.stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        err = run.stderr.decode("utf-8", "replace")[-1500:]
        sys.exit(f"the code under test gave no result (exit {run.returncode}):\n{err}")


_protect()
# ---------------------------------------------------------------------------------------------

CASES = {
    "Hello, World!": "hello-world",
    "  Sandboxed   agents -- 101 ": "sandboxed-agents-101",
    "C++ & Rust": "c-rust",
    "already-a-slug": "already-a-slug",
    "MiXeD_Case__Words": "mixed-case-words",
    "---": "",
    "": "",
    "caf\u00e9 cr\u00e8me": "caf-cr-me",
}
CODE = """
from slug import slugify
print(json.dumps([slugify(text) for text in json.loads(sys.argv[1])]))
"""
got = agent_results(CODE, json.dumps(list(CASES)))
if not isinstance(got, list) or len(got) != len(CASES):
    sys.exit(f"unexpected result from slug.py: {got!r}")
for (text, want), value in zip(CASES.items(), got, strict=True):
    if value != want:
        sys.exit(f"slugify({text!r}) = {value!r}, expected {want!r}")
print("ok")

"""Hidden check: the new name works everywhere and the old one is gone."""

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
import pathlib
import re
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

CODE = """
from shop import cart, pricing, report
c = cart.Cart()
c.add(10.0, 2)
c.add(1.25)
out = {
    "total_price": hasattr(pricing, "total_price"),
    "calc": hasattr(pricing, "calc"),
    "price": pricing.total_price([(10.0, 2), (2.5, 4)]),
    "cart": c.total(),
    "summary": report.summary([c, cart.Cart()]),
}
print(json.dumps(out))
"""
# Source first: no agent code has run yet.
for path in pathlib.Path("shop").rglob("*.py"):
    if re.search(r"\bcalc\b", path.read_text()):
        sys.exit(f"{path} still mentions calc")
got = agent_results(CODE)
want = {
    "total_price": True,
    "calc": False,
    "price": 36.0,
    "cart": 25.5,
    "summary": {"carts": 2, "revenue": 25.5},
}
if got != want:
    sys.exit(f"the shop package gives {got!r}, expected {want!r}")
print("ok")

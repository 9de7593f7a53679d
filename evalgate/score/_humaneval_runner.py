"""HumanEval's test runner and worker (not a model judge: the problem's own tests decide): two
processes inside one sandbox, only literals between them.

This file runs *inside* the sandbox, under the sandbox's own ``python3`` (stdlib only), as
``python3 -I -S -c <this source> tests`` with a JSON job on stdin: ``nonce``, ``solution`` (the
prompt and the post-processed completion), ``exam`` (the prompt and the problem's tests, both
from the installed data file) and ``entry`` (the function under test). It never imports evalgate.

Why two processes: generated code that runs in the interpreter that tests it can walk its frames
(``sys._getframe``, ``inspect.stack``, ``gc``) to the verdict, or return an object whose
``__eq__`` is always true. So the **test runner** makes itself non-dumpable first (the worker,
the same uid without capabilities, can then neither ptrace it nor open its ``/proc/PID/mem`` or
``/proc/PID/fd``), runs the exam's ``check(candidate)`` in its own interpreter, and starts the
**worker**, which alone runs the generated code. ``candidate`` is a proxy: each call sends its
arguments to the worker as tagged JSON and gets back a value or an error message in the same
form. Only ``None``, bools, ints, floats, strings, lists, tuples, dicts and sets cross; anything
else the completion returns is an error, so no object of its making ever reaches ``check``.

The test runner writes its verdict on a descriptor the worker never had: ``EVALGATE-PASS
NONCE`` once ``check`` has returned, else ``EVALGATE-FAIL NONCE reason``. The worker's own output
goes to stderr. What the worker can still do is answer wrongly, crash, hang or kill the test
runner: each is a 0, never a pass.
"""

import json
import os
import sys
from typing import Any

_PR_SET_DUMPABLE = 4
_MAX_LINE = (
    16 << 20
)  # one reply of the worker; past it the call fails (a value that large is no answer)


def _encode(value, depth=0):
    """A literal as JSON-ready data: lists stay lists, tuples/dicts/sets become tagged objects."""
    if depth > 200:
        raise ValueError("value nested too deeply")
    kind = type(value)  # exact types: a subclass could redefine __eq__
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is list:
        return [_encode(v, depth + 1) for v in value]
    if kind is tuple:
        return {"t": [_encode(v, depth + 1) for v in value]}
    if kind in (set, frozenset):
        return {"s": [_encode(v, depth + 1) for v in value]}
    if kind is dict:
        return {"d": [[_encode(k, depth + 1), _encode(v, depth + 1)] for k, v in value.items()]}
    raise TypeError(f"returned a {kind.__name__}: only literals cross to the tests")


def _decode(data):
    """The inverse of :func:`_encode`; anything malformed raises ValueError."""
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is list:
        return [_decode(v) for v in data]
    if type(data) is dict and len(data) == 1:
        ((tag, items),) = data.items()
        if type(items) is list:
            if tag == "t":
                return tuple(_decode(v) for v in items)
            if tag == "s":
                return {_decode(v) for v in items}
            if tag == "d" and all(type(p) is list and len(p) == 2 for p in items):
                return {_decode(k): _decode(v) for k, v in items}
    raise ValueError("malformed value")


def _send(fd, obj):
    data = json.dumps(obj).encode() + b"\n"
    while data:
        data = data[os.write(fd, data) :]


def _offer(fd, obj):
    """_send to a worker that may be gone already: the next read says how it ended."""
    try:
        _send(fd, obj)
    except BrokenPipeError:
        return


def _last_line(exc):
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return (text.strip().splitlines() or [type(exc).__name__])[-1][:300]


def worker():
    """Runs the generated code and answers calls. Its stdin/stdout: its channel to the tests."""
    rx = os.fdopen(os.dup(0), "rb", buffering=1 << 16)
    tx = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # the completion's prints go to stderr, not into the channel
    job = json.loads(rx.readline())
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(compile(job["solution"], "<humaneval>", "exec"), namespace)
        fn = namespace[job["entry"]]
    except Exception as exc:
        sys.stdout.flush()
        _send(tx, {"error": _last_line(exc)})
        return
    _send(tx, {"ready": True})
    for line in rx:
        call = json.loads(line)
        try:
            value = fn(*_decode(call["args"]), **_decode(call["kwargs"]))
            reply = {"value": _encode(value)}
        except Exception as exc:  # not BaseException: sys.exit ends the worker, as it should
            reply = {"error": _last_line(exc)}
        sys.stdout.flush()
        _send(tx, reply)


class CandidateError(Exception):
    """The completion raised, returned a non-literal, or stopped answering."""


class _Candidate:
    """The worker process seen from the test runner: the generated function, called through
    its channel (literals only), and its exit status once reaped."""

    def __init__(self, source):
        # posix_spawn, not subprocess (whose import costs more than the spawn): the pipes'
        # other ends and the verdict descriptor are close-on-exec, so the worker gets its
        # channel, stderr, nothing else.
        down_r, self.to_worker = os.pipe()
        from_r, up_w = os.pipe()
        self.pid = os.posix_spawn(
            sys.executable,
            [sys.executable, "-I", "-c", source, "worker"],
            os.environ,
            file_actions=[(os.POSIX_SPAWN_DUP2, down_r, 0), (os.POSIX_SPAWN_DUP2, up_w, 1)],
        )
        os.close(down_r)
        os.close(up_w)
        self.from_worker = os.fdopen(from_r, "rb")
        self.ended = []

    def wait(self):
        if not self.ended:
            self.ended.append(os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1]))
        return self.ended[0]

    def stop(self):
        if not self.ended:  # not reaped yet: the pid is still the worker's (a zombie at worst)
            os.kill(self.pid, 9)
        self.wait()

    def receive(self):
        line = self.from_worker.readline(_MAX_LINE)
        if not line:
            status = self.wait()
            raise CandidateError(
                f"the program exited before its tests finished (status {status})"
                if status >= 0
                else f"the program was killed by signal {-status}"
            )
        if not line.endswith(b"\n"):
            raise CandidateError(f"a reply over {_MAX_LINE} bytes")
        try:
            reply = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise CandidateError(f"a malformed reply ({_last_line(exc)})") from None
        if type(reply) is not dict:
            raise CandidateError("a malformed reply")
        if "error" in reply:
            raise CandidateError(str(reply["error"])[:300])
        return reply

    def __call__(self, *args, **kwargs):
        _offer(self.to_worker, {"args": _encode(list(args)), "kwargs": _encode(kwargs)})
        reply = self.receive()
        try:
            return _decode(reply["value"])
        except (KeyError, ValueError, TypeError, RecursionError) as exc:
            raise CandidateError(f"a malformed reply ({_last_line(exc)})") from None


def run_tests():
    """Runs the exam's ``check`` against a proxy of the worker's function; writes the verdict."""
    try:
        import ctypes

        if ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            raise OSError("prctl failed")
    except Exception as exc:  # fail closed: a dumpable test runner could be patched by the worker
        os.write(1, f"EVALGATE-FAIL - test runner cannot become non-dumpable ({exc})\n".encode())
        return
    job = json.loads(sys.stdin.buffer.read())
    nonce = job["nonce"]
    verdict = os.dup(1)  # not inheritable: the worker never gets it
    os.dup2(2, 1)
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)
    candidate = _Candidate(job["source"])
    reason = None
    try:
        _offer(candidate.to_worker, {"solution": job["solution"], "entry": job["entry"]})
        candidate.receive()
        exam: dict[str, Any] = {"__name__": "__exam__", "__builtins__": __builtins__}
        exec(compile(job["exam"], "<humaneval-tests>", "exec"), exam)
        exam[job["entry"]] = candidate  # tests that name the function call the worker's too
        exam["check"](candidate)
    except CandidateError as exc:
        reason = str(exc)
    except Exception as exc:
        reason = _last_line(exc)
    finally:
        candidate.stop()
    sys.stdout.flush()
    if reason is None:
        os.write(verdict, f"EVALGATE-PASS {nonce}\n".encode())
    else:
        os.write(verdict, f"EVALGATE-FAIL {nonce} {reason}\n".encode())


if __name__ == "__main__":
    run_tests() if sys.argv[1] == "tests" else worker()

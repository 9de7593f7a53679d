"""PrimeIntellect ``verifiers`` environments as gate benchmarks (kind ``verifiers``).

An environment is Python code — often the pull request's own — so it never runs in the gate's
process, which holds the GitHub token and decides the verdict. Each verifiers benchmark gets a
worker process (``python -P -m evalgate.suites._vf_worker``) that imports the environment from
the installed packages or from the benchmark's explicit ``env_path``, never from the working
directory (``-P``), with an environment stripped of tokens and of the runner's ``GITHUB_*``,
``INPUT_*``, ``ACTIONS_*`` variables. The gate sends it one request per (item, rollout) and gets
back the outcome: the rewards are still the environment's to compute (README: threat model), but
nothing it does can reach the gate's memory, token or verdict logic.

What runs inside the worker, and how each API generation is played, is in ``_vf_runner.py``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import json
import logging
import os
import re
import subprocess
import sys
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import evalgate
from evalgate.errors import ConfigError, InfraError
from evalgate.serve.client import RequestFailed
from evalgate.suites._vf_runner import CHAT_HARNESS_ID, VerifiersOutcome, module_name
from evalgate.suites.base import Item, Outcome, SuiteDefaults

if TYPE_CHECKING:
    from evalgate.config.spec import VerifiersBenchmark
    from evalgate.sandbox import Sandboxes

__all__ = ["CHAT_HARNESS_ID", "VerifiersOutcome", "VerifiersSuite", "module_name", "worker_env"]

log = logging.getLogger(__name__)

# Never handed to environment code: the runner's token and inputs (github_token among them), the
# Actions runtime's tokens, and anything named like a token.
_WITHHELD = re.compile(r"^(GITHUB_|INPUT_|ACTIONS_|RUNNER_)|TOKEN", re.IGNORECASE)


def worker_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The worker's environment: the gate's, less every token and runner variable, with the
    folder this evalgate was imported from on PYTHONPATH (``-P`` drops the working directory,
    which is where a source checkout of evalgate would otherwise have been found)."""
    source = os.environ if environ is None else environ
    env = {k: v for k, v in source.items() if not _WITHHELD.search(k)}
    root = str(Path(evalgate.__file__).resolve().parent.parent)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([root, *(p for p in paths if p != root)])
    return env


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            if proc.stdin is not None:
                proc.stdin.close()  # the worker exits at EOF
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()


class _Worker:
    """The worker process and its request/answer bookkeeping, usable from any event loop."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "evalgate.suites._vf_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=worker_env(),
        )
        self._lock = threading.Lock()
        self._pending: dict[int, Any] = {}
        self._ids = itertools.count(1)
        self._reader = threading.Thread(target=self._read, name=f"vf-worker-{name}", daemon=True)
        self._reader.start()
        self._finalizer = weakref.finalize(self, _stop, self.proc)

    def close(self) -> None:
        self._finalizer()

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send a request and block for its answer (loading, before any event loop runs)."""
        future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        self._send(message, future)
        return future.result()

    async def request(self, message: dict[str, Any]) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._send(message, (loop, future))
        return await future

    def _send(self, message: dict[str, Any], waiter: Any) -> None:
        line = (json.dumps({**message, "id": 0}) + "\n").encode("utf-8")
        with self._lock:
            if self.proc.poll() is not None or self.proc.stdin is None:
                raise InfraError(self._gone())
            ident = next(self._ids)
            self._pending[ident] = waiter
            line = line.replace(b'"id": 0', f'"id": {ident}'.encode(), 1)
            try:
                self.proc.stdin.write(line)
                self.proc.stdin.flush()
            except OSError:
                self._pending.pop(ident, None)
                raise InfraError(self._gone()) from None

    def _gone(self) -> str:
        code = self.proc.poll()
        return (
            f"vf_worker: the verifiers worker of benchmark {self.name!r} exited (code {code}); "
            "its stderr is above"
        )

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                answer = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                waiter = self._pending.pop(answer.get("id"), None)
            if waiter is not None:
                _deliver(waiter, answer)
        self.proc.wait()
        with self._lock:
            waiters, self._pending = list(self._pending.values()), {}
        for waiter in waiters:
            _deliver(waiter, {"ok": False, "error": {"type": "infra", "message": self._gone()}})


def _deliver(waiter: Any, answer: dict[str, Any]) -> None:
    if isinstance(waiter, concurrent.futures.Future):
        waiter.set_result(answer)
        return
    loop, future = waiter

    def settle() -> None:
        if not future.done():
            future.set_result(answer)

    with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
        loop.call_soon_threadsafe(settle)


def _raise(error: dict[str, Any]) -> None:
    kind, message = error.get("type"), str(error.get("message", ""))
    if kind == "config":
        raise ConfigError(message)
    if kind == "request":
        request_kind = str(error.get("kind", "bad_response"))
        raise RequestFailed(request_kind, message.removeprefix(f"{request_kind}: "))
    raise InfraError(message if message.startswith("vf_") else f"vf_worker: {message}")


@dataclass
class VerifiersSuite(SuiteDefaults):
    """A verifiers environment as an evalgate suite, played in its worker process."""

    name: str
    items: list[Item]
    api: str
    worker: _Worker
    roles: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_spec(
        cls, spec: VerifiersBenchmark, *, sandboxes: Sandboxes | None = None
    ) -> VerifiersSuite:
        worker = _Worker(spec.name)
        answer = worker.call(
            {"op": "load", "spec": spec.model_dump(mode="json"), "env_path": spec.env_path}
        )
        if not answer.get("ok"):
            worker.close()
            _raise(answer.get("error") or {})
        items = [Item(**raw) for raw in answer["items"]]
        log.info("verifiers benchmark %s: %s api, %d items", spec.name, answer["api"], len(items))
        return cls(spec.name, items, str(answer["api"]), worker, dict(answer.get("roles") or {}))

    async def rollout(self, item: Item, index: int, client: Any) -> Outcome:
        e = client.endpoint
        endpoint = {"base_url": e.base_url, "model": e.model, "api_key": e.api_key}
        answer = await self.worker.request(
            {"op": "rollout", "item": item.id, "index": index, "endpoint": endpoint}
        )
        if not answer.get("ok"):
            _raise(answer.get("error") or {})
        return VerifiersOutcome(**answer["outcome"])

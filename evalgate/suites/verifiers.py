"""PrimeIntellect ``verifiers`` environments as gate benchmarks (kind ``verifiers``).

An environment is Python code — often the pull request's own — so it never runs in the gate's
process, which holds the GitHub token and decides the verdict. Each verifiers benchmark gets a
worker process (``python -P -m evalgate.suites._vf_worker``) that imports the environment from
the installed packages or from the benchmark's explicit ``env_path``, never from the working
directory (``-P``), with a cleared environment (what a program needs, plus the benchmark's
``pass_env``: never a token it did not declare) and no way to read the gate's (``repo_code``).
The gate sends it one request per (item, rollout) and gets back the outcome: the rewards are
still the environment's to compute (docs/threat-model.md), but nothing it does can reach the
gate's memory, token or verdict logic.

What runs inside the worker, and how each API generation is played, is in ``_vf_runner.py``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import importlib.machinery
import itertools
import json
import logging
import os
import site
import subprocess
import sys
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import evalgate
from evalgate._json import mapping
from evalgate._repo_code import repo_env
from evalgate.errors import ConfigError, InfraError
from evalgate.sandbox.worker import Jail, jail
from evalgate.score.base import JudgeFailed
from evalgate.score.relay import Grader
from evalgate.serve.client import RequestFailed
from evalgate.suites._vf_runner import CHAT_HARNESS_ID, VerifiersOutcome, module_name
from evalgate.suites.base import Item, Outcome, SuiteDefaults
from evalgate.suites.identity import digest, tree_digest

if TYPE_CHECKING:
    from evalgate.config.spec import VerifiersBenchmark
    from evalgate.sandbox import Sandboxes
    from evalgate.serve.client import ChatClient
    from evalgate.suites._vf_worker import Answer, Request, WorkerError

    # Who waits for an answer: a thread (loading), or a task on its event loop.
    _Waiter = (
        concurrent.futures.Future[Answer] | tuple[asyncio.AbstractEventLoop, asyncio.Future[Answer]]
    )

__all__ = [
    "CHAT_HARNESS_ID",
    "VerifiersOutcome",
    "VerifiersSuite",
    "env_source",
    "items_from_worker",
    "module_name",
    "worker_env",
]

log = logging.getLogger(__name__)


def worker_env(
    environ: dict[str, str] | None = None, declared: list[str] | tuple[str, ...] = ()
) -> dict[str, str]:
    """The worker's environment: cleared (``repo_code.repo_env``: what a program needs, and the
    variables the benchmark declares in ``pass_env``), with the folder this evalgate was imported
    from on PYTHONPATH (``-P`` drops the working directory, which is where a source checkout of
    evalgate would otherwise have been found)."""
    source = os.environ if environ is None else environ
    paths = [p for p in source.get("PYTHONPATH", "").split(os.pathsep) if p]
    root = str(Path(evalgate.__file__).resolve().parent.parent)
    pythonpath = os.pathsep.join([root, *(p for p in paths if p != root)])
    # No bytecode written: the environment's folder hashes the same before and after a run.
    runner = {"PYTHONPATH": pythonpath, "PYTHONDONTWRITEBYTECODE": "1"}
    return repo_env(declared, runner, environ=source)


def _stop(proc: subprocess.Popen[bytes], jailed: Jail) -> None:
    if proc.poll() is None:
        try:
            if proc.stdin is not None:
                proc.stdin.close()  # the worker exits at EOF
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
    jailed.end(proc.pid)  # what is left of its group (the jail's pid namespace is gone already)


class _Worker:
    """The worker process and its request/answer bookkeeping, usable from any event loop.

    It runs in a jail (``sandbox.worker``): no capabilities, read-only binds of this
    interpreter, evalgate and the ``env_path`` folder, a private home, and a pid namespace
    whose every process ends when the worker does."""

    def __init__(
        self, name: str, declared: list[str] | tuple[str, ...] = (), env_path: str | None = None
    ) -> None:
        self.name = name
        env = worker_env(declared=declared)
        user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else ""
        if user_site and os.path.isdir(user_site):
            # Packages installed with --user (an environment, verifiers itself): the jail's home
            # is not the runner's, so its user site is named, and bound read-only.
            env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), user_site) if p)
        reads = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        jailed = jail(
            [sys.executable, "-P", "-m", "evalgate.suites._vf_worker"],
            env=env,
            python=sys.executable,
            reads=[*reads, *([os.path.abspath(env_path)] if env_path else [])],
        )
        self.proc = subprocess.Popen(
            jailed.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=jailed.env,
            cwd=jailed.cwd,
            **jailed.options,
        )
        self._lock = threading.Lock()
        self._pending: dict[int, _Waiter] = {}
        self._ids = itertools.count(1)
        self._reader = threading.Thread(target=self._read, name=f"vf-worker-{name}", daemon=True)
        self._reader.start()
        self._finalizer = weakref.finalize(self, _stop, self.proc, jailed)

    def close(self) -> None:
        self._finalizer()

    def call(self, message: Request) -> Answer:
        """Send a request and block for its answer (loading, before any event loop runs)."""
        future: concurrent.futures.Future[Answer] = concurrent.futures.Future()
        self._send(message, future)
        return future.result()

    async def request(self, message: Request) -> Answer:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Answer] = loop.create_future()
        self._send(message, (loop, future))
        return await future

    def _send(self, message: Request, waiter: _Waiter) -> None:
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
            except OSError as exc:
                self._pending.pop(ident, None)
                raise InfraError(self._gone()) from exc

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
                answer: Answer = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                ident = answer.get("id")
                waiter = None if ident is None else self._pending.pop(ident, None)
            if waiter is not None:
                _deliver(waiter, answer)
        self.proc.wait()
        with self._lock:
            waiters, self._pending = list(self._pending.values()), {}
        for waiter in waiters:
            _deliver(waiter, {"ok": False, "error": {"type": "infra", "message": self._gone()}})


def _deliver(waiter: _Waiter, answer: Answer) -> None:
    if isinstance(waiter, concurrent.futures.Future):
        waiter.set_result(answer)
        return
    loop, future = waiter

    def settle() -> None:
        if not future.done():
            future.set_result(answer)

    with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
        loop.call_soon_threadsafe(settle)


def env_source(env_id: str, env_path: str | None) -> str:
    """A digest of the environment's code (its reward functions decide every score): the module
    file or package folder the worker will import, located without importing it. Empty when it
    cannot be found (the worker then reports why, in one line)."""
    name = module_name(env_id)
    found: Path | None = None
    if env_path:
        found = next(
            (p for p in (Path(env_path) / name, Path(env_path) / f"{name}.py") if p.exists()), None
        )
    elif name.isidentifier():
        # Located on the worker's path (this interpreter's, less the working directory, which
        # the worker's -P drops): PathFinder runs nothing, where find_spec("a.b") would import
        # "a" into the gate.
        cwd = os.getcwd()
        path = [p for p in sys.path if p and os.path.abspath(p) != cwd]
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            found = Path(next(iter(spec.submodule_search_locations)))
        elif spec is not None and spec.origin and Path(spec.origin).is_file():
            found = Path(spec.origin)
    if found is None:
        return ""
    return tree_digest(found) if found.is_dir() else digest(found.read_bytes())


def items_from_worker(raw: list[dict[str, object]], source: str = "") -> list[Item]:
    """The worker's items, with their exam digest derived here from each row's data (``info``,
    ``task``, the answer...: what the environment's reward functions read) and the
    environment's ``source`` (:func:`env_source`), never taken from the environment's process."""
    out = []
    for row in raw:
        fields = dict(mapping(row.get("fields")))
        group = row.get("group")
        out.append(
            Item(
                id=str(row["id"]),
                prompt=str(row["prompt"]),
                answer=str(row["answer"]),
                group=None if group is None else str(group),
                fields=fields,
                exam=digest({"row": fields, "source": source}) if fields or source else "",
            )
        )
    return out


def _raise(error: WorkerError) -> None:
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
    roles: dict[str, dict[str, str | None]] = field(default_factory=dict)
    judge: Grader | None = None  # ``judge:``: the environment's judges call it (the run binds it)
    # Of the rollouts planned (``plan``): how many ended, were played, asked the judge.
    _planned: int = 0
    _ended: int = 0
    _played: int = 0
    _judged: int = 0

    @classmethod
    def from_spec(
        cls, spec: VerifiersBenchmark, *, sandboxes: Sandboxes | None = None
    ) -> VerifiersSuite:
        source = env_source(spec.env_id, spec.env_path)  # before the worker could touch it
        worker = _Worker(spec.name, tuple(spec.pass_env), spec.env_path)
        answer = worker.call(
            {"op": "load", "spec": spec.model_dump(mode="json"), "env_path": spec.env_path}
        )
        if not answer.get("ok"):
            worker.close()
            _raise(answer.get("error") or {})
        items = items_from_worker(answer.get("items", []), source)
        log.info("verifiers benchmark %s: %s api, %d items", spec.name, answer["api"], len(items))
        judge = Grader(spec.judge) if spec.judge is not None else None
        roles = dict(answer.get("roles") or {})
        return cls(spec.name, items, str(answer["api"]), worker, roles, judge)

    def close(self) -> None:
        self.worker.close()  # the worker process: verifiers, the environment and its data

    def plan(self, pairs: list[tuple[Item, int]]) -> None:
        self._planned, self._ended, self._played, self._judged = len(pairs), 0, 0, 0

    def _count_judged(self, played: bool, judged: bool) -> None:
        """The last planned rollout ended, and not one played asked evalgate's judge: the
        environment grades some other way (its own client, a judge it builds itself) and its
        rewards, zeros where that failed, are not the exam's judge's. A config error, not a gate
        on them. Per run, not per rollout: a judge asked only on some answers is no error."""
        self._ended += 1
        self._played += played
        self._judged += judged
        last = self._planned > 0 and self._ended >= self._planned
        if last and self._played and not self._judged:
            raise ConfigError(
                f"benchmark {self.name!r}: `judge:` is set, but the environment never asked it "
                f"({self._played} rollouts played, evalgate's judge relay saw no call): its "
                "rewards come from elsewhere (a client of its own, or a judge it builds itself); "
                "grade with its JudgeRubric's judge_client / vf.Judge, or drop `judge:`"
            )

    async def rollout(self, item: Item, index: int, client: ChatClient) -> Outcome:
        e = client.endpoint
        request: Request = {
            "op": "rollout",
            "item": item.id,
            "index": index,
            "endpoint": {"base_url": e.base_url, "model": e.model, "api_key": e.api_key},
        }
        if self.judge is None:
            answer = await self.worker.request(request)
            if not answer.get("ok"):
                _raise(answer.get("error") or {})
            return VerifiersOutcome(**answer["outcome"])
        relay = self.judge.relay
        if relay is None:  # never the environment's default judge instead
            raise InfraError(f"benchmark {self.name!r}: the judge's relay is not running")
        tab = relay.open()  # this rollout's judge calls, counted by the relay
        try:
            answer = await self.worker.request({**request, "judge": relay.endpoint(tab)})
        finally:
            spent = relay.close(tab)
        judgement = spent.judgement(self.judge)
        self._count_judged(bool(answer.get("ok")), sum(spent.seen.values()) > 0)
        if spent.failed is not None:
            # The judge failed after evalgate's retries: an error of kind judge_*, even where
            # the environment caught it and scored 0.
            kind, detail = spent.failed
            outcome = answer.get("outcome")
            partial = {
                "completion": outcome["completion"] if outcome else None,
                "usage": outcome["usage"] if outcome else {},
                "judge": judgement,
            }
            raise JudgeFailed(f"judge_{kind}", detail, partial)
        if not answer.get("ok"):
            _raise(answer.get("error") or {})
        # The relay's count, not the environment's report.
        return dataclasses.replace(VerifiersOutcome(**answer["outcome"]), judge=judgement)

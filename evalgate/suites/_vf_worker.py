"""The process that hosts a verifiers environment: ``python -P -m evalgate.suites._vf_worker``.

One JSON object per line on stdin (requests) and on the original stdout (answers); the
environment's own prints go to stderr, so they cannot corrupt an answer line. ``-P`` keeps the
working directory (a pull request's checkout) off ``sys.path``; the environment is imported from
the installed packages, or from the one folder the benchmark names as ``env_path``.

Requests: ``{"id", "op": "load", "spec", "env_path"}`` answers the items; ``{"id", "op":
"rollout", "item", "index", "endpoint", "judge"}`` answers one outcome (``judge``: the rollout's
tab on the gate's judge relay, or null). An error answer carries ``type``:
``config`` (at load), ``request`` (the model endpoint failed: ``kind``) or ``infra``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import sys
import types
from typing import Any

from evalgate.errors import ConfigError, InfraError
from evalgate.serve.client import RequestFailed

__all__ = ["main"]


class _Answers:
    """Writes whole answer lines to the protocol descriptor (pipes may take a line in parts)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, default=str) + "\n").encode("utf-8")
        while data:
            data = data[os.write(self.fd, data) :]


def _error(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, ConfigError):
        return {"type": "config", "message": str(exc)}
    if isinstance(exc, RequestFailed):
        return {"type": "request", "kind": exc.kind, "message": str(exc)}
    if isinstance(exc, InfraError) and str(exc).startswith("vf_"):  # its kind is its prefix
        return {"type": "infra", "message": str(exc)[:500]}
    return {"type": "infra", "message": f"{type(exc).__name__}: {exc}"[:500]}


class _Worker:
    def __init__(self, answers: _Answers) -> None:
        self.answers = answers
        self.runner: Any = None
        self.items: dict[str, Any] = {}

    def load(self, request: dict[str, Any]) -> dict[str, Any]:
        from evalgate.config.spec import VerifiersBenchmark
        from evalgate.suites import _vf_runner

        if request.get("env_path"):
            sys.path.insert(0, str(request["env_path"]))
        spec = VerifiersBenchmark.model_validate(request["spec"])
        api, self.runner = _vf_runner.load_runner(spec)
        self.items = {item.id: item for item in self.runner.items}
        return {
            "api": api,
            "items": [dataclasses.asdict(item) for item in self.runner.items],
            "roles": _vf_runner.roles(self.runner),
        }

    async def rollout(self, request: dict[str, Any]) -> dict[str, Any]:
        from evalgate.serve.base import Endpoint

        endpoint = Endpoint(**request["endpoint"])
        # The judge's relay endpoint for this rollout (``judge:`` set), else None.
        client = types.SimpleNamespace(endpoint=endpoint, judge=request.get("judge"))
        item = self.items[request["item"]]
        outcome = await self.runner.rollout(item, int(request["index"]), client)
        return {"outcome": dataclasses.asdict(outcome)}

    async def handle(self, request: dict[str, Any]) -> None:
        answer: dict[str, Any] = {"id": request.get("id")}
        try:
            if request.get("op") == "load":
                answer |= {"ok": True, **self.load(request)}
            else:
                answer |= {"ok": True, **(await self.rollout(request))}
        except Exception as exc:  # every failure is an answer; the gate decides what it means
            answer |= {"ok": False, "error": _error(exc)}
        self.answers.send(answer)


async def _serve(worker: _Worker) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    tasks: set[asyncio.Task[None]] = set()
    while line := await reader.readline():  # EOF: the gate closed the pipe, or died
        request = json.loads(line)
        if request.get("op") == "load":
            await worker.handle(request)  # before any rollout, and one at a time
            continue
        task = loop.create_task(worker.handle(request))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    for task in tasks:
        task.cancel()


def main() -> None:
    # The answers go to a private copy of stdout; fd 1 becomes stderr, so whatever the
    # environment prints cannot corrupt the protocol. (Forging an answer on purpose buys it
    # nothing: it computes the rewards anyway — see docs/threat-model.md.)
    answers = _Answers(os.dup(1))
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C reaches the whole process group
        asyncio.run(_serve(_Worker(answers)))


if __name__ == "__main__":
    main()

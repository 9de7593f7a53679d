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
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, Protocol, TypedDict

from evalgate.errors import ConfigError, InfraError
from evalgate.serve.client import RequestFailed

if TYPE_CHECKING:
    from evalgate.suites._vf_runner import WorkerClient
    from evalgate.suites.base import Item, Outcome

__all__ = ["Answer", "EndpointWire", "OutcomeWire", "Request", "WorkerError", "main"]


class EndpointWire(TypedDict):
    """The model endpoint of a rollout, as :class:`~evalgate.serve.base.Endpoint` fields."""

    base_url: str
    model: str
    api_key: str | None


class Request(TypedDict, total=False):
    id: int
    op: Literal["load", "rollout"]
    spec: dict[str, object]  # load: the VerifiersBenchmark, as JSON
    env_path: str | None  # load: the one folder the environment is imported from
    item: str  # rollout: the item's id
    index: int  # rollout: which of its rollouts
    endpoint: EndpointWire  # rollout
    judge: Mapping[str, object] | None  # rollout: its tab on the gate's judge relay


class WorkerError(TypedDict, total=False):
    type: Literal["config", "request", "infra"]
    message: str
    kind: str  # request: RequestFailed's kind


class OutcomeWire(TypedDict):
    """An outcome's fields (``VerifiersOutcome``), as ``dataclasses.asdict`` writes them."""

    prompt: list[dict[str, str]]
    completion: str
    reward: float
    metrics: dict[str, float]
    usage: dict[str, int]
    timing: dict[str, float]
    reason: str | None
    cost_usd: float | None
    judge: Mapping[str, object] | None


class Answer(TypedDict, total=False):
    id: int | None
    ok: bool
    error: WorkerError  # not ok
    api: str  # load: "v1" or "legacy"
    items: list[dict[str, object]]  # load: each Item's fields
    roles: dict[str, dict[str, str | None]]  # load: where each v1 seat runs
    outcome: OutcomeWire  # rollout


class _Runner(Protocol):
    """A loaded environment (``_vf_runner``'s v1 or ``_vf_legacy``'s Legacy)."""

    items: list[Item]

    async def rollout(self, item: Item, index: int, client: WorkerClient) -> Outcome: ...


class _Answers:
    """Writes whole answer lines to the protocol descriptor (pipes may take a line in parts)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, message: Answer) -> None:
        data = (json.dumps(message, default=str) + "\n").encode("utf-8")
        while data:
            data = data[os.write(self.fd, data) :]


def _error(exc: BaseException) -> WorkerError:
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
        self.runner: _Runner | None = None
        self.items: dict[str, Item] = {}

    def load(self, request: Request) -> Answer:
        from evalgate.config.spec import VerifiersBenchmark
        from evalgate.suites import _vf_runner

        if request.get("env_path"):
            sys.path.insert(0, str(request["env_path"]))
        spec = VerifiersBenchmark.model_validate(request["spec"])
        api, runner = _vf_runner.load_runner(spec)
        self.runner, self.items = runner, {item.id: item for item in runner.items}
        return {
            "ok": True,
            "api": api,
            "items": [dataclasses.asdict(item) for item in runner.items],
            "roles": _vf_runner.roles(runner),
        }

    async def rollout(self, request: Request) -> Answer:
        from evalgate.serve.base import Endpoint
        from evalgate.suites._vf_runner import WorkerClient

        if self.runner is None:
            raise InfraError("vf_worker: a rollout before the environment was loaded")
        # The judge's relay endpoint for this rollout (``judge:`` set), else None.
        client = WorkerClient(Endpoint(**request["endpoint"]), request.get("judge"))
        item = self.items[request["item"]]
        outcome = await self.runner.rollout(item, int(request["index"]), client)
        wire: OutcomeWire = {
            "prompt": outcome.prompt,
            "completion": outcome.completion,
            "reward": outcome.reward,
            "metrics": outcome.metrics,
            "usage": outcome.usage,
            "timing": outcome.timing,
            "reason": outcome.reason,
            "cost_usd": outcome.cost_usd,
            "judge": outcome.judge,
        }
        return {"ok": True, "outcome": wire}

    async def handle(self, request: Request) -> None:
        try:
            if request.get("op") == "load":
                answer = self.load(request)
            else:
                answer = await self.rollout(request)
        except Exception as exc:  # every failure is an answer; the gate decides what it means
            answer = {"ok": False, "error": _error(exc)}
        self.answers.send({"id": request.get("id"), **answer})


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

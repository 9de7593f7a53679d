"""The legacy verifiers API inside the worker (``load_environment(env_id, **env_args)``)."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib
import inspect
import json
import types
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from evalgate._json import integer, items, mapping
from evalgate.errors import ConfigError, InfraError
from evalgate.score import vf_judge as _vf_judge
from evalgate.serve.client import RequestFailed
from evalgate.suites._vf_runner import (
    _STATUS,
    VerifiersOutcome,
    WorkerClient,
    _as_dict,
    _digest,
    _legacy_sampling,
    _text,
    _unique_ids,
)
from evalgate.suites.base import Item, Outcome

if TYPE_CHECKING:
    from evalgate.config.spec import VerifiersBenchmark

__all__ = ["Legacy"]

# What the current rollout's reward functions raised. verifiers' Rubric logs an exception and
# scores the function 0, which would read as a wrong answer: the rollout errors instead.
_RAISED: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "evalgate_reward_raised", default=None
)


def _raised(func: object, exc: Exception) -> None:
    seen = _RAISED.get()
    if seen is not None:
        name = getattr(func, "__name__", type(func).__name__)
        seen.append(f"{name}: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")


def _watched(func: Callable[..., object]) -> Callable[..., object]:
    """``func``, noting what it raises for the rollout (then raising it as before). The
    signature is ``func``'s (``functools.wraps``: verifiers reads it to pass arguments)."""
    if getattr(func, "evalgate_watched", False):
        return func
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def watched_async(*args: object, **kwargs: object) -> object:
            try:
                result = func(*args, **kwargs)
                return await result if inspect.isawaitable(result) else result
            except Exception as exc:
                _raised(func, exc)
                raise

        watched: Callable[..., object] = watched_async
    else:

        @functools.wraps(func)
        def watched_sync(*args: object, **kwargs: object) -> object:
            try:
                return func(*args, **kwargs)
            except Exception as exc:
                _raised(func, exc)
                raise

        watched = watched_sync
    watched.evalgate_watched = True  # type: ignore[attr-defined]
    return watched


def _watch_reward_funcs(env: object) -> None:
    """Wrap every reward function of the environment's rubric tree (:func:`_watched`)."""
    for rubric in _vf_judge.rubrics(getattr(env, "rubric", None)):
        funcs = getattr(rubric, "funcs", None)
        if isinstance(funcs, list):
            rubric.funcs = [_watched(f) for f in funcs]


def _legacy_api() -> types.ModuleType:
    """The classic surface: ``verifiers.legacy`` (0.3.x) or the package root (earlier)."""
    try:
        return importlib.import_module("verifiers.legacy")
    except ModuleNotFoundError:
        pass
    root = importlib.import_module("verifiers")
    if not callable(getattr(root, "load_environment", None)):
        raise ConfigError(
            f"verifiers {getattr(root, '__version__', '?')} has no legacy API "
            "(`load_environment`); legacy environments need verifiers<=0.3.1"
        )
    return root


class Legacy:
    """``load_environment(env_id, **env_args)``; one ``run_rollout`` per (item, rollout)."""

    def __init__(self, spec: VerifiersBenchmark) -> None:
        self.spec = spec
        try:
            vf = _legacy_api()
            self.env = vf.load_environment(spec.env_id, **spec.env_args)
            n = spec.eval.num_examples or -1
            rows = list(self.env.get_eval_dataset(n=n))
        except (ConfigError, InfraError):
            raise
        except Exception as exc:
            raise ConfigError(
                f"benchmark {spec.name!r}: loading environment {spec.env_id!r}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if not callable(getattr(self.env, "run_rollout", None)):
            raise ConfigError(
                f"benchmark {spec.name!r}: this verifiers has no per-rollout "
                "`Environment.run_rollout`; use verifiers>=0.3.0"
            )
        self._vf = vf
        self._input_keys = _rollout_input_keys(vf)
        _watch_reward_funcs(self.env)
        self.group = bool(getattr(self.env, "requires_group_rollouts", False))
        ids = _unique_ids([self._item_id(r) for r in rows])
        self.rows = dict(zip(ids, rows, strict=True))
        self.items = [self._item(i, r) for i, r in zip(ids, rows, strict=True)]
        self._client: object = None  # the SDK client, in 0.3.x wrapped in verifiers' adapter
        self._client_key: tuple[asyncio.AbstractEventLoop, str, str | None] | None = None
        self._closer: asyncio.Task[None] | None = None
        self._groups: dict[str, asyncio.Future[list[object]]] = {}

    @staticmethod
    def _item_id(row: Mapping[str, object]) -> str:
        # `example_id` is the row position unless the dataset supplied ids: a string one is
        # renamed `src_id` by Environment._format_dataset. Positions shift when rows change, so
        # without an explicit id the content of the prompt and answer is the identity.
        info = mapping(row.get("info"))
        for value in (row.get("id"), row.get("src_id"), info.get("id")):
            if value is not None and value != "":
                return str(value)
        return f"h{_digest([row.get('prompt'), row.get('answer')])}"

    @staticmethod
    def _item(item_id: str, row: Mapping[str, object]) -> Item:
        prompt = row.get("prompt")
        text = (
            prompt
            if isinstance(prompt, str)
            else "\n\n".join(
                _as_dict(m)["content"] for m in items(prompt) if _as_dict(m)["role"] != "system"
            )
        )
        fields = {k: v for k, v in row.items() if k not in ("prompt", "answer")}
        return Item(
            id=item_id,
            prompt=text,
            answer=str(row.get("answer") or ""),
            group=None,
            fields=json.loads(json.dumps(fields, default=str)),
        )

    def _vf_client(self, client: WorkerClient) -> object:
        # One SDK client per event loop and endpoint: the pipeline runs each model's benchmarks
        # in a fresh asyncio.run, and an httpx client cannot outlive its loop.
        endpoint = client.endpoint
        key = (asyncio.get_running_loop(), endpoint.base_url, endpoint.api_key)
        if self._client_key != key:
            import openai

            oai = openai.AsyncOpenAI(
                base_url=endpoint.base_url,
                api_key=endpoint.api_key or "EMPTY",
                max_retries=self.spec.eval.max_retries,
                timeout=self.spec.eval.request_timeout_s,
            )
            # 0.3.x wraps the SDK client in its own adapter; earlier releases take it as is.
            try:
                clients = importlib.import_module(f"{self._vf.__name__}.clients")
            except ModuleNotFoundError:
                clients = None
            wrap = getattr(clients, "OpenAIChatCompletionsClient", None)
            self._client = wrap(oai) if wrap is not None else oai
            self._client_key = key
            self._groups = {}
            # Closed inside its loop: asyncio.run cancels this task at loop end and waits for it
            # (a client collected after its loop closed raises "Event loop is closed").
            self._closer = asyncio.get_running_loop().create_task(_close_at_loop_end(oai))
        return self._client

    async def rollout(self, item: Item, index: int, client: WorkerClient) -> Outcome:
        model = client.endpoint.model
        vf_client = self._vf_client(client)
        judged = _vf_judge.CURRENT.set(client.judge)  # see _vf_judge
        raised: list[str] = []
        watching = _RAISED.set(raised)
        try:
            if self.group:
                out = (await self._group(item, vf_client, model))[index]
            else:
                out = await self.env.run_rollout(
                    self._input(item.id), vf_client, model, _legacy_sampling(self.spec, index)
                )
        except (RequestFailed, InfraError):
            raise
        except Exception as exc:
            raise _legacy_exception(exc) from exc
        finally:
            _vf_judge.CURRENT.reset(judged)
            _RAISED.reset(watching)
        if raised:  # (a group's rollouts: noted for the rollout that ran the group)
            raise InfraError(f"vf_reward_error: {raised[0]}")
        return _output_outcome(mapping(out))  # a RolloutOutput (a TypedDict in 0.3.x)

    def _input(self, item_id: str) -> dict[str, object]:
        """The row as vf-eval hands it to the environment: its env server sends a rollout's
        input as the ``RolloutInput`` it declares (prompt, example_id, answer, info), so a
        dataset's other columns, a plain-string ``task`` route among them (TruthfulQA's
        ``task: "truthfulqa"``, which ``run_rollout`` refuses as it is), never reach it."""
        row = self.rows[item_id]
        if self._input_keys is None:  # a release without the type: the row as it is
            return dict(row)
        return {k: v for k, v in row.items() if k in self._input_keys}

    async def _group(self, item: Item, vf_client: object, model: str) -> list[object]:
        # Group rewards score the k rollouts of an item together: the first of its pairs runs
        # the whole group, the others take their index from the same result.
        fut = self._groups.get(item.id)  # reset with the client: per loop and endpoint
        if fut is None:
            fut = self._groups[item.id] = asyncio.ensure_future(
                self.env.run_group(
                    [self._input(item.id) for _ in range(self.spec.eval.rollouts)],
                    vf_client,
                    model,
                    # One sampling for the whole group: no seed, or its k rollouts would be
                    # the same completion at temperature > 0.
                    {k: v for k, v in _legacy_sampling(self.spec, 0).items() if k != "seed"},
                )
            )
        return await asyncio.shield(fut)


def _rollout_input_keys(vf: types.ModuleType) -> frozenset[str] | None:
    """The fields of the API's ``RolloutInput`` (a TypedDict), or None where it has none."""
    try:
        declared = importlib.import_module(f"{vf.__name__}.types").RolloutInput
    except (ModuleNotFoundError, AttributeError):
        return None
    keys = getattr(declared, "__required_keys__", frozenset()) | getattr(
        declared, "__optional_keys__", frozenset()
    )
    return frozenset(keys) or None


class _Closable(Protocol):
    async def close(self) -> None: ...


async def _close_at_loop_end(sdk_client: _Closable) -> None:
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:  # the loop ends (asyncio.run cancels its tasks): close here
        await sdk_client.close()
        raise
    # Anything else (the coroutine closed by the garbage collector after its loop ended without
    # cancelling it) must not close the client: that would run its transport's cleanup inside
    # whatever task is current then, another model's rollout, and break its cancel scopes.


def _legacy_exception(exc: Exception) -> Exception:
    status = getattr(exc, "status_code", None)
    if status is not None:
        return RequestFailed(f"http_{status}", str(exc)[:300])
    name = type(exc).__name__
    if "Timeout" in name:
        return RequestFailed("timeout", str(exc)[:300])
    if "Connection" in name:
        return RequestFailed("connection", str(exc)[:300])
    return InfraError(f"vf_{name}: {' '.join(str(exc).split())[:300]}")


def _float(value: object) -> float:
    """A score from the rollout's output: a number (or its text), as ``float`` takes it."""
    if isinstance(value, int | float | str):
        return float(value)
    raise TypeError(f"a score is a number, not {type(value).__name__}")


def _output_outcome(out: Mapping[str, object]) -> VerifiersOutcome:
    error = out.get("error")
    if isinstance(error, dict) and error.get("error") == "EmptyModelResponseError":
        # An empty reply is a wrong answer scored 0, as in the v1 API, not an infrastructure error.
        out, error = {**out, "error": None, "completion": "", "reward": 0.0}, None
    if error:
        if isinstance(error, dict):  # ErrorData: error, message, error_chain_repr/_str
            kind = str(error.get("error") or "error")
            detail = str(error.get("error_chain_str") or error.get("message") or error)
            chain = str(error.get("error_chain_repr") or "")
        else:
            kind, detail, chain = type(error).__name__, str(error), repr(error)
        detail = " ".join(detail.split())[:300]
        # The SDK's status error is at the end of the chain: "BadRequestError('Error code: 400')".
        if status := _STATUS.search(chain):
            raise RequestFailed(f"http_{status.group(1)}", detail)
        raise InfraError(f"vf_{kind}: {detail}")
    completion = out.get("completion")
    if isinstance(completion, list):
        replies = [_as_dict(m) for m in completion]
        reply = next((m["content"] for m in reversed(replies) if m["role"] == "assistant"), "")
    else:
        reply = _text(completion)
    prompt = out.get("prompt")
    prompt_msgs = (
        [{"role": "user", "content": prompt}]
        if isinstance(prompt, str)
        else [_as_dict(m) for m in items(prompt)]
    )
    metrics = {k: _float(v) for k, v in mapping(out.get("metrics")).items() if v is not None}
    reward = _float(out.get("reward") or 0.0)
    metrics["reward"] = reward
    tokens = mapping(out.get("token_usage"))
    timing_raw = mapping(out.get("timing"))
    # RolloutTiming: setup / generation / scoring / model spans, each with a duration.
    timing = {
        f"{k}_s": round(float(v["duration"]), 4)
        for k, v in timing_raw.items()
        if isinstance(v, dict) and isinstance(v.get("duration"), int | float)
    }
    return VerifiersOutcome(
        prompt=prompt_msgs,
        completion=reply,
        reward=reward,
        metrics=metrics,
        usage={
            "prompt_tokens": integer(tokens.get("input_tokens")),
            "completion_tokens": integer(tokens.get("output_tokens")),
        },
        timing=timing,
    )

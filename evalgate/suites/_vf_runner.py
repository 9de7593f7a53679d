"""The verifiers side of ``kind: verifiers``: runs only inside the worker process.

Everything here imports verifiers and the environment's own code (an installed package, or a
module under the benchmark's ``env_path``): code a pull request can change. It never runs in the
gate's process, which holds the GitHub token and decides the verdict; ``_vf_worker.py`` hosts it
and ``verifiers.py`` talks to that worker (see there for the protocol and the threat model).

Both API generations, one rollout at a time so the engine's journal, resume, concurrency and
error accounting apply unchanged:

- **v1** (``verifiers.v1``, verifiers ≥ 0.3.1; the only API of 0.4.x): the env id names an
  installed taskset package. evalgate builds the env with ``utils.loaders.load_environment`` and
  plays each (item, rollout) pair as one ``Env.run_slot`` episode; it never calls the CLI's
  ``run_eval``, whose ``EvalConfig.push`` defaults to uploading the run. Each role runs on the
  runtime chosen in evals.yaml (``subprocess`` by default, not verifiers' remote ``prime``
  default), and a taskset that ships no harness gets evalgate's in-process chat harness instead of
  verifiers' ``bash`` default, which installs its program with ``uv`` at rollout time.
- **legacy** (``load_environment(env_id, **env_args)``; ``verifiers.legacy`` in 0.3.x, the package
  root before): each pair is one ``Environment.run_rollout``; an environment with group rewards
  runs each item's k rollouts as one ``run_group``.

A failed episode (``ok=False``, an error, a timeout) is raised as an error, never scored as 0.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import itertools
import json
import logging
import os
import re
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from evalgate.errors import ConfigError, InfraError
from evalgate.score import vf_judge as _vf_judge
from evalgate.serve.client import RequestFailed
from evalgate.suites.base import Item, Outcome

if TYPE_CHECKING:
    from evalgate.config.spec import VerifiersBenchmark
    from evalgate.serve.base import Endpoint
    from evalgate.suites._vf_legacy import Legacy

__all__ = ["CHAT_HARNESS_ID", "VerifiersOutcome", "WorkerClient", "load_runner", "module_name"]

log = logging.getLogger(__name__)

CHAT_HARNESS_ID = "evalgate-chat"
# verifiers resolves a harness id by importing a top-level module of that name (a dotted path
# cannot resolve: ``loaders._import_plugin`` probes ``verifiers.v1.harnesses.<id>`` first), so the
# chat harness is registered under this module name when the v1 path is first used.
_CHAT_MODULE = CHAT_HARNESS_ID.replace("-", "_")
# v1 clients read the API key from a named environment variable, never from the config.
_KEY_VAR = "EVALGATE_VERIFIERS_API_KEY"
_RUNTIMES = {"subprocess", "docker", "modal"}
_STATUS = re.compile(r"Error code: (\d{3})")


@dataclass(frozen=True)
class WorkerClient:
    """What a rollout in the worker is given: the model's endpoint, and its tab on the gate's
    judge relay (``judge:`` set; :mod:`evalgate.score.vf_judge` routes the judges there)."""

    endpoint: Endpoint
    judge: Mapping[str, object] | None = None


@dataclass(frozen=True)
class VerifiersOutcome(Outcome):
    """An :class:`Outcome` plus verifiers' own stage timing (seconds), for the journal."""

    timing: dict[str, float] = field(default_factory=dict)


def module_name(env_id: str) -> str:
    """The importable module of an env id: hub ``owner/name@version`` → ``name`` (dashes → _)."""
    return env_id.rsplit("/", 1)[-1].split("@", 1)[0].replace("-", "_").lower()


def _digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _unique_ids(ids: list[str]) -> list[str]:
    # Identical rows (same content hash) still need distinct ids for pairing; suffixes follow
    # dataset order, so they are stable across runs too.
    seen: dict[str, int] = {}
    out = []
    for raw in ids:
        seen[raw] = seen.get(raw, 0) + 1
        out.append(raw if seen[raw] == 1 else f"{raw}#{seen[raw]}")
    return out


def _text(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(
            p.get("text", "") if isinstance(p, dict) else getattr(p, "text", "") or ""
            for p in content
        )
    return str(content)


def _as_dict(message: object) -> dict[str, str]:
    if isinstance(message, dict):
        return {"role": str(message.get("role", "")), "content": _text(message.get("content"))}
    role, content = getattr(message, "role", ""), getattr(message, "content", None)
    return {"role": str(role), "content": _text(content)}


def _pick_api(spec: VerifiersBenchmark) -> str:
    """``v1`` or ``legacy``: what the environment module provides, for ``api: auto``."""
    if spec.api != "auto":
        return spec.api
    name = module_name(spec.env_id)
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and name.startswith(exc.name):
            raise ConfigError(
                f"benchmark {spec.name!r}: verifiers environment {spec.env_id!r} is not "
                f"installed (no module {name!r}); install its package (see docs/verifiers.md)"
            ) from None
        raise ConfigError(
            f"benchmark {spec.name!r}: environment {spec.env_id!r} needs {exc.name!r}, "
            "which is not installed"
        ) from exc
    if _exports_taskset(module):
        return "v1"
    if callable(getattr(module, "load_environment", None)):
        return "legacy"
    raise ConfigError(
        f"benchmark {spec.name!r}: module {name!r} exports neither a verifiers v1 Taskset in "
        "`__all__` nor a `load_environment` function"
    )


def _exports_taskset(module: types.ModuleType) -> bool:
    names = getattr(module, "__all__", None) or []
    try:
        from verifiers.v1 import Taskset
    except ImportError:  # verifiers without the v1 API: only the legacy path can apply
        return False
    return any(
        isinstance(obj := getattr(module, n, None), type) and issubclass(obj, Taskset)
        for n in names
    )


def _sampling(spec: VerifiersBenchmark, index: int) -> dict[str, object]:
    s = spec.sampling
    out: dict[str, object] = {
        "temperature": s.temperature,
        "top_p": s.top_p,
        "max_tokens": s.max_tokens,
    }
    if s.seed is not None:
        out["seed"] = s.seed + index  # rollout r gets seed + r, as on every other kind
    return out


def _legacy_sampling(spec: VerifiersBenchmark, index: int) -> dict[str, object]:
    out = _sampling(spec, index)
    # The 0.3.x chat client renames max_tokens to max_completion_tokens, which llama.cpp's
    # server ignores (replies ran past the cap); extra_body puts max_tokens back in the body,
    # as evalgate's own client sends it.
    out["extra_body"] = {"max_tokens": out["max_tokens"]}
    return out


# ------------------------------------------------------------------------------------------
# v1


def _chat_harness_module() -> types.ModuleType:
    """The in-process chat harness, registered as an importable module (built once)."""
    existing = sys.modules.get(_CHAT_MODULE)
    if existing is not None:
        return existing
    import verifiers.v1 as vf
    from pydantic import Field
    from verifiers.v1.dialects.chat import message_to_wire

    from evalgate.serve.base import Endpoint
    from evalgate.serve.client import ChatClient

    class ChatHarnessConfig(vf.HarnessConfig):
        max_retries: int = Field(4, ge=0)
        """Retries per model call on 429, 5xx, connection errors and timeouts."""
        timeout_s: float = Field(120.0, gt=0)
        """Per-request timeout in seconds."""

    class ChatHarness(vf.Harness[ChatHarnessConfig]):
        """One chat completion per segment, in process, through the rollout's interception.

        verifiers' own tool-less loop (``null``) runs a PEP 723 script that ``uv`` resolves
        from the package index at rollout time; a gate must not depend on that. The harness
        contract allows an in-process loop as long as every model call goes through the
        interception ``endpoint`` + ``secret`` (``Harness.launch`` docstring), which records
        the call on the trace and applies the run's model and sampling.
        """

        APPENDS_SYSTEM_PROMPT = True
        SUPPORTS_RESUME = True  # stateless: a resumed segment replays the conversation
        EXECUTES_CODE = False
        NEEDS_CONTAINER = False

        async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, **_):
            system, prompt = self.resolve_prompt(data)
            messages = [{"role": "system", "content": system}] if system else []
            if isinstance(prompt, str):
                messages.append({"role": "user", "content": prompt})
            else:
                messages.extend(message_to_wire(m) for m in prompt or [])
            s = ctx.sampling
            sampling = types.SimpleNamespace(
                temperature=s.temperature if s.temperature is not None else 0.0,
                top_p=s.top_p if s.top_p is not None else 1.0,
                max_tokens=s.max_tokens or 256,
                seed=getattr(s, "seed", None),
            )
            client = ChatClient(
                Endpoint(base_url=endpoint.rstrip("/"), model=ctx.model, api_key=secret),
                sampling,
                timeout_s=self.config.timeout_s,
                max_retries=self.config.max_retries,
                max_concurrent=1,
                # The environment scores what the model said, an empty reply included (as
                # verifiers' own client does): its rubric, not the transport, decides.
                allow_empty=True,
            )
            async with client:
                await client.chat(messages)  # the interception records it on the trace
            return vf.ProgramResult(exit_code=0, stdout="", stderr="")

    module = types.ModuleType(_CHAT_MODULE, "evalgate's in-process chat harness for verifiers")
    vars(module).update(
        ChatHarness=ChatHarness,
        ChatHarnessConfig=ChatHarnessConfig,
        __all__=["ChatHarness", "ChatHarnessConfig"],
    )
    sys.modules[_CHAT_MODULE] = module
    return module


def _v1_env_config(spec: VerifiersBenchmark) -> object:
    from verifiers.v1.configs.agent import AgentConfig
    from verifiers.v1.utils.loaders import default_harness_id, env_config_type, resolve_env_config

    _chat_harness_module()
    if spec.runtime not in _RUNTIMES:
        raise ConfigError(f"benchmark {spec.name!r}: runtime {spec.runtime!r} is not supported")
    cls = env_config_type(spec.env_id)
    roles = [name for name, f in cls.model_fields.items() if isinstance(f.default, AgentConfig)]
    harness_id = spec.harness
    if harness_id is None and default_harness_id(spec.env_id) == "bash":
        harness_id = CHAT_HARNESS_ID  # the taskset ships no harness of its own
    harness: dict[str, object] | None = None
    if harness_id is not None:
        harness = {"id": harness_id}
        if harness_id == CHAT_HARNESS_ID:
            harness |= {
                "max_retries": spec.eval.max_retries,
                "timeout_s": spec.eval.request_timeout_s,
            }
    data: dict[str, object] = {"taskset": {**spec.env_args, "id": spec.env_id}}
    for role in roles:
        # Every seat runs where evals.yaml says: AgentConfig.runtime defaults to PrimeConfig,
        # a remote sandbox service.
        seat: dict[str, object] = {"runtime": {"type": spec.runtime}}
        pinned = cls.model_fields[role].default.harness
        if harness is not None and (spec.harness is not None or pinned is None):
            seat["harness"] = dict(harness)
        data[role] = seat
    return resolve_env_config(data)


class _TaskData(Protocol):
    """What an item is made of in a v1 task's data (verifiers' TaskData, a pydantic model)."""

    @property
    def prompt_text(self) -> str: ...
    def model_dump(
        self, *, mode: str, exclude_none: bool, exclude: set[str]
    ) -> dict[str, object]: ...


class _Task(Protocol):
    """A v1 taskset's task: its key and its data."""

    @property
    def key(self) -> str: ...
    @property
    def data(self) -> _TaskData: ...


class _V1:
    """An env built once; episodes played per rollout inside one ``Env.serving()`` per loop."""

    def __init__(self, spec: VerifiersBenchmark) -> None:
        from verifiers.v1.utils.loaders import load_environment

        self.spec = spec
        try:
            self.env = load_environment(_v1_env_config(spec))
            taskset = self.env.taskset
            n = spec.eval.num_examples
            if n is None and not getattr(taskset, "bounded", True):
                raise ConfigError(
                    f"benchmark {spec.name!r}: taskset {spec.env_id!r} is infinite; "
                    "set eval.num_examples"
                )
            # The first N in load() order (Taskset.take; 0.3.x's v1 has no views).
            tasks = list(taskset if n is None else itertools.islice(taskset, n))
        except (ConfigError, InfraError):
            raise
        except Exception as exc:  # a broken taskset is a configuration problem, caught early
            raise ConfigError(
                f"benchmark {spec.name!r}: loading taskset {spec.env_id!r}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        ids = _unique_ids([self._item_id(t) for t in tasks])
        self.tasks = dict(zip(ids, tasks, strict=True))
        self.items = [self._item(i, t) for i, t in zip(ids, tasks, strict=True)]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: asyncio.Future[None] | None = None
        self._keeper: asyncio.Task[None] | None = None

    @staticmethod
    def _item_id(task: _Task) -> str:
        data = task.data
        if ident := getattr(data, "id", None):  # TaskData.id: verifiers >= 0.4
            return str(ident)
        # Content hash without `idx` (the position in load(), which Task.hash includes): the
        # same row keeps its id when rows before it are added or removed.
        wire = data.model_dump(mode="json", exclude_none=True, exclude={"idx"})
        return f"h{_digest(wire)}"

    @staticmethod
    def _item(item_id: str, task: _Task) -> Item:
        data = task.data
        answer = getattr(data, "answer", None)
        extra = data.model_dump(mode="json", exclude_none=True, exclude={"idx", "prompt"})
        return Item(
            id=item_id,
            prompt=data.prompt_text,
            answer="" if answer is None else str(answer),
            group=None,
            fields={"task_key": task.key, **extra},
        )

    def _serving(self) -> asyncio.Future[None]:
        # One serving context (shared tool servers, the interception pool) per event loop: the
        # pipeline runs each benchmark in its own asyncio.run. The keeper task is cancelled by
        # asyncio.run at loop end, which unwinds serving() inside the loop.
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._ready is None:
            self._loop = loop
            self._ready = loop.create_future()
            # Held here: the loop keeps only a weak reference to a task.
            self._keeper = loop.create_task(
                self._keep(self._ready), name=f"verifiers-serving-{self.spec.name}"
            )
        return self._ready

    async def _keep(self, ready: asyncio.Future[None]) -> None:
        try:
            async with self.env.serving():
                ready.set_result(None)
                await asyncio.Event().wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(InfraError(f"vf_serving: {type(exc).__name__}: {exc}"))

    async def rollout(self, item: Item, index: int, client: WorkerClient) -> Outcome:
        from verifiers.v1 import EvalClientConfig, ModelContext, SamplingConfig
        from verifiers.v1.env import RunSlot

        await asyncio.shield(self._serving())
        endpoint = client.endpoint
        os.environ[_KEY_VAR] = endpoint.api_key or "EMPTY"
        ctx = ModelContext(
            model=endpoint.model,
            client=EvalClientConfig(base_url=endpoint.base_url, api_key_var=_KEY_VAR),
            sampling=SamplingConfig(**_sampling(self.spec, index)),
        )
        judged = _vf_judge.CURRENT.set(client.judge)
        try:
            episode = await self.env.run_slot(RunSlot(self.tasks[item.id]), ctx)
        except Exception as exc:
            raise InfraError(f"vf_{type(exc).__name__}: {exc}") from exc
        finally:
            _vf_judge.CURRENT.reset(judged)
        return _episode_outcome(episode)


def _episode_error(episode: Any) -> Exception | None:  # verifiers' Episode
    errors = [*episode.errors, *(e for t in episode.traces for e in t.errors)]
    # `is_timeout` is 0.4.x; 0.3.x records a timeout as an error.
    if getattr(episode, "is_timeout", False) or any(
        getattr(t, "is_timeout", False) for t in episode.traces
    ):
        return RequestFailed("timeout", "a verifiers stage deadline expired")
    if episode.ok and not errors:
        return None
    if not errors:
        return InfraError("vf_not_ok: episode finished with ok=False and no error recorded")
    err = errors[-1]
    message = " ".join(err.message.split())[:300]
    if err.status_code is not None:  # the model endpoint answered with an error
        return RequestFailed(f"http_{err.status_code}", message)
    return InfraError(f"vf_{err.type}: {message}")


def _episode_outcome(episode: Any) -> VerifiersOutcome:
    error = _episode_error(episode)
    if error is not None:
        raise error
    traces = [t for t in episode.traces if t.agent.trainable] or list(episode.traces)
    if any(r is None for t in traces for r in t.rewards.values()):
        raise InfraError("vf_unscored: a reward function did not run")
    reward = sum(t.reward for t in traces) / len(traces)
    named = len({t.agent.name for t in episode.traces}) > 1
    metrics: dict[str, float] = {}
    for t in episode.traces:
        prefix = f"{t.agent.name}/" if named else ""
        for name, value in t.metrics.items():
            if value is not None:
                metrics[prefix + name] = float(value)
        for name, r in t.rewards.items():
            if r is not None:
                metrics[prefix + name] = float(r.score)
    metrics["reward"] = float(reward)
    usage = episode.usage
    out_usage = {
        "prompt_tokens": int(usage.prompt_tokens + (usage.cached_input_tokens or 0))
        if usage
        else 0,
        "completion_tokens": int(usage.completion_tokens) if usage else 0,
    }
    judge = [u for t in episode.traces for u in t.extra_usage]
    if judge:
        out_usage["judge_prompt_tokens"] = sum(u.prompt_tokens for u in judge)
        out_usage["judge_completion_tokens"] = sum(u.completion_tokens for u in judge)
    main = traces[0]
    messages = [_as_dict(m) for m in main.messages]
    first_reply = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), None)
    timing: dict[str, float] = {}
    for stage in ("boot", "setup", "agent", "finalize", "scoring"):
        span = getattr(main.timing, stage, None)
        if span is not None:
            timing[f"{stage}_s"] = round(span.duration, 4)
    model_split = getattr(getattr(main.timing, "agent", None), "model", None)
    if model_split is not None:
        timing["model_s"] = round(model_split.duration, 4)
    return VerifiersOutcome(
        prompt=messages[:first_reply] if first_reply is not None else messages,
        completion=main.last_reply,
        reward=float(reward),
        metrics=metrics,
        usage=out_usage,
        timing=timing,
    )


# ------------------------------------------------------------------------------------------


def load_runner(spec: VerifiersBenchmark) -> tuple[str, _V1 | Legacy]:
    """``(api, runner)`` for a benchmark spec: the environment loaded, its items listed."""
    api = _pick_api(spec)
    if api == "v1":
        runner: _V1 | Legacy = _V1(spec)
        if spec.judge is not None:  # the environment's judges call evalgate's (see _vf_judge)
            _vf_judge.route_v1()
    else:
        from evalgate.suites._vf_legacy import Legacy

        runner = Legacy(spec)
        if spec.judge is not None:
            s = spec.judge.sampling
            sampling = {"temperature": s.temperature, "top_p": s.top_p, "max_tokens": s.max_tokens}
            if s.seed is not None:
                sampling["seed"] = s.seed
            if not _vf_judge.route_legacy(runner.env, spec.judge.model.model_id, sampling):
                # Nothing would ask evalgate's judge: a reward function's own client grades
                # (another judge than the exam's) or fails and scores 0; neither is the exam.
                raise ConfigError(
                    f"benchmark {spec.name!r}: `judge:` is set, but environment "
                    f"{spec.env_id!r} has no JudgeRubric (the legacy API's judge, the only one "
                    "evalgate can route): its judge would never be asked; drop `judge:`, or "
                    "grade with a JudgeRubric's judge_client"
                )
    log.info("verifiers benchmark %s: %s api, %d items", spec.name, api, len(runner.items))
    return api, runner


def roles(runner: object) -> dict[str, dict[str, str | None]]:
    """Where each v1 seat runs (runtime, harness): what the gate reports and tests check."""
    env = getattr(runner, "env", None)
    config = getattr(env, "config", None)
    out: dict[str, dict[str, str | None]] = {}
    for name in getattr(type(config), "model_fields", {}) if config is not None else {}:
        agent = getattr(config, name, None)
        runtime = getattr(getattr(agent, "runtime", None), "type", None)
        if runtime is not None:
            harness = getattr(getattr(agent, "harness", None), "id", None)
            out[name] = {"runtime": runtime, "harness": harness}
    return out

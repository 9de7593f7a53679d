"""PrimeIntellect ``verifiers`` environments as gate benchmarks (kind ``verifiers``).

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
This is the only module that imports verifiers, and it imports each generation lazily.
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
from dataclasses import dataclass, field
from typing import Any

from evalgate.errors import ConfigError, InfraError
from evalgate.serve.client import RequestFailed
from evalgate.suites.base import Item, Outcome, SuiteDefaults

__all__ = ["CHAT_HARNESS_ID", "VerifiersOutcome", "VerifiersSuite", "module_name"]

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
class VerifiersOutcome(Outcome):
    """An :class:`Outcome` plus verifiers' own stage timing (seconds), for the journal."""

    timing: dict[str, float] = field(default_factory=dict)


def module_name(env_id: str) -> str:
    """The importable module of an env id: hub ``owner/name@version`` → ``name`` (dashes → _)."""
    return env_id.rsplit("/", 1)[-1].split("@", 1)[0].replace("-", "_").lower()


def _digest(value: Any) -> str:
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


def _text(content: Any) -> str:
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


def _as_dict(message: Any) -> dict[str, str]:
    if isinstance(message, dict):
        return {"role": str(message.get("role", "")), "content": _text(message.get("content"))}
    return {"role": str(getattr(message, "role", "")), "content": _text(message.content)}


def _pick_api(spec: Any) -> str:
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
        ) from None
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


def _sampling(spec: Any, index: int) -> dict[str, Any]:
    s = spec.sampling
    out: dict[str, Any] = {
        "temperature": s.temperature,
        "top_p": s.top_p,
        "max_tokens": s.max_tokens,
    }
    if s.seed is not None:
        out["seed"] = s.seed + index  # rollout r gets seed + r, as on every other kind
    return out


def _legacy_sampling(spec: Any, index: int) -> dict[str, Any]:
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
            )
            async with client:
                await client.chat(messages)  # the interception records it on the trace
            return vf.ProgramResult(exit_code=0, stdout="", stderr="")

    module = types.ModuleType(_CHAT_MODULE, "evalgate's in-process chat harness for verifiers")
    module.ChatHarness = ChatHarness
    module.ChatHarnessConfig = ChatHarnessConfig
    module.__all__ = ["ChatHarness", "ChatHarnessConfig"]
    sys.modules[_CHAT_MODULE] = module
    return module


def _v1_env_config(spec: Any) -> Any:
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
    harness: dict[str, Any] | None = None
    if harness_id is not None:
        harness = {"id": harness_id}
        if harness_id == CHAT_HARNESS_ID:
            harness |= {
                "max_retries": spec.eval.max_retries,
                "timeout_s": spec.eval.request_timeout_s,
            }
    data: dict[str, Any] = {"taskset": {**spec.env_args, "id": spec.env_id}}
    for role in roles:
        # Every seat runs where evals.yaml says: AgentConfig.runtime defaults to PrimeConfig,
        # a remote sandbox service.
        data[role] = {"runtime": {"type": spec.runtime}}
        pinned = cls.model_fields[role].default.harness
        if harness is not None and (spec.harness is not None or pinned is None):
            data[role]["harness"] = dict(harness)
    return resolve_env_config(data)


class _V1:
    """An env built once; episodes played per rollout inside one ``Env.serving()`` per loop."""

    def __init__(self, spec: Any) -> None:
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
            ) from None
        ids = _unique_ids([self._item_id(t) for t in tasks])
        self.tasks = dict(zip(ids, tasks, strict=True))
        self.items = [self._item(i, t) for i, t in zip(ids, tasks, strict=True)]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: asyncio.Future[None] | None = None
        self._keeper: asyncio.Task[None] | None = None

    @staticmethod
    def _item_id(task: Any) -> str:
        data = task.data
        if getattr(data, "id", None):  # TaskData.id: verifiers >= 0.4
            return str(data.id)
        # Content hash without `idx` (the position in load(), which Task.hash includes): the
        # same row keeps its id when rows before it are added or removed.
        wire = data.model_dump(mode="json", exclude_none=True, exclude={"idx"})
        return f"h{_digest(wire)}"

    @staticmethod
    def _item(item_id: str, task: Any) -> Item:
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

    async def rollout(self, item: Item, index: int, client: Any) -> Outcome:
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
        try:
            episode = await self.env.run_slot(RunSlot(self.tasks[item.id]), ctx)
        except Exception as exc:
            raise InfraError(f"vf_{type(exc).__name__}: {exc}") from None
        return _episode_outcome(episode)


def _episode_error(episode: Any) -> Exception | None:
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
# legacy


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


class _Legacy:
    """``load_environment(env_id, **env_args)``; one ``run_rollout`` per (item, rollout)."""

    def __init__(self, spec: Any) -> None:
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
            ) from None
        if not callable(getattr(self.env, "run_rollout", None)):
            raise ConfigError(
                f"benchmark {spec.name!r}: this verifiers has no per-rollout "
                "`Environment.run_rollout`; use verifiers>=0.3.0"
            )
        self._vf = vf
        self.group = bool(getattr(self.env, "requires_group_rollouts", False))
        ids = _unique_ids([self._item_id(r) for r in rows])
        self.rows = dict(zip(ids, rows, strict=True))
        self.items = [self._item(i, r) for i, r in zip(ids, rows, strict=True)]
        self._client: Any = None
        self._client_key: tuple[Any, ...] | None = None
        self._closer: asyncio.Task[None] | None = None
        self._groups: dict[str, asyncio.Future[list[Any]]] = {}

    @staticmethod
    def _item_id(row: dict[str, Any]) -> str:
        # `example_id` is the row position unless the dataset supplied ids: a string one is
        # renamed `src_id` by Environment._format_dataset. Positions shift when rows change, so
        # without an explicit id the content of the prompt and answer is the identity.
        info = row.get("info") if isinstance(row.get("info"), dict) else {}
        for value in (row.get("id"), row.get("src_id"), info.get("id")):
            if value is not None and value != "":
                return str(value)
        return f"h{_digest([row.get('prompt'), row.get('answer')])}"

    @staticmethod
    def _item(item_id: str, row: dict[str, Any]) -> Item:
        prompt = row.get("prompt")
        text = (
            prompt
            if isinstance(prompt, str)
            else "\n\n".join(
                _as_dict(m)["content"] for m in prompt or [] if _as_dict(m)["role"] != "system"
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

    def _vf_client(self, client: Any) -> Any:
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

    async def rollout(self, item: Item, index: int, client: Any) -> Outcome:
        model = client.endpoint.model
        vf_client = self._vf_client(client)
        try:
            if self.group:
                out = (await self._group(item, vf_client, model))[index]
            else:
                out = await self.env.run_rollout(
                    dict(self.rows[item.id]), vf_client, model, _legacy_sampling(self.spec, index)
                )
        except (RequestFailed, InfraError):
            raise
        except Exception as exc:
            raise _legacy_exception(exc) from None
        return _output_outcome(out)

    async def _group(self, item: Item, vf_client: Any, model: str) -> list[Any]:
        # Group rewards score the k rollouts of an item together: the first of its pairs runs
        # the whole group, the others take their index from the same result.
        fut = self._groups.get(item.id)  # reset with the client: per loop and endpoint
        if fut is None:
            fut = self._groups[item.id] = asyncio.ensure_future(
                self.env.run_group(
                    [dict(self.rows[item.id]) for _ in range(self.spec.eval.rollouts)],
                    vf_client,
                    model,
                    # One sampling for the whole group: no seed, or its k rollouts would be
                    # the same completion at temperature > 0.
                    {k: v for k, v in _legacy_sampling(self.spec, 0).items() if k != "seed"},
                )
            )
        return await asyncio.shield(fut)


async def _close_at_loop_end(sdk_client: Any) -> None:
    try:
        await asyncio.Event().wait()
    finally:
        await sdk_client.close()


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


def _output_outcome(out: dict[str, Any]) -> VerifiersOutcome:
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
        else [_as_dict(m) for m in prompt or []]
    )
    metrics = {k: float(v) for k, v in (out.get("metrics") or {}).items() if v is not None}
    reward = float(out.get("reward") or 0.0)
    metrics["reward"] = reward
    tokens = out.get("token_usage") or {}
    timing_raw = out.get("timing") or {}
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
            "prompt_tokens": int(tokens.get("input_tokens") or 0),
            "completion_tokens": int(tokens.get("output_tokens") or 0),
        },
        timing=timing,
    )


# ------------------------------------------------------------------------------------------


@dataclass
class VerifiersSuite(SuiteDefaults):
    """A verifiers environment as an evalgate suite (see the module docstring)."""

    name: str
    items: list[Item]
    api: str
    runner: Any

    @classmethod
    def from_spec(cls, spec: Any) -> VerifiersSuite:
        api = _pick_api(spec)
        runner = _V1(spec) if api == "v1" else _Legacy(spec)
        log.info("verifiers benchmark %s: %s api, %d items", spec.name, api, len(runner.items))
        return cls(name=spec.name, items=runner.items, api=api, runner=runner)

    async def rollout(self, item: Item, index: int, client: Any) -> Outcome:
        return await self.runner.rollout(item, index, client)

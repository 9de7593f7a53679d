"""A verifiers environment's judge, pointed at evalgate's judge (inside the worker process only).

With ``judge:`` set on a verifiers benchmark, every judge call the environment makes goes to
the rollout's tab on the gate's judge relay (``score/relay.py``), whatever client the
environment built:

- **v1** (``vf.Judge`` and the plugged judges, ``verifiers.v1.judge``): the module's
  ``build_async_openai``, which ``Judge.complete`` calls for each judge call, builds a client
  on the current rollout's relay endpoint instead of the judge config's ``base_url`` and key;
- **legacy** (``JudgeRubric(judge_client=..., judge_model=..., judge_sampling_args=...)``):
  each JudgeRubric in the environment's rubric tree gets a client that does the same, the
  judge's model id and sampling (and the same in ``class_objects``, which reward functions
  receive as arguments).

The rollout's endpoint is a context variable set by the runner around each episode (the
judge's calls happen inside it, in that task or tasks it starts). A call outside any rollout
is refused rather than sent to the environment's default (a public API on someone's key).
The relay applies the exam's model and sampling whatever the request says.
"""

from __future__ import annotations

import contextvars
import types
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # openai loads with the environment, inside the worker only
    import openai
    from openai.types.chat import ChatCompletion


__all__ = ["CURRENT", "route_legacy", "route_v1", "rubrics"]

# The current rollout's judge endpoint on the relay (:class:`~evalgate.score.relay.RelayEndpoint`:
# base_url, model, api_key), as the worker received it in the rollout's request (JSON).
CURRENT: contextvars.ContextVar[Mapping[str, object] | None] = contextvars.ContextVar(
    "evalgate_judge", default=None
)


def _target() -> tuple[str, str]:
    """The current rollout's (base_url, api_key) on the relay."""
    target = CURRENT.get()
    if target is None:
        raise RuntimeError("evalgate: the environment's judge was called outside a rollout")
    return str(target["base_url"]), str(target["api_key"])


def _client() -> openai.AsyncOpenAI:
    import openai

    base_url, api_key = _target()
    # No retries here: the relay retries under evalgate's policy (and counts them).
    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)


def route_v1() -> bool:
    """Point ``verifiers.v1.judge``'s client factory at the rollout's relay (once)."""
    try:
        from verifiers.v1 import judge as vf_judge
    except ImportError:
        return False
    if getattr(vf_judge.build_async_openai, "evalgate_routed", False):
        return True

    def build_async_openai(config: object) -> openai.AsyncOpenAI:
        return _client()

    build_async_openai.evalgate_routed = True  # type: ignore[attr-defined]
    vf_judge.build_async_openai = build_async_openai
    return True


class _RoutedClient:
    """A stand-in for a JudgeRubric's ``judge_client``: ``chat.completions.create`` on the
    current rollout's relay endpoint (a client per call: the rollouts' event loops differ).
    ``sync``: the environment built a synchronous ``OpenAI`` client and its reward functions
    call it so (``judge_client.chat.completions.create(...)`` without ``await``): the stand-in
    answers the same way, or they would get a coroutine and score 0."""

    def __init__(self, *, sync: bool = False) -> None:
        create = self._create_sync if sync else self._create
        self.chat = types.SimpleNamespace(completions=types.SimpleNamespace(create=create))

    # The grading code's own arguments (model, messages, sampling…), passed on as it gave them.
    async def _create(self, **kwargs: object) -> ChatCompletion:
        async with _client() as client:
            return await client.chat.completions.create(**kwargs)  # type: ignore[call-overload]

    def _create_sync(self, **kwargs: object) -> ChatCompletion:
        import openai

        base_url, api_key = _target()  # the context variable travels into a worker thread too
        with openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0) as client:
            return client.chat.completions.create(**kwargs)  # type: ignore[call-overload]


def _is_sync(client: object) -> bool:
    """Whether the environment's own judge client is a synchronous one (``openai.OpenAI``)."""
    try:
        import openai
    except ImportError:  # pragma: no cover - verifiers depends on openai
        return False
    return isinstance(client, openai.OpenAI)


def rubrics(rubric: object) -> list[Any]:
    """A rubric and every rubric a RubricGroup holds, each once: verifiers' own objects (it
    ships no types; read by the attributes they have)."""
    out: list[Any] = []
    stack, seen = [rubric], set()
    while stack:
        r = stack.pop()
        if r is None or id(r) in seen:
            continue
        seen.add(id(r))
        out.append(r)
        stack.extend(getattr(r, "rubrics", None) or [])  # a RubricGroup's members
    return out


def route_legacy(env: object, model: str, sampling: Mapping[str, object]) -> int:
    """Give every JudgeRubric of ``env`` the routed client, the judge's model and sampling;
    the number of judges routed."""
    routed = 0
    for rubric in rubrics(getattr(env, "rubric", None)):
        if not (hasattr(rubric, "judge_client") and hasattr(rubric, "judge_model")):
            continue
        rubric.judge_client = _RoutedClient(sync=_is_sync(rubric.judge_client))
        rubric.judge_model = model
        rubric.judge_sampling_args = dict(sampling)
        objects = getattr(rubric, "class_objects", None)
        if isinstance(objects, dict):  # what reward functions receive as keyword arguments
            objects.update(
                judge_client=rubric.judge_client,
                judge_model=model,
                judge_sampling_args=rubric.judge_sampling_args,
            )
        routed += 1
    return routed

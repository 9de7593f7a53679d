"""Shared pieces of the evals.yaml schema: strictness, sampling, eval settings, gate policy."""

# Annotations are objects, not strings (no `from __future__ import annotations`): pydantic
# evaluates a string annotation at class creation, a compile and an eval per field, on every
# command's start-up path (issue #36).

import types
from collections.abc import Mapping
from typing import Annotated, ClassVar, Literal, TypeVar, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from evalgate._text import visible

__all__ = [
    "URL",
    "URL_NO_USERINFO",
    "BaselineSettings",
    "Deferred",
    "EnvName",
    "EvalSettings",
    "Fraction",
    "GateSettings",
    "Sampling",
    "Strict",
    "empty_list",
    "is_section",
]


_T = TypeVar("_T")


def empty_list() -> list[_T]:
    """``default_factory`` of list fields. Not ``list`` itself: pydantic inspects a factory's
    signature, which for a builtin means parsing its text signature with ``tokenize``, whose
    regular expressions take ~12 ms to compile: a tenth of the spec's import time."""
    return []


_YES_NO = "must be a number, not a yes/no value"


def _numeric_only(annotation: object) -> bool:
    """True when the field takes int/float but not bool (YAML 1.1 reads `yes` as true)."""
    if get_origin(annotation) is Annotated:
        return _numeric_only(get_args(annotation)[0])
    members = (
        get_args(annotation)
        if get_origin(annotation) in (Union, types.UnionType)
        else (annotation,)
    )
    return bool(set(members) & {int, float}) and bool not in members


def is_section(cls: type[BaseModel], name: str) -> bool:
    """True when field ``name`` is a nested mapping (a model or a dict) that is never None."""
    field = cls.model_fields.get(name)
    if field is None or field.is_required():
        return False
    annotation = field.annotation
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, types.UnionType):
        return False  # `X | None`: null means something
    return get_origin(annotation) is dict or (
        isinstance(annotation, type) and issubclass(annotation, BaseModel)
    )


def _not_bool(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError(_YES_NO)
    return value


def _check_url(value: str) -> str:
    """An http(s) URL a client can connect to: a host, and a port in range (else a run would
    fail only at its first request, after the model started)."""
    from urllib.parse import urlsplit

    if visible(value) != value:  # a pasted zero-width space: looks right, fails at run time
        at, char = next((i, c) for i, c in enumerate(value) if visible(c) != c)
        raise ValueError(
            f"the URL contains an invisible character ({visible(char)}, character {at + 1}); "
            "retype it"
        )
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a port out of range or not a number
    except ValueError as exc:
        raise ValueError(f"not a valid URL ({exc})") from None
    if not parts.hostname:
        raise ValueError("the URL has no host, e.g. http://127.0.0.1:8000/v1")
    if any(c.isspace() for c in value):
        raise ValueError("the URL contains whitespace")
    if parts.username is not None or parts.password is not None:
        # The URL is printed in errors and the scorecard a PR shows: a password in it would leak.
        raise ValueError(
            "must not contain user:password@; put the key in an environment variable and name "
            "it in api_key_env (value not shown)"
        )
    return value


# An endpoint URL: http:// or https://, a host, a valid port. The schema's pattern also refuses
# `user:password@` so that an editor flags it (the validator says why, without the value).
URL_NO_USERINFO = r"^https?://[^/@]*([/?#].*)?$"
URL = Annotated[
    str,
    Field(pattern=r"^https?://", json_schema_extra={"pattern": URL_NO_USERINFO}),
    AfterValidator(_check_url),
]


_ROUTES = ("/chat/completions", "/completions", "/responses", "/embeddings", "/models")


def _not_a_route(value: str) -> str:
    """An endpoint root, not one of its routes: the client appends `/chat/completions`, so
    `…/v1/chat/completions` would be asked at `…/v1/chat/completions/chat/completions` and every
    request fail with 404 after the run started."""
    from urllib.parse import urlsplit

    path = urlsplit(value).path.rstrip("/")
    route = next((r for r in _ROUTES if path.endswith(r)), None)
    if route is not None:
        root = value.rstrip("/")[: -len(route)]
        raise ValueError(
            f"give the endpoint's root, without {route} (evalgate adds the route): e.g. {root}"
        )
    return value


# An OpenAI-compatible endpoint's root (`…/v1`): a URL that is not one of its routes.
EndpointURL = Annotated[URL, AfterValidator(_not_a_route)]


# Prefixes of provider keys and tokens whose characters also make a valid variable name
# (`hf_…`, `sk_…`, `ghp_…`): the pattern alone would take a pasted token for a variable's name.
_KEY_PREFIXES = ("hf_", "sk_", "ghp_", "gho_", "ghs_", "github_pat_", "xoxb_", "AKIA", "r8_")


def _not_a_key(value: str) -> str:
    mixed = any(c.islower() for c in value) and any(c.isupper() for c in value)
    digits = sum(c.isdigit() for c in value)
    if (value.startswith(_KEY_PREFIXES) and len(value) >= 20) or (
        len(value) >= 32 and mixed and digits >= 4
    ):
        raise ValueError(
            "looks like a key, not the NAME of an environment variable; put the key in a "
            "variable (e.g. export HF_TOKEN=…) and write its name here (value not shown)"
        )
    return value


# The name of an environment variable holding a secret (never the secret itself).
EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$"), AfterValidator(_not_a_key)]


class Deferred(BaseModel):
    """A model whose validator is built when first used (``defer_build``), so a run pays only
    for the backends and benchmark kinds its config names and the run files it writes (building
    them all was most of the config's import time: issue #36).

    The deferred build resolves the class's annotations in its own module, as an eager build at
    import does. pydantic's default would take the namespace of the frame that first used the
    class, and keep it: that frame's locals (a run's items, the loaded runs a gate compares)
    stayed alive for the life of the process."""

    model_config = ConfigDict(defer_build=True)
    # Whether the models its fields hold are built before it (:func:`_build_fields_first`).
    build_fields_first: ClassVar[bool] = True

    @classmethod
    def model_rebuild(
        cls,
        *,
        force: bool = False,
        raise_errors: bool = True,
        _parent_namespace_depth: int = 2,
        _types_namespace: Mapping[str, object] | None = None,
    ) -> bool | None:
        _no_plugins()
        if cls.build_fields_first and (force or not cls.__pydantic_complete__):
            _build_fields_first(cls)
        return super().model_rebuild(
            force=force,
            raise_errors=raise_errors,
            _parent_namespace_depth=0,  # never a caller's frame
            _types_namespace=_types_namespace,
        )


def _no_plugins() -> None:
    """Build evalgate's validators without pydantic's plugins. The first validator pydantic builds
    loads them: it reads the entry points of every installed distribution (~6 ms of every run on
    a machine with 228 of them; issue #36) to run third-party code on each validation. The
    exam's models want none of it in the gate process. pydantic's loader keeps what it found in
    ``_plugins`` (None: not read yet); an empty dict is "read, none found". A pydantic without
    that name only reads them as before (tests/test_startup.py notices)."""
    global _plugins_skipped
    if _plugins_skipped:
        return
    _plugins_skipped = True
    from pydantic.plugin import _loader

    if getattr(_loader, "_plugins", {}) is None:
        _loader._plugins = {}


_plugins_skipped = False

# The models whose fields' models are being built first (a model may name itself, or its parent).
_BUILDING: set[type[Deferred]] = set()


def _build_fields_first(cls: type[Deferred]) -> None:
    """Build the models ``cls``'s fields hold before ``cls``: pydantic reuses a built model's
    schema inside another's, and generates an unbuilt one's again inside each model that holds
    it (every backend's inside evals.yaml's and again inside each benchmark's judge scorer):
    built bottom-up, a 1-item run's config validators took half the time (issue #36)."""
    _BUILDING.add(cls)
    try:
        for field in cls.model_fields.values():
            for model in _models_in(field.annotation):
                if not model.__pydantic_complete__ and model not in _BUILDING:
                    # Not buildable yet (a name not defined yet): the field's holder builds it
                    # inline, or reports it, as it would have.
                    model.model_rebuild(raise_errors=False)
    finally:
        _BUILDING.discard(cls)


def _models_in(annotation: object) -> list[type[Deferred]]:
    """The deferred models an annotation names, through unions, Annotated and containers."""
    if isinstance(annotation, type) and issubclass(annotation, Deferred):
        return [annotation]
    return [model for arg in get_args(annotation) for model in _models_in(arg)]


class Strict(Deferred):
    # Unknown keys are errors (a typo in a gate policy must not pass silently); frozen after load.
    # Field docstrings become schema descriptions in evalgate.config.schema, not here: pydantic
    # reads them by parsing each class's source, a third of the spec's import time.
    # No field takes NaN or ±infinity (YAML's `.nan`, `.inf`): a NaN margin or bound compares
    # false with everything, so range checks let it through, and an infinite scale or timeout
    # is a typo, never a setting.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _empty_section_is_default(cls, data: object) -> object:
        # `sampling:` with every field commented out is YAML null: an empty section, not an
        # error (only for sections that cannot be null on purpose).
        if isinstance(data, dict) and None in data.values():
            return {k: v for k, v in data.items() if v is not None or not is_section(cls, k)}
        return data

    @model_validator(mode="before")
    @classmethod
    def _no_yes_no_numbers(cls, data: object) -> object:
        # pydantic turns true into 1.0: `temperature: yes` would silently run at 1.0. (A model
        # validator, as field validators may not touch union tags; the loader adds the field.)
        if isinstance(data, dict):
            for name, value in data.items():
                field = cls.model_fields.get(name)
                if isinstance(value, bool) and field and _numeric_only(field.annotation):
                    raise PydanticCustomError("yes_no_number", _YES_NO, {"field": name})
        return data


# A score in [0, 1]: a threshold of 30 meant as 30 % is an error with a hint, not a crash later.
Fraction = Annotated[float, Field(ge=0.0, le=1.0), BeforeValidator(_not_bool)]


class Sampling(Strict):
    """Sampling parameters sent with every request."""

    temperature: float = Field(0.0, ge=0.0, le=2.0)
    """Sampling temperature; 0 is greedy decoding."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass."""
    max_tokens: int = Field(256, ge=1, le=131072)
    """Upper bound on generated tokens per completion."""
    seed: int | None = Field(0, ge=-(2**63), le=2**63 - 1)
    """Base seed; rollout r of an item gets seed + r, so k rollouts differ at temperature > 0."""
    stop: list[Annotated[str, Field(min_length=1)]] | None = None
    """Stop sequences (e.g. for base models that keep writing `Question:` after the answer)."""


class EvalSettings(Strict):
    """How many items and rollouts to run, and how hard to push the endpoint."""

    num_examples: int | None = Field(None, ge=1)
    """Items to evaluate (the first N in the dataset's order); null means all."""
    rollouts: int = Field(1, ge=1, le=1000)
    """Completions per item (k). pass@k and pass^k are reported when k > 1."""
    max_concurrent: int = Field(8, ge=1, le=4096)
    """Requests in flight at once."""
    max_error_rate: float = Field(0.05, ge=0.0, le=1.0)
    """Errored rollouts above this fraction make the run an infrastructure error, not a score."""
    request_timeout_s: float = Field(120.0, gt=0)
    """Timeout in seconds per HTTP exchange. A redirect chain (Modal answers a request still
    running after 150 s with a 303 to its result) is followed hop by hop, each hop with this
    timeout; on `modal-vllm` a hop gets at least 180 s."""
    max_retries: int = Field(4, ge=0, le=50)
    """Retries per request on 429, 5xx, connection errors and timeouts (jittered backoff)."""
    request_deadline_s: float | None = Field(None, gt=0)
    """Seconds one request may take over all its attempts: no retry starts past it. Null: three
    times `request_timeout_s`."""
    max_consecutive_failures: int = Field(10, ge=0, le=100000)
    """Attempts in a row that get no answer at all before the run stops as an infrastructure
    error: the endpoint is down or hung. A timeout counts only when a one-token probe request
    gets no answer either (a slow item on a live server is that rollout's error); after this many
    refused connections the endpoint is waited for 15 s (a restart) before the run stops. 0:
    never stop."""
    allow_empty_replies: bool = False
    """A reply without text (`content: null`, no choices, tool calls only) is scored as the empty
    answer; by default it is an error (`empty_reply`), counted against `max_error_rate`."""
    max_reply_mib: float = Field(4.0, gt=0, le=1024)
    """Largest model reply read, in MiB: a longer one is the rollout's error `too_large` (not
    retried), never held whole in memory or written to the results."""
    adaptive_concurrency: bool = True
    """Halve the requests in flight when the endpoint answers 429, add one back per window of
    successes (AIMD), between 1 and `max_concurrent`; false: always `max_concurrent`."""
    cache: bool = True
    """Reuse the cached completion of an identical earlier request (same model config, request
    body and rollout index); errors are never cached. `--no-cache` turns it off for one run."""
    sequential: bool = False
    """With a baseline: run items in an order keyed by the gate (never by the candidate's seed)
    and look at the paired result after each quarter (Wang–Tsiatis repeated confidence bounds);
    stop model calls once it is decided."""
    looks: int = Field(4, ge=1, le=20)
    """Number of equally spaced looks for `sequential`."""


class GateSettings(Strict):
    """The gate policy. In the Action it is read from the base branch, never from the PR."""

    thresholds: dict[str, dict[str, Fraction]] = Field(default_factory=dict)
    """Minimum scores, `{benchmark: {metric: min}}`. FAIL when the score is significantly below
    (one-sided test at `alpha`), PASS when its lower bound clears it, else INCONCLUSIVE."""
    margin: float = Field(0.03, ge=0.0, le=1.0)
    """Non-inferiority margin δ against the baseline: PASS needs the lower bound of Δ > −δ."""
    alpha: float = Field(0.05, gt=0.0, lt=0.5)
    """One-sided significance level for PASS (non-inferiority) and FAIL (regression) decisions."""
    on_inconclusive: Literal["warn", "fail", "pass"] = "warn"
    """Exit status when the evidence decides neither way: warn (exit 0 with a warning), fail
    (exit 1), pass (exit 0 silently)."""
    metrics: list[str] | None = None
    """Metrics compared with the baseline; default: every metric except pass@k / pass^k."""
    scales: dict[str, Literal["proportion", "count"] | tuple[float, float]] = Field(
        default_factory=dict
    )
    """Each metric's scale, `{metric: proportion | count | [low, high]}`: how it is shown and
    the range the bounds assume. Default: a proportion when every value is in [0, 1], a count
    when they are whole numbers, else the range seen in both runs (the scorecard says so)."""

    @field_validator("scales")
    @classmethod
    def _ranges_are_ranges(
        cls, scales: dict[str, Literal["proportion", "count"] | tuple[float, float]]
    ) -> dict[str, Literal["proportion", "count"] | tuple[float, float]]:
        for metric, scale in scales.items():
            if isinstance(scale, tuple) and not scale[0] < scale[1]:
                low, high = (f"{v:g}" for v in scale)
                why = (
                    "the same value twice"
                    if scale[0] == scale[1]
                    else f"reversed: [{high}, {low}]?"
                )
                raise ValueError(
                    f"{metric}: [low, high] needs low < high, got [{low}, {high}] ({why})"
                )
        return scales


class BaselineSettings(Strict):
    """Where the baseline comes from. In the Action it is read from the base branch, like the
    gate policy: a PR cannot opt itself out of the comparison."""

    mode: Literal["auto", "stored", "rerun", "none"] = "auto"
    """`auto`: the run stored for the merge-base (or its nearest stored ancestor), else a re-run
    of the merge-base; `stored` / `rerun`: only that; `none`: thresholds only."""
    store: str = Field("git-branch", pattern=r"^(none|local:.+|git-branch(:[A-Za-z0-9._/-]+)?)$")
    """Result store: `git-branch[:BRANCH]` (default branch `evalgate-results` in your repo),
    `local:PATH`, or `none`."""

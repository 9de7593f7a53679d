"""A run directory's ``run_config.json`` and ``metadata.json``: their typed models, written and
read here and nowhere else.

:class:`RunConfig` is written when a run starts (what ran: the model, the benchmark, the gate,
the fingerprint, the baseline and look plan), :class:`RunMetadata` when it finishes (its summary,
costs, looks and the key of its items' order). :mod:`evalgate.run.manifest` builds them from the
configuration and the run's summary, :class:`~evalgate.run.rundir.RunDir` writes them with
:func:`write_run_config`/:func:`write_metadata`, and :func:`~evalgate.run.rundir.load_run` keeps
the validated models on the run it returns: readers use attributes, never ``.get()`` chains.

The models are open (extra="allow"): the fields below are what evalgate reads; anything else a
run records (a suite's own keys, another version's) travels along untouched. A model is written
back in the order its keys were given, so a file evalgate wrote reads back and writes again
byte for byte, and runs and baselines written by older versions keep loading (a field they lack
has its default). A file that is not what evalgate writes is refused in one line naming the file
and the field (:class:`~evalgate.errors.UsageError`, exit 2).
"""

# Annotations are objects, not strings: see evalgate.config.spec._base.

import json
import os
from pathlib import Path
from typing import Annotated, ClassVar, Self, cast

from pydantic import (
    ConfigDict,
    Field,
    JsonValue,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    Strict,
    ValidationError,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from evalgate.config.spec._base import Deferred, EvalSettings
from evalgate.errors import UsageError
from evalgate.run.layout import METADATA, RUN_CONFIG, RUN_FILES

__all__ = [
    "BaselineRef",
    "BenchmarkEntry",
    "Dataset",
    "EvalEntry",
    "Fingerprint",
    "LookPlan",
    "LookRecord",
    "Measurement",
    "ModelEntry",
    "Resumed",
    "RunConfig",
    "RunMetadata",
    "Subject",
    "field_error",
    "read_json_object",
    "read_metadata",
    "read_object",
    "read_run_config",
    "stored_metadata",
    "write_json",
    "write_metadata",
    "write_run_config",
]

Number = int | float  # a JSON number, kept as written (a float field would turn 0 into 0.0)
JsonObject = dict[str, JsonValue]
ORDER_KEY = r"^[0-9a-f]{64}$"  # evalgate.stats.OrderKey.record


class _Record(Deferred):
    """Open and frozen; serialised in the order its keys were given (then any others). Built
    when a command first reads or writes a run file (`validate` and `schema` never do)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    # A run file's sections are held by one file each: built inside it, not each on its own.
    build_fields_first: ClassVar[bool] = False
    _order: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _keep_order(cls, data: object, handler: ValidatorFunctionWrapHandler) -> Self:
        made: Self = handler(data)
        if isinstance(data, dict):
            made._order = tuple(data)
        return made

    @model_serializer(mode="wrap")
    def _in_given_order(self, handler: SerializerFunctionWrapHandler) -> JsonObject:
        out: JsonObject = handler(self)
        first = {k: out[k] for k in self._order if k in out}
        return first | {k: v for k, v in out.items() if k not in first}

    @classmethod
    def to_write(cls, data: JsonObject) -> Self:
        """The model of a file evalgate is about to write, from ``data`` as given: not validated
        (building the validator was ~10 ms of a 1-item run, to check what evalgate itself made);
        every reader validates the file (:func:`read_metadata`). Nested sections stay as given
        (dicts): write it, don't read its attributes."""
        made = cast(Self, cls.model_construct(None, **data))  # the plugin types it as _Record
        made._order = tuple(data)
        return made

    def as_written(self) -> JsonObject:
        """The keys the file holds (or the writer gave), in their order; no defaults added.
        The same as ``model_dump(exclude_unset=True)``, without building the serializer."""
        fields = type(self).model_fields
        out: JsonObject = {
            k: _plain(getattr(self, k)) for k in fields if k in self.model_fields_set
        }
        out |= {k: _plain(v) for k, v in (self.__pydantic_extra__ or {}).items()}
        first = {k: out[k] for k in self._order if k in out}
        return first | {k: v for k, v in out.items() if k not in first}


def _plain(value: object) -> JsonValue:
    """A field's value as ``model_dump`` gives it: sections as their written keys, containers
    copied."""
    if isinstance(value, _Record):
        return value.as_written()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value  # type: ignore[return-value]  # a JSON scalar, as validated or given


# --- run_config.json ------------------------------------------------------------------------


class ModelEntry(_Record):
    """The model section (evals.yaml's, as run); runs pair on (label, benchmark)."""

    name: str


def _as_in_evals_yaml(name: str) -> tuple[object, ...]:
    """The bounds of evals.yaml's ``eval.<name>`` (config.spec's EvalSettings, their one
    definition): a run file holds no value its config could not have (k = 10¹² was read)."""
    return tuple(EvalSettings.model_fields[name].metadata)


_Rollouts = Annotated[int, Strict(), *_as_in_evals_yaml("rollouts")]
_ErrorRate = Annotated[float, Strict(), *_as_in_evals_yaml("max_error_rate")]


class EvalEntry(_Record):
    """The benchmark's ``eval`` settings as run; absent in older runs."""

    rollouts: _Rollouts | None = None  # k: rollouts per item
    max_error_rate: _ErrorRate | None = None  # the error budget the run is gated with


class BenchmarkEntry(_Record):
    """The benchmark section (evals.yaml's, as run, overrides included)."""

    name: str
    kind: str | None = None
    eval: EvalEntry | None = None


class Measurement(_Record):
    """What the benchmark measures with (:func:`evalgate.run.fingerprint.measurement`): two
    runs whose measurements differ are not comparable."""

    scorer: JsonObject | None = None  # None: the suite scores its own way (agent tasks)
    scoring_version: int | None = None

    @property
    def pairwise(self) -> bool:
        """A pairwise judge scored the run against one baseline's completions."""
        scorer = self.scorer or {}
        return scorer.get("type") == "judge" and scorer.get("mode") == "pairwise"


class Subject(_Record):
    """What answered (the model's config digest, prompts, sampling, chat template, agent)."""

    model_id: str | None = None
    model: str | None = None
    chat_template: str | None = None


class Dataset(_Record):
    hash: str | None = None  # evalgate.run.fingerprint.dataset_hash of the items
    items: int | None = None


class Fingerprint(_Record):
    """Empty in runs written before fingerprints: such a run is compared with no other."""

    measurement: Measurement | None = None
    subject: Subject | None = None
    dataset: Dataset | None = None


class BaselineRef(_Record):
    """The baseline a run was compared with (see :mod:`evalgate.run.baseline`)."""

    path: str = ""  # the baseline's run directory, absolute
    run_id: str | None = None
    results_sha256: str | None = None  # a digest of its journal: which run, exactly
    origin: JsonObject = Field(default_factory=dict)  # e.g. the base commit, for the scorecard
    relative_path: str | None = None  # from the run's own directory: found again when moved


class LookPlan(_Record):
    """Sequential looks: the metric they decide on, how many, and the key of the order the
    items run in (runs started before keys recorded the ``seed`` of the public order)."""

    metric: str | None = None
    looks: int | None = None
    order_key: str | None = Field(None, pattern=ORDER_KEY)
    seed: int | None = None


class RunConfig(_Record):
    """``run_config.json``: written when the run starts. The fields in the order written."""

    fingerprint: Fingerprint = Field(default_factory=Fingerprint)
    chat_template: JsonObject | None = None  # the template the server applied, and its digest
    suite: str | None = None  # an agent variant's run: "{benchmark}.{variant}"
    evalgate_version: str | None = None
    config_path: str | None = None
    model: ModelEntry
    endpoint: JsonObject | None = None
    model_id: str = ""
    benchmark: BenchmarkEntry
    gate: JsonObject | None = None  # the policy the run was gated with (recorded_gate reads it)
    budget: JsonObject | None = None
    baseline: BaselineRef | None = None
    sequential: LookPlan | None = None

    @property
    def run_name(self) -> str:
        """The suite's name: the benchmark's, or an agent variant's "{benchmark}.{variant}"."""
        return self.suite or self.benchmark.name

    @property
    def rollouts(self) -> int | None:
        """k as configured; None in a run written before ``benchmark.eval`` was recorded."""
        return self.benchmark.eval.rollouts if self.benchmark.eval is not None else None


# --- metadata.json ---------------------------------------------------------------------------


class LookRecord(_Record):
    """How sequential looks went (:class:`evalgate.run.sequential.SequentialResult`)."""

    metric: str | None = None
    decision: str | None = None
    look: int | None = None
    looks: int | None = None
    items_used: int | None = None
    items_total: int | None = None
    stopped_early: bool = False
    history: list[JsonValue] = Field(default_factory=list)
    # Grouped items: the groups planned and the largest of them (None without groups).
    groups_total: int | None = None
    group_size: int | None = None
    seed: int | None = None  # runs written before order keys: the public order's seed

    @property
    def items_not_run(self) -> int:
        """Items the looks planned but never ran, having stopped early (else 0)."""
        if not self.stopped_early or self.items_total is None or self.items_used is None:
            return 0
        return max(0, self.items_total - self.items_used)


class Resumed(_Record):
    kept: int = 0  # rollouts the journal had kept
    ran: int = 0  # rollouts run by the resume


class RunMetadata(_Record):
    """``metadata.json``: the run's summary, written when it finishes. The fields in the order
    written; a run's costs, judge and budget facts follow when it has them."""

    benchmark: str | None = None
    model: str | None = None
    model_id: str | None = None
    num_examples: int | None = None
    rollouts_per_example: int | None = None
    sampling_args: JsonObject | None = None
    time_ms: float = 0.0
    avg_reward: Number | None = None
    avg_metrics: dict[str, Number | None] = Field(default_factory=dict)
    pass_at_k: dict[str, Number | None] = Field(default_factory=dict)
    errors: int | None = None
    error_kinds: dict[str, int] = Field(default_factory=dict)
    usage: dict[str, Number] = Field(default_factory=dict)
    complete: bool = False  # False: stopped early (sequential looks, a budget cap)
    cost_usd: Number | None = None  # None: no price known
    agent_cost_usd: Number | None = None  # what command agents said they spent
    judge_usage: dict[str, Number] | None = None
    judge_cost_usd: Number | None = None
    served_by: JsonObject | None = None  # tokens a fallback served, by the model that did
    fallback_rollouts: int | None = None
    sequential: LookRecord | None = None
    # The key of the order the items are read in (evalgate.stats.OrderKey.record: drawn by the
    # gate, never the candidate's); None in runs written before keys (read in the public order).
    order_key: str | None = Field(None, pattern=ORDER_KEY)
    server_startup_ms: float | None = None
    requests: JsonObject | None = None  # request counts, retries, errors by kind, cache hits
    judge: JsonObject | None = None  # the scorecard's judge line
    budget: JsonObject | None = None  # the caps it ran under, and what stopped it
    resumed: Resumed | None = None

    @property
    def headline_score(self) -> float | None:
        """The run's one score for a trend: ``avg_reward``, else its first metric (the
        Action's mermaid chart and report.html's trend plot the same number)."""
        value = self.avg_reward
        if value is None:
            value = next(iter(self.avg_metrics.values()), None)
        return float(value) if value is not None else None


# --- reading and writing ---------------------------------------------------------------------


def field_error(exc: ValidationError) -> str:
    """``field.path: message`` of the first error: one line."""
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(the whole value)"
    return f"{where}: {err['msg']}"


def write_json(path: Path, data: object) -> None:
    """Write atomically: a reader never sees half a file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        # Streamed: the text of a verdict with 20,000 flips is never held whole (nor the half
        # million pieces json.dumps joins into it).
        with tmp.open("w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=False)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:  # a full disk: no half-written temporary file left beside the runs
        tmp.unlink(missing_ok=True)
        raise


def write_run_config(run_dir: Path, config: RunConfig) -> None:
    write_json(Path(run_dir) / RUN_CONFIG, config.as_written())


def write_metadata(run_dir: Path, metadata: RunMetadata) -> None:
    write_json(Path(run_dir) / METADATA, metadata.as_written())


def read_json_object(path: Path) -> JsonObject | None:
    """A run file's JSON object; None when it is missing, unreadable or not an object (a run
    killed while writing it, a hand edit): callers list what they can or refuse in one line."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def read_object(path: Path, what: str) -> JsonObject:
    """A run file's JSON object, or a one-line UsageError (``what``: why a missing one is)."""
    return _object(path, _text(path, what))


def _text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: missing; {what}") from None
    except OSError as exc:
        raise UsageError(f"{path}: unreadable ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not JSON ({exc})") from None


def _object(path: Path, text: str) -> JsonObject:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{path}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise UsageError(f"{path}: not a JSON object (a {type(value).__name__})")
    return value


# The last run_config.json files read, by path: the text read and the model it validated into.
# One read again unchanged (a run's last stretch reads each twice: the gate's error budget, then
# report.html's agent flag) is not validated again (~0.5 ms); any change to its text is.
_VALIDATED: dict[str, tuple[str, RunConfig]] = {}
_KEEP_VALIDATED = 16


def read_run_config(run_dir: Path) -> RunConfig:
    """``run_config.json``, typed; a file that is not one evalgate wrote raises UsageError
    naming the file and the field."""
    path = Path(run_dir) / RUN_CONFIG
    damaged = not path.exists() and any((Path(run_dir) / f).exists() for f in RUN_FILES)
    text = _text(
        path,
        "a damaged run folder (its other files are there): restore the file, or remove the "
        "folder to leave the run out"
        if damaged
        else "not an evalgate run directory",
    )
    key = os.path.abspath(path)
    held = _VALIDATED.get(key)
    if held is not None and held[0] == text:
        return held[1]
    data = _object(path, text)
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        raise UsageError(
            f"{path}: {field_error(exc)} (not a run_config.json evalgate wrote)"
        ) from None
    _VALIDATED.pop(key, None)
    while len(_VALIDATED) >= _KEEP_VALIDATED:  # the oldest read first
        del _VALIDATED[next(iter(_VALIDATED))]
    _VALIDATED[key] = (text, config)
    return config


def stored_metadata(run_dir: Path) -> RunMetadata | None:
    """``metadata.json`` for a listing or a trend, which show what they can: None when it is
    missing (the run did not finish) or not one evalgate wrote (:func:`read_metadata` says why)."""
    try:
        return read_metadata(run_dir)
    except UsageError:
        return None


def read_metadata(run_dir: Path) -> RunMetadata:
    """``metadata.json``, typed: missing means the run did not finish (resume finishes it)."""
    path = Path(run_dir) / METADATA
    if not path.is_file():
        raise UsageError(
            f"{path}: missing; the run did not finish (`evalgate resume {Path(run_dir).name}` "
            "finishes it)"
        )
    try:
        return RunMetadata.model_validate(read_object(path, ""))
    except ValidationError as exc:
        raise UsageError(f"{path}: {field_error(exc)}") from None

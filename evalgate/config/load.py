"""The evals.yaml schema and its loading: layered, validated, frozen.

Layers, lowest first: a benchmark's own YAML (from ``benchmarks/``) < evals.yaml's top-level
``sampling``/``eval`` < the benchmark's entry in evals.yaml < command-line dotted overrides.
Layers are merged as plain data *before* validation so that a default never overrides a value a
user set, and every value keeps its origin (file and line) for error messages.
"""

# Annotations are objects, not strings: see evalgate.config.spec._base.

import functools
import os
import re
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path

from pydantic import (
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
)

from evalgate.config import benchmarks as registry
from evalgate.config._document import BENCHMARK_KINDS, EvalsFile
from evalgate.config._messages import (
    HAS_LINE,
    LOCATED,
    kind_type,
    locate,
    raise_validation,
    suggest,
    valid_fields,
    validation_messages,
)
from evalgate.config._narrow import (
    dump_narrowed,
    members_by_tag,
    named_members,
    validate_narrowed,
)
from evalgate.config._yamlio import Layer, Path_, format_path, load_yaml, merge_layers
from evalgate.config.checks import check_policy
from evalgate.config.hostfiles import check_host_path, repository_root
from evalgate.config.overrides import Overrides, parse_overrides
from evalgate.config.spec import (
    ArithBenchmark,
    BaselineSettings,
    Benchmark,
    BudgetSettings,
    EvalSettings,
    FileBenchmark,
    GateSettings,
    HFBenchmark,
    LocalModel,
    Model,
    OpenAIModel,
    PublishSettings,
    Sampling,
    Scorer,
)
from evalgate.config.spec._base import Deferred
from evalgate.errors import ConfigError

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
    "dump_benchmark",
    "load_config",
]

# --------------------------------------------------------------------------------------------
# The evals.yaml document


class Config(Deferred):
    """The validated, layered result of loading evals.yaml: what a run needs, frozen."""

    # Built from models already validated (model_construct): its own validator, which is every
    # backend's and every benchmark kind's, is built only if something validates a Config.
    model_config = ConfigDict(frozen=True)
    path: Path
    models: tuple[Model, ...]
    benchmarks: tuple[Benchmark, ...]
    gate: GateSettings
    # Factories, not instances: an instance made here built its class's validator at import.
    baseline: BaselineSettings = Field(default_factory=BaselineSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    publish: PublishSettings = Field(default_factory=PublishSettings)
    where: dict[str, str] = Field(default_factory=dict, exclude=True, repr=False)
    """``"BENCH:field.path"`` → ``"file:line: field"``, for errors found after loading."""

    def locate(self, bench: str, field: str) -> str:
        """Where a benchmark's field was set (its entry when it was left at the default)."""
        return self.where.get(f"{bench}:{field}") or self.where.get(f"{bench}:", str(self.path))


# --------------------------------------------------------------------------------------------
# Loading


@functools.cache
def _any_kind() -> TypeAdapter[Benchmark]:
    """The whole union of kinds: only for an entry whose ``kind`` names none (its error says
    which kinds there are). Built on first use: building every kind's validator costs more than
    a small run's whole request phase (issue #36)."""
    return TypeAdapter(Benchmark)


# Union members by their tag: a config's validators are built for the members it names only.
_BACKENDS = members_by_tag(Model, "backend")
_SCORERS = members_by_tag(Scorer, "type")


def _validate_file(top: dict[str, object]) -> EvalsFile:
    """evals.yaml as a whole, its models through the backends it names (see ``_narrow``)."""
    if "models" in top:
        wanted = named_members(top["models"], "backend", _BACKENDS)
    else:  # the default: the embedded model
        wanted = (LocalModel,)
    return validate_narrowed(EvalsFile, top, "models", wanted, "backend")


def _validate_benchmark(data: object) -> Benchmark:
    """One benchmark entry, through its own kind's class: the union would pick the same class
    (it is discriminated by ``kind``), but building it builds every kind; and a scorer through
    the scorer it names (building every scorer builds the judge's, and every backend)."""
    kind = data.get("kind") if isinstance(data, dict) else None
    cls = BENCHMARK_KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        return _any_kind().validate_python(data)
    if isinstance(data, dict) and "scorer" in cls.model_fields:
        scorer = data.get("scorer", {"type": "exact"})  # absent: the default, an exact scorer
        wanted = named_members(scorer, "type", _SCORERS)
        return validate_narrowed(cls, data, "scorer", wanted, "type")
    return cls.model_validate(data)


def dump_benchmark(bench: Benchmark) -> dict[str, object]:
    """``bench.model_dump(mode="json")``, without building the validators of scorers it does
    not use (see ``_narrow``)."""
    if "scorer" in type(bench).model_fields:
        return dump_narrowed(bench, "scorer", "type")
    return bench.model_dump(mode="json")


# Fields holding file paths: resolved against the file that set them (cwd for the command line).
_PATH_FIELDS = {"jsonl": ("path",), "agent": ("tasks",), "verifiers": ("env_path",)}


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
            raise ConfigError(f"command line: {flag}: unknown field{suggest(bad[-1], names)}")


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
        evals = _validate_file(top)
    except ValidationError as exc:
        # Every mistake, not the first: the benchmarks are checked too, each on its own lines.
        problems = validation_messages(exc, top, top_origin, EvalsFile)
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
    resolved: list[Benchmark] = []
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
            where[f"models:{model.name}:{name}"] = locate(top_origin, ("models", i, name))
    config = Config.model_construct(
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


def _anchor_hf(data: dict[str, object], anchored: Callable[[Path_, str], str]) -> None:
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
    doc: Layer,
    index: int,
    entry: str | dict[str, object],
    top: dict,
    cli: Overrides,
    dirs: tuple[Path, ...],
) -> tuple[Benchmark, dict[str, str]]:
    """The validated benchmark, and where its located fields were set (see ``LOCATED``)."""
    at: Path_ = ("benchmarks", index)
    entry_data: dict[str, object] = {"name": entry} if isinstance(entry, str) else dict(entry)
    name = str(entry_data["name"])  # a string: EvalsFile validated the entries
    layers: list[Layer] = []
    if entry_data.get("kind") is None:
        layers.append(registry.load(name, dirs, where=doc.where(at)))
    # evals.yaml's global sampling/eval sit between the registry's defaults and the entry.
    glob = {k: top[k] for k in ("sampling", "eval") if isinstance(top.get(k), dict)}
    glob_lines = {p: ln for p, ln in doc.lines.items() if p and p[0] in ("sampling", "eval")}
    layers.append(Layer(data=glob, source=doc.source, lines=glob_lines))
    entry_lines = {p[len(at) :]: ln for p, ln in doc.lines.items() if p[: len(at)] == at}
    layers.append(Layer(data=entry_data, source=doc.source, lines=entry_lines, prefix=at))
    cli_glob = {k: cli.top[k] for k in ("sampling", "eval") if k in cli.top}
    layers.append(Layer(data=cli_glob, source="command line"))
    per_bench = cli.per_benchmark.get(name)
    # Named as typed (`benchmarks.NAME.field`), not as a bare `field`.
    layers.append(Layer(data=per_bench, source="command line", prefix=("benchmarks", name)))
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
        command: object = (  # YAML data, not yet validated
            (data.get("agent") or {}).get("command")
            if isinstance(data.get("agent"), dict)
            else None
        )
        # A relative program path ("./agents/run.sh") is the user's file; a bare name is on PATH.
        if isinstance(command, list) and command:
            program = command[0]
            if isinstance(program, str) and "/" in program and not program.startswith("/"):
                command[0] = anchored(("agent", "command", 0), program)
    try:
        bench = _validate_benchmark(data)
    except ValidationError as exc:
        # Name the field as the user wrote it: inside their entry, or in the registry file.
        raise_validation(exc, data, origin, kind_type(data))
    entry_at = f"{doc.where(at)}: {format_path(at)}"
    located = {key: locate(origin, tuple(key.split("."))) if key else entry_at for key in LOCATED}
    # A field left at its default has no line of its own: point at the benchmark's entry.
    return bench, {k: v if HAS_LINE.match(v) else entry_at for k, v in located.items()}

"""Why evals.yaml does not validate, in one line per mistake: a pydantic error turned into the
file, line and field it came from, the words a user reads (never pydantic's), and the fix
(a near name, the type wanted, a percent hint). :mod:`evalgate.config.load` raises them."""

from __future__ import annotations

import re
import types
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Literal, NoReturn, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ValidationError,
)

from evalgate.config._document import BENCHMARK_KINDS, EvalsFile
from evalgate.config._wording import PATTERNS as _PATTERNS
from evalgate.config._wording import mapping_words, shown, typing_hint
from evalgate.config._yamlio import Layer, Path_, format_path
from evalgate.config.spec import (
    Benchmark,
    EvalSettings,
    Model,
    Sampling,
)
from evalgate.errors import ConfigError

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

__all__ = [
    "HAS_LINE",
    "LOCATED",
    "kind_type",
    "locate",
    "raise_validation",
    "suggest",
    "valid_fields",
    "validation_messages",
]


def _members(tp: object) -> list[object]:
    """Flatten Annotated/Union into concrete member types."""
    if get_origin(tp) is Annotated:
        return _members(get_args(tp)[0])
    if get_origin(tp) in (Union, types.UnionType):
        return [m for arg in get_args(tp) for m in _members(arg)]
    return [tp]


def _accepts(member: type[BaseModel], data: object) -> bool:
    """False when ``data`` sets a Literal field (a union tag) to a value the member rejects."""
    if not isinstance(data, dict):
        return True
    for name, info in member.model_fields.items():
        literal = get_origin(info.annotation) is Literal
        if literal and name in data and data[name] not in get_args(info.annotation):
            return False
    return True


def valid_fields(tp: object, keys: Path_, data: object = None) -> tuple[Path_, list[str]] | None:
    """Walk ``keys`` through the schema type ``tp`` (and ``data``, to pick union members).

    None if the path exists; else where it stopped and the field names valid there, for
    "unknown field; valid fields: …".
    """
    current = [tp]
    for depth, key in enumerate(keys):
        nxt: list[object] = []
        names: list[str] = []
        members = [m for t in current for m in _members(t)]
        models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        chosen = [m for m in models if _accepts(m, data)] or models
        for member in chosen:  # each a BaseModel subclass
            names += [n for n in member.model_fields if n not in names]
            if key in member.model_fields:
                nxt.append(member.model_fields[key].annotation)
        for generic in members:
            if get_origin(generic) is dict:
                nxt.append(get_args(generic)[1])
            elif get_origin(generic) is list and isinstance(key, int):
                nxt.append(get_args(generic)[0])
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


def kind_type(data: object) -> object:
    """The schema type a benchmark entry is checked against: its kind's model, or the union."""
    kind = data.get("kind") if isinstance(data, dict) else None
    return BENCHMARK_KINDS.get(kind, Benchmark) if isinstance(kind, str) else Benchmark


def raise_validation(
    exc: ValidationError, data: object, origin: dict[Path_, Layer], root: object
) -> NoReturn:
    """Translate pydantic's errors into ``file:line: field: message`` lines, one per field."""
    raise ConfigError("\n".join(validation_messages(exc, data, origin, root))) from None


def validation_messages(
    exc: ValidationError, data: object, origin: dict[Path_, Layer], root: object
) -> list[str]:
    """One line per field in error (a union's members each complain about the same field: the
    first complaint is kept). An unknown key first: `benchmark:` for `benchmarks:` is a typo,
    not a missing field, and the rest may follow from it."""
    errors = exc.errors(include_url=False)
    errors = sorted(errors, key=lambda e: e["type"] != "extra_forbidden")
    located = [(err, *_one_error(err, data, root)) for err in errors]
    lines: dict[Path_, str] = {}
    typo_at: set[Path_] = set()  # mappings with an unknown key: a missing field there is its twin
    for err, tpath, msg in located:
        if _wrong_member(err, tpath, located):
            continue
        if err["type"] == "extra_forbidden":
            typo_at.add(tpath[:-1])
        elif err["type"] == "missing" and tpath[:-1] in typo_at:
            continue
        lines.setdefault(tpath, f"{locate(origin, tpath)}: {msg}")
    return list(lines.values())


def _wrong_member(
    err: ErrorDetails, tpath: Path_, located: list[tuple[ErrorDetails, Path_, str]]
) -> bool:
    """Whether ``err`` is a union member refusing the value's shape (`[0, .inf]` is not
    'proportion') while another member, whose shape it is, names what is wrong inside it: the
    user meant that member, so only its complaint is shown."""
    if not (err["type"] == "literal_error" or err["type"].endswith("_type")):
        return False
    return any(
        other is not err
        and not (other["type"] == "literal_error" or other["type"].endswith("_type"))
        and path[: len(tpath)] == tpath
        and len(other["loc"]) > len(err["loc"]) - 1
        and other["loc"][: len(err["loc"]) - 1] == err["loc"][:-1]
        for other, path, _ in located
    )


def _child(node: object, part: str | int) -> tuple[bool, object]:
    """Whether the YAML value ``node`` has a key or index ``part``, and the value there."""
    if isinstance(node, dict):
        return part in node, node.get(part)
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return True, node[part]
    return False, None


def _one_error(err: ErrorDetails, data: object, root: object) -> tuple[Path_, str]:
    # pydantic puts union tags ('local', 'arith', 'str') in loc; keep only the parts that are
    # keys of the data, so the field path reads like the file.
    path: list[str | int] = []
    node: object = data
    loc = err["loc"]
    if err["type"] in ("yes_no_number", "field_combo"):  # the model names the field in ctx
        loc = (*loc, err["ctx"]["field"])
    for part in loc:
        found, child = _child(node, part)
        if found:
            path.append(part)
            node = child
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


def locate(origin: dict[Path_, Layer], tpath: Path_) -> str:
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
HAS_LINE = re.compile(r"^(.+:\d+|command line): ")
LOCATED = (
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


def _message(err: ErrorDetails, node: object, root: object, path: Path_, data: object) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        found = valid_fields(root, path, data)
        hint = suggest(path[-1], found[1]) if found else ""
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
        got = len(node) if isinstance(node, list | dict | str) else "?"
        return f"must have {least} {count} item{'s' if count != 1 else ''} (got {got})"
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
    number = node if isinstance(node, int | float) and not isinstance(node, bool) else None
    percentish = bool(_PERCENTISH & {str(p) for p in path})  # a share written as a percent
    if (
        kind == "less_than_equal"
        and ctx.get("le") == 1
        and number is not None
        and 1 < number <= 100
    ):
        hint = f"; {number:g} means {number:g} %? write {number / 100:g}" if percentish else ""
    return f"{msg} (got {shown(node)}{hint})"


# Fields that hold a share of something, which people write as a percent (margin: 3 for 3 pp):
# a probability such as top_p is not one, and the hint would mislead there.
_PERCENTISH = frozenset({"margin", "max_error_rate", "thresholds"})


def _owners(path: Path_, in_entry: bool) -> str:
    """`path:` on an arith benchmark, `n_ctx:` on an openai model: a field of another kind."""
    key = path[-1] if path else None
    family: Mapping[str, type[BaseModel]]
    if in_entry and len(path) == 1:  # a benchmark's own field (paths relative to the entry)
        family, tag = BENCHMARK_KINDS, "kind"
    elif len(path) == 3 and path[0] == "models":
        members = [m for m in _members(Model) if isinstance(m, type) and issubclass(m, BaseModel)]
        family = {get_args(m.model_fields["backend"].annotation)[0]: m for m in members}
        tag = "backend"
    else:
        return ""
    owners = [name for name, cls in family.items() if key in cls.model_fields]
    if not owners or len(owners) == len(family):
        return ""
    return f"; {key!r} is a field of {tag} {', '.join(map(repr, owners))}"


def suggest(key: object, names: list[str]) -> str:
    """ "; did you mean …?" for a typo or a field that lives one level down, then the valid list."""
    import difflib  # a mistake's suggestion only: not every load's import

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

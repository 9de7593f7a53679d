"""What a run measured, and with what: the comparability fingerprint.

Two parts. The *measurement* (scorer, rollouts k, scoring semantics) must match for a PR run to
be compared with a baseline: otherwise a changed score could be a changed ruler. The *subject*
(model, prompt template, system prompt, sampling) is what a PR is allowed to change — it is what
the gate evaluates — so differences there are reported, not refused. Items are matched one by one
through ``identity``: an item whose prompt, reference answer or anything else that decides its
score (``Item.exam``: a task's checks and environment, a row's other columns) changed is not paired.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from pydantic import BaseModel
from pydantic.main import IncEx

from evalgate.config.split import DERIVED, FIELDS, Measured

try:  # item hashes: the same bytes as the stdlib's compact form, faster (see item_hash)
    from orjson import dumps as _fast_dumps
except ImportError:  # pragma: no cover - where orjson is not installed
    _fast_dumps = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from evalgate.config.spec import AgentVariant, Benchmark, Model
    from evalgate.suites.base import Item

__all__ = [
    "SCORING_VERSION",
    "Fingerprint",
    "dataset_hash",
    "fingerprint",
    "identity",
    "item_hash",
    "measurement",
]

# Bump when a scorer's or a metric's meaning changes, or how an item is identified: old
# baselines become non-comparable (the Action's `baseline: auto` then evaluates the base again).
# 2: an item's hash covers what decides its score (task files, tests, environment: Item.exam).
SCORING_VERSION = 2


def _digest(value: object, size: int = 16) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:size]


def item_hash(prompt: str, answer: str, exam: str = "") -> str:
    """Content hash of one item: its raw prompt, reference answer and ``exam`` digest (what else
    decides its score, ``Item.exam``). Without an exam digest, the two-string form of old: a
    baseline of plain questions stays comparable.

    The bytes hashed are :func:`_digest`'s (a compact UTF-8 JSON array of the strings), encoded
    with orjson where it is installed: the same bytes for a list of strings, in a quarter of the
    time, and every run hashes each of its items twice (the dataset hash, each item's first
    record). tests/test_engine.py holds the two equal on awkward strings."""
    return _digest_strings([prompt, answer, exam] if exam else [prompt, answer])


def _digest_strings(value: list[str] | list[list[str]], size: int = 16) -> str:
    """:func:`_digest` of a list of strings (or of lists of strings), which has no keys to sort
    and no numbers to spell: orjson's bytes are the stdlib's there."""
    if _fast_dumps is not None:
        try:
            encoded = _fast_dumps(value)
        except TypeError:  # a lone surrogate: the stdlib path raises as it always did
            pass
        else:
            return hashlib.sha256(encoded).hexdigest()[:size]
    return _digest(value, size)


def identity(item: Item) -> str:
    """The content hash base and PR items must share to be paired."""
    return item_hash(item.prompt, item.answer, item.exam)


def dataset_hash(items: Sequence[Item]) -> str:
    return _digest_strings(sorted([i.id, identity(i)] for i in items), 32)


_BENCH = "benchmarks[]."
_ABSENT = object()  # a field the benchmark's kind does not have; a derived value not recorded


def _field(obj: object, path: str) -> object:
    """The value at a dotted ``path`` of a config model; _ABSENT where a model lacks it."""
    for name in path.split("."):
        if not isinstance(obj, BaseModel) or name not in type(obj).model_fields:
            return _ABSENT
        obj = getattr(obj, name)
    return obj


def _unmeasured(path: str) -> dict[str, IncEx | bool]:
    """Pydantic's ``exclude`` for a measured section: its fields FIELDS classifies otherwise."""
    out: dict[str, IncEx | bool] = {}
    for key, entry in FIELDS.items():
        rest = key.removeprefix(path + ".")
        if rest == key or isinstance(entry, Measured):
            continue
        head, _, deeper = rest.partition(".")
        if not deeper:
            out[head] = True
        elif sub := _unmeasured(f"{path}.{head}"):
            out[head] = sub
    return out


def _recorded(value: object, path: str, form: str) -> object:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude=_unmeasured(path) or None)
    if form == "file-name" and isinstance(value, str):
        # A task file by its name, not its absolute path: the base's run happens in another
        # checkout (its code is hashed with the items).
        file, at_sign, func = value.partition("@")
        return Path(file).name + at_sign + func if file.endswith(".py") else value
    return value


def _put(out: dict[str, object], at: str, value: object) -> None:
    *parents, leaf = at.split(".")
    for parent in parents:
        section = out.setdefault(parent, {})
        assert isinstance(section, dict), at  # FIELDS puts no value where a section goes
        out = section
    out[leaf] = value


def _verifiers_version(bench: Benchmark) -> object:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("verifiers")
    except PackageNotFoundError:
        return None


def _judge_protocol(bench: Benchmark) -> object:
    if getattr(getattr(bench, "scorer", None), "type", None) != "judge":
        return _ABSENT
    from evalgate.score.judge import JUDGE_PROTOCOL  # the default prompts' and parsing's version

    return JUDGE_PROTOCOL


# How each value config.split.DERIVED declares is found (tests/test_fingerprint_fields.py
# checks that the two name the same values).
_DERIVE: dict[str, Callable[[Benchmark], object]] = {
    "scoring_version": lambda bench: SCORING_VERSION,
    "environment.verifiers": _verifiers_version,
    "scorer.protocol": _judge_protocol,
}


def measurement(bench: Benchmark) -> dict[str, object]:
    """What ``bench`` measures with: the exam fields :data:`evalgate.config.split.FIELDS` marks
    measured, and the values it declares derived (:data:`~evalgate.config.split.DERIVED`).

    The one derivation that both the base policy (before a PR's run: a change FAILs) and the
    comparison (after it: a differing baseline is not comparable) read, so neither sees a
    change the other misses. Paths are left out (they differ between checkouts); their contents
    are the items, which ``item_hash`` pairs one by one."""
    out: dict[str, object] = {}
    for path, entry in FIELDS.items():
        if not isinstance(entry, Measured) or not path.startswith(_BENCH):
            continue
        value = _field(bench, path.removeprefix(_BENCH))
        if value is _ABSENT:
            if entry.when != "always":
                continue
            value = None
        if value is None and entry.when == "set":
            continue
        _put(out, entry.at, _recorded(value, path, entry.form))
    for at in DERIVED:
        section = at.rpartition(".")[0]
        if section and not isinstance(out.get(section), dict):
            continue  # a section's value only where the section is
        if (value := _DERIVE[at](bench)) is not _ABSENT:
            _put(out, at, value)
    return out


class Subject(TypedDict):
    """What answered: the PR's to change, so differences are reported, not refused."""

    model_id: str
    model: str  # a digest of the model's config, its label left out
    prompt: str  # a digest of the system prompt and the prompt template
    sampling: dict[str, object]
    chat_template: str | None  # the applied template's sha256, where the server says
    agent: str | None  # a digest of an agent's set-up and variant


class Dataset(TypedDict):
    hash: str  # dataset_hash of the items
    items: int


class Fingerprint(TypedDict):
    """A run's fingerprint, as run_config.json holds it."""

    measurement: dict[str, object]
    subject: Subject
    dataset: Dataset


def fingerprint(
    bench: Benchmark,
    model: Model,
    model_id: str,
    items: Sequence[Item],
    *,
    chat_template: str | None = None,
    variant: AgentVariant | None = None,
) -> Fingerprint:
    """The run's fingerprint, saved in run_config.json."""
    model_cfg = model.model_dump(mode="json", exclude={"name"})
    return {
        "measurement": measurement(bench),
        "subject": {
            "model_id": model_id,
            "model": _digest(model_cfg),
            "prompt": _digest(
                [getattr(bench, "system_prompt", None), getattr(bench, "prompt_template", None)]
            ),
            "sampling": bench.sampling.model_dump(mode="json"),
            "chat_template": chat_template,
            # The agent set-up is what an agent team's PR changes: subject, not measurement.
            "agent": _digest([agent.model_dump(mode="json"), getattr(variant, "name", None)])
            if (agent := getattr(bench, "agent", None)) is not None
            else None,
        },
        "dataset": {"hash": dataset_hash(items), "items": len(items)},
    }

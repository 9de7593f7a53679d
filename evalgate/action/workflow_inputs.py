"""The workflow's inputs in PR mode: which of them would change the exam.

On ``pull_request`` the workflow file is the PR's, so its ``with:`` inputs are the PR author's
too. An input that changes the exam — an ``overrides`` entry on an exam field
(:mod:`evalgate.config.split`), a ``config`` or ``working_directory`` other than the base's — is
not applied to the exam and fails the gate with the reason first; candidate-field overrides
(sampling, a model's options) stay allowed. The base's own inputs are read from the base
commit's workflows (the steps that use evalgate): the PR cannot edit those.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

import yaml

from evalgate.config.overrides import parse_overrides
from evalgate.config.split import field_role
from evalgate.errors import ConfigError

__all__ = ["base_overrides", "base_step_inputs", "baseline_input_changes", "exam_overrides"]


def _split_path(keys: tuple[str, ...]) -> str:
    if keys[0] in ("benchmarks", "models"):
        return ".".join((f"{keys[0]}[]", *keys[2:]))
    return ".".join(keys)


def exam_overrides(overrides: tuple[str, ...]) -> tuple[list[str], tuple[str, ...]]:
    """(the exam fields the overrides change, the overrides that change only the candidate).
    An override of a field nothing classifies counts as the exam's (fail closed); top-level
    ``sampling`` is the candidate's, ``eval`` the exam's, as in evals.yaml."""
    exam: list[str] = []
    candidate: list[str] = []
    for raw in overrides:
        try:
            (keys,) = parse_overrides([raw]).paths
        except ConfigError:  # not an override load_config would take: it changes nothing
            exam.append(raw.partition("=")[0])
            continue
        if field_role(_split_path(keys)) in ("candidate", "secret"):
            candidate.append(raw)
        else:
            exam.append(".".join(keys))
    return exam, tuple(candidate)


def _is_evalgate(uses: str, action_repo: str | None, local: bool) -> bool:
    """Whether a step's ``uses:`` is evalgate: the running action's repository, a name ending
    in ``evalgate``, or ``./`` in evalgate's own repository (``local``)."""
    name = uses.split("@", 1)[0].strip().lower()
    if action_repo and name == action_repo.lower():
        return True
    return re.search(r"(^|/)evalgate($|[/@:-])", name) is not None or (local and name == "./")


def _steps(doc: object) -> list[Mapping[str, object]]:
    jobs = doc.get("jobs") if isinstance(doc, Mapping) else None
    out: list[Mapping[str, object]] = []
    for job in jobs.values() if isinstance(jobs, Mapping) else ():
        steps = job.get("steps") if isinstance(job, Mapping) else None
        out += [s for s in steps or () if isinstance(s, Mapping)]
    return out


def _evalgate_steps(tree: Path, environ: Mapping[str, str]) -> list[Mapping[str, object]] | None:
    """The ``with:`` of every step of the base's workflows that runs evalgate in run mode;
    None when the base has no such step (its workflows say nothing about evalgate)."""
    folder = tree / ".github" / "workflows"
    found: list[Mapping[str, object]] = []
    repo = environ.get("GITHUB_ACTION_REPOSITORY") or None
    action = tree / "action.yml"
    local = action.is_file() and "evalgate" in action.read_text(encoding="utf-8", errors="replace")
    for path in sorted(folder.glob("*.y*ml")) if folder.is_dir() else ():
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue  # not a workflow this reader understands: it names no step
        for step in _steps(doc):
            uses = step.get("uses")
            if not isinstance(uses, str) or not _is_evalgate(uses, repo, local):
                continue
            given = step.get("with")
            if not isinstance(given, Mapping):
                given = {}
            if str(given.get("mode", "run")) != "publish":
                found.append(given)
    return found or None


def base_step_inputs(
    tree: Path, environ: Mapping[str, str]
) -> list[tuple[str | None, str | None]] | None:
    """The (config, working_directory) of every evalgate step of the base's workflows (defaults
    filled in; None where the value is an expression, unknowable here); None when none."""
    steps = _evalgate_steps(tree, environ)
    if steps is None:
        return None
    out = []
    for given in steps:
        folder = _value(given.get("working_directory"), ".")
        out.append((_value(given.get("config"), "evals.yaml"), folder and os.path.normpath(folder)))
    return out


def base_overrides(tree: Path, environ: Mapping[str, str]) -> set[str]:
    """The ``overrides`` lines the base's own evalgate steps pass (``--`` and comments
    dropped, as the Action reads them): those are the base's, on an exam field too."""
    out: set[str] = set()
    for given in _evalgate_steps(tree, environ) or []:
        text = given.get("overrides")
        for line in str(text or "").splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "${{" not in line:
                out.add(line.removeprefix("--"))
    return out


def baseline_input_changes(
    tree: Path, environ: Mapping[str, str], given: Mapping[str, str], base: Mapping[str, str]
) -> list[str]:
    """The ``baseline`` / ``results_store`` inputs (``given``, empty: unset) that would change
    where the baseline comes from: a value neither the base's evals.yaml (``base``) nor any
    evalgate step of the base's workflows gives. (`baseline: none` would drop the comparison;
    `results_store: local:PATH` would compare with runs the PR wrote.)"""
    steps = _evalgate_steps(tree, environ) or []
    mode = given.get("baseline") or base.get("baseline")
    # Harmless whatever the base says: a re-run of the base commit is the true baseline, and
    # without a store `auto` re-runs it.
    harmless = {
        "baseline": ("auto", "rerun"),
        "results_store": ("none",) if mode != "stored" else (),
    }
    out = []
    for name, value in given.items():
        if not value or value == base.get(name) or value in harmless.get(name, ()):
            continue
        if any(_value(step.get(name), "") in (None, value) for step in steps):
            continue  # the base's own workflow passes it (or an expression: unknowable)
        out.append(f"{name} {value} (the `{name}` input; the base's is {base.get(name)})")
    return out


def _value(value: object, default: str) -> str | None:
    if value is None or str(value).strip() == "":
        return default
    text = str(value).strip()
    return None if "${{" in text else text

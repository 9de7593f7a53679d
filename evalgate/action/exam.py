"""The exam from the base commit, the candidate from the PR (see :mod:`evalgate.config.split`).

In PR mode the base commit's whole tree is materialised (``git archive``, through the one git
wrapper: git, not the PR's working tree, so nothing the PR edits reaches the measurement) and
its evals.yaml loaded there, so that its exam paths (data files, task folders, inspect task
files, verifiers environments) resolve to the base's files. :func:`merge` then lays the PR's
candidate fields over the base's benchmarks; :func:`exam_changes` says what the PR changed in the
exam (applied after merge), :func:`check_secret_routes` refuses a secret the PR would send
somewhere the base does not, and :func:`check_paths` refuses a path out of the repository.
"""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from evalgate.action import git as gitops
from evalgate.config.load import Config
from evalgate.config.routes import routes
from evalgate.config.split import field_role, merge_benchmark
from evalgate.errors import ConfigError
from evalgate.report import code_span

__all__ = [
    "anchor_local_data",
    "check_paths",
    "check_secret_routes",
    "exam_changes",
    "materialise",
    "merge",
    "secret_routes",
]

# Exam fields that hold a path (resolved to an absolute one by the loader, or by
# anchor_local_data): the PR's edits to the files they name are exam changes too.
_PATH_FIELDS = ("path", "tasks", "env_path", "task", "data_files", "dataset")


def anchor_local_data(config: Config, cwd: Path) -> Config:
    """``config`` with an hf benchmark's local ``data_files`` (and a ``dataset`` that is a local
    folder) made absolute against ``cwd``, where `datasets` would look for them: in the base's
    tree they must name the base's files, not the PR's checkout."""
    benchmarks = []
    for bench in config.benchmarks:
        update: dict[str, Any] = {}
        if bench.kind == "hf":
            files = bench.data_files
            if isinstance(files, str) and not Path(files).is_absolute():
                update["data_files"] = str(cwd / files)
            elif isinstance(files, list):
                update["data_files"] = [f if Path(f).is_absolute() else str(cwd / f) for f in files]
            if not Path(bench.dataset).is_absolute() and (cwd / bench.dataset).exists():
                update["dataset"] = str(cwd / bench.dataset)
        benchmarks.append(bench.model_copy(update=update) if update else bench)
    return config.model_copy(update={"benchmarks": tuple(benchmarks)})


def materialise(workdir: Path, sha: str, into: Path) -> None:
    """The tree of commit ``sha`` (the whole repository), written under ``into``.

    A symlink that leads out of the tree is not written: the exam never reads outside it."""

    # On disk, not in memory: a repository can be large.
    with tempfile.TemporaryDirectory(prefix="evalgate-archive-") as tmp:
        archive = Path(tmp) / "base.tar"
        gitops.git(workdir, "archive", "--format=tar", f"--output={archive}", sha, timeout=600)
        with tarfile.open(archive) as tar:
            # members=, not filter=: the Action image's Python (3.11.2) predates filter=.
            tar.extractall(into, members=list(_inside(tar, str(into))))


def _inside(tar: tarfile.TarFile, dest: str) -> Iterator[tarfile.TarInfo]:
    """The members that stay inside ``dest``: tarfile's own ``data_filter`` where this Python
    has it (3.11.4+), else the same rules for what ``git archive`` writes (files, folders,
    links): no absolute or ``..`` names, no link whose target leaves the tree."""
    root = os.path.realpath(dest)
    for member in tar.getmembers():
        data_filter = getattr(tarfile, "data_filter", None)
        if data_filter is not None:
            try:
                kept = data_filter(member, dest)
            except tarfile.FilterError:
                continue
            yield kept
            continue
        if not (member.isfile() or member.isdir() or member.issym()):
            continue
        path = os.path.realpath(os.path.join(root, member.name))
        if os.path.isabs(member.name) or os.path.commonpath([root, path]) != root:
            continue
        if member.issym():
            target = os.path.normpath(
                os.path.join(os.path.dirname(os.path.join(root, member.name)), member.linkname)
            )
            if os.path.isabs(member.linkname) or os.path.commonpath([root, target]) != root:
                continue
        yield member


def merge(base: Config, pr: Config) -> Config:
    """The PR's config with the base's exam: each benchmark the base defines keeps the base's
    definition with the PR's candidate fields laid over it; the models (the candidate) are the
    PR's; gate, baseline and publishing the base's (budgets: see ``apply_ceiling``). A benchmark
    only the PR has is its proposal: the base sets no threshold or baseline for it, and it runs
    after the base's."""
    ours = {b.name: _anchor_labels(b, base.path.parent) for b in base.benchmarks}
    theirs = {b.name: b for b in pr.benchmarks}
    # The base's benchmarks first, in the base's order; then the PR's own (its proposals), so
    # that nothing the PR adds runs before the exam (a budget spent, a shared file written).
    benchmarks = tuple(
        merge_benchmark(ours[name], theirs[name]) for name in ours if name in theirs
    ) + tuple(b for b in pr.benchmarks if b.name not in ours)
    update = {"benchmarks": benchmarks, "publish": base.publish}
    return pr.model_copy(update=update)


def _anchor_labels(bench: Any, root: Path) -> Any:
    """A judge's labelled set is named relative to its evals.yaml: the base's, in the base's
    tree (the merged config keeps the PR's path), so the PR cannot edit the agreement shown."""
    scorer: Any = getattr(bench, "scorer", None)
    labels = getattr(scorer, "labels", None)
    if labels is None or Path(labels).is_absolute():
        return bench
    anchored = scorer.model_copy(update={"labels": str(root / labels)})
    return bench.model_copy(update={"scorer": anchored})


def _digest(path: Path) -> str:
    """Content of a file or a folder (names, modes, bytes, symlink targets), as one hash."""
    h = hashlib.sha256()
    if path.is_dir() and not path.is_symlink():
        items: Iterator[Path] = iter(sorted(path.rglob("*")))
    else:
        items = iter([path])
    for item in items:
        h.update(item.relative_to(path).as_posix().encode() if item != path else b".")
        if item.is_symlink():
            h.update(b"l" + os.readlink(item).encode())
        elif item.is_file():
            h.update(b"f%o" % (item.stat().st_mode & 0o111) + item.read_bytes())
        h.update(b"\0")
    return h.hexdigest() if path.exists() or path.is_symlink() else "absent"


def _relative(value: str, root: Path) -> tuple[str, Path] | None:
    file, _, func = value.partition("@")  # an inspect task: file.py@name
    full = Path(file)
    if not full.is_absolute():
        return None
    try:
        rel = full.relative_to(root)
    except ValueError:
        return None
    return rel.as_posix() + (f"@{func}" if func else ""), full


def _path_change(name: str, old: Any, new: Any, base_root: Path, pr_root: Path) -> str | None:
    """How a path field changed: "" (not at all), its name (another path), "the files of …"
    (the same path, other contents); None when the values are not paths in the two trees."""
    olds = [old] if isinstance(old, str) else old
    news = [new] if isinstance(new, str) else new
    if not isinstance(olds, list) or not isinstance(news, list) or len(olds) != len(news):
        return None
    for a_value, b_value in zip(olds, news, strict=True):
        a, b = _relative(a_value, base_root), _relative(b_value, pr_root)
        if a is None or b is None:
            return None
        if a[0] != b[0]:
            return name
        if _digest(a[1]) != _digest(b[1]):
            return f"the files of {name} ({a[0]})"
    return ""


_SHOWN = 40  # characters of a changed value shown in the note; the rest is the diff's


def _shown(value: Any) -> str:
    """A changed value for the note: evalgate's own numbers as they are, anything else (text
    from the PR: prompts, names) in a code span, cut to a few words."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # `120`, as written, not the loader's `120.0`
    if value is None or isinstance(value, bool | int | float):
        return code_span("null" if value is None else json.dumps(value))
    if isinstance(value, BaseModel):  # a section of another kind: what it is, then its fields
        value = value.model_dump(mode="json", exclude_defaults=True)
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return code_span(text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…")


def _which(name: str, old: Any, new: Any) -> list[str]:
    """Each changed leaf under ``name``, named and with both values: ``eval.max_error_rate``
    of a section, a key of a map (``gate.thresholds.qa.accuracy``), added or removed."""
    if isinstance(old, BaseModel) and type(old) is type(new):
        subs = [f for f in type(old).model_fields if getattr(old, f) != getattr(new, f)]
        out = [c for f in subs for c in _which(f"{name}.{f}", getattr(old, f), getattr(new, f))]
        return out or [code_span(name)]
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out = []
        for key in dict.fromkeys([*old, *new]):
            if key not in new:
                out.append(f"{code_span(f'{name}.{key}')} removed (was {_shown(old[key])})")
            elif key not in old:
                out.append(f"{code_span(f'{name}.{key}')} added ({_shown(new[key])})")
            elif old[key] != new[key]:
                out += _which(f"{name}.{key}", old[key], new[key])
        return out or [code_span(name)]
    return [f"{code_span(name)} {_shown(old)} → {_shown(new)}"]


def _fields(obj: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    for name in type(obj).model_fields:
        path, value = f"{prefix}.{name}", getattr(obj, name)
        if field_role(path) is None and isinstance(value, BaseModel):
            yield from _fields(value, path)  # a section whose fields are classified one by one
        else:
            yield path, value


def exam_changes(base: Config, base_root: Path, pr: Config, pr_root: Path) -> list[str]:
    """What the PR changes in the exam, one phrase per benchmark (``qa: eval, the data file``)."""
    out = []
    theirs = {b.name: b for b in pr.benchmarks}
    for bench in base.benchmarks:
        other = theirs.get(bench.name)
        if other is None:
            continue  # reported as removed by policy_checks
        changed: list[str] = []
        if type(other) is not type(bench):
            changed += _which("kind", getattr(bench, "kind", None), getattr(other, "kind", None))
        else:
            mine = dict(_fields(bench, "benchmarks[]"))
            for path, value in _fields(other, "benchmarks[]"):
                if field_role(path) != "exam" or path.endswith(".kind"):
                    continue
                name = path.removeprefix("benchmarks[].")
                old = mine.get(path)
                found = (
                    _path_change(name, old, value, base_root, pr_root)
                    if name in _PATH_FIELDS
                    else None
                )
                if found is not None:
                    changed += [found] if found else []
                    continue
                if old != value:
                    changed += _which(name, old, value)
        if changed:
            out.append(f"{bench.name}: {', '.join(dict.fromkeys(changed))}")
    for section in ("gate", "baseline", "publish"):  # a budget is a ceiling: apply_ceiling's note
        if getattr(base, section) != getattr(pr, section):
            out.append(", ".join(_which(section, getattr(base, section), getattr(pr, section))))
    return out


# -- secrets -----------------------------------------------------------------------------------


def secret_routes(config: Config) -> set[tuple[str, str]]:
    """Every (secret, destination) pair a config sends (:func:`evalgate.config.routes.routes`)."""
    return {(r.secret, r.dest) for r in routes(config)}


# The job's own credentials: never a model's key, whatever the base says (the first PR too).
_JOB_SECRETS = ("INPUT_", "ACTIONS_", "RUNNER_")


def check_secret_routes(base: Config | None, pr: Config, config_name: str) -> None:
    """Refuse, in one line, a secret the run would send where the base config never sends it
    (``base`` None: no base config, the first adoption: only the job's own credentials).

    The routes walked are those of what runs: the PR's models with the base's exam laid over
    the PR's config (:func:`merge`), so a judge, grader or LiteLLM endpoint of a benchmark only
    the PR has is checked like a model, and a base benchmark's judge stays the base's."""
    run = merge(base, pr) if base is not None else pr
    allowed = secret_routes(base) if base is not None else None
    for route in routes(run):
        head = f"{config_name}: {route.where}: {route.field}"
        if route.secret.startswith(_JOB_SECRETS):
            raise ConfigError(
                f"{head}: {route.secret} is the job's own credential, never a model's key; refused"
            )
        if allowed is not None and (route.secret, route.dest) not in allowed:
            raise ConfigError(
                f"{head}: this PR would send {route.secret} to {route.dest}, where the base "
                "branch never sends it; refused (a secret goes only where the base's config "
                "sends it: land the change on the base branch first)"
            )


# -- paths -------------------------------------------------------------------------------------


def _candidate_paths(config: Config) -> Iterator[tuple[str, str]]:
    for bench in config.benchmarks:
        for name in ("path", "tasks", "env_path", "task"):  # made absolute by the loader
            value = getattr(bench, name, None)
            if isinstance(value, str) and (name != "task" or ".py" in value):
                yield f"{bench.name}: {name}", value.partition("@")[0]
        files = getattr(bench, "data_files", None)
        for value in [files] if isinstance(files, str) else files or []:
            if Path(value).is_absolute():  # anchored by the loader next to evals.yaml
                yield f"{bench.name}: data_files", value
        dataset = getattr(bench, "dataset", None) if bench.kind == "hf" else None
        if isinstance(dataset, str) and Path(dataset).is_absolute():  # a local folder
            yield f"{bench.name}: dataset", dataset
        for variant in getattr(bench, "variants", ()):
            for name in ("skills_dir", "mcp_config"):
                if (value := getattr(variant, name)) is not None:
                    yield f"{bench.name}: variants.{variant.name}.{name}", value
        command = getattr(getattr(bench, "agent", None), "command", None)
        if command and os.sep in command[0]:  # a bare name is a program on PATH
            yield (
                f"{bench.name}: agent.command (a bare program name is looked up on PATH)",
                (command[0]),
            )
    for model in config.models:
        if template := getattr(model, "chat_template", None):
            full = Path(config.path).parent / Path(template).expanduser()
            if os.sep in template or full.exists():  # else a built-in template's name
                yield f"models.{model.name}: chat_template", str(full)


def check_paths(config: Config, root: Path, config_name: str) -> None:
    """Refuse, in one line, a path in ``config`` that leads out of the repository at ``root``
    (a host path like ``/root/.ssh``, or a symlink out of it)."""
    top = root.resolve()
    for what, value in _candidate_paths(config):
        real = Path(os.path.realpath(os.path.expanduser(value)))
        if real != top and top not in real.parents:
            raise ConfigError(
                f"{config_name}: {what}: {value} is outside the repository (resolves to "
                f"{real}); paths in {config_name} must stay inside it"
            )

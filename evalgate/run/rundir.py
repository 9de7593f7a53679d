"""The run directory: the one loader every reader uses, and finding runs under an output root.

``{root}/evals/{benchmark}--{org}--{model}/{run_id}/`` holds ``run_config.json``,
``results.jsonl`` (one line per rollout, appended and flushed as rollouts finish, so a crash loses
nothing already computed), ``metadata.json`` (written when the run finishes) and ``logs/``. Per
invocation, ``{root}`` gets ``scorecard.md`` and ``verdict.json``.

The layout is spelled in :mod:`evalgate.run.layout`, the two JSON files' formats are
:mod:`evalgate.run.runfiles`' models, the journal's :mod:`evalgate.run.records`'. The run writes
through :class:`RunDir`; `local --baseline`, `compare`, `resume`, `runs`, `show`, the Action and
`push` find runs with :func:`find_runs`/:func:`find_run_dirs` and read them with :func:`load_run`
(or, to list what is there, damaged or not, :func:`read_run_config`). A file that is not what
evalgate writes is refused in one line naming the file, the line and the field
(:class:`~evalgate.errors.UsageError`, exit 2), never a traceback deep inside the comparison.
"""

from __future__ import annotations

import shutil
import weakref
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from pydantic import ValidationError

from evalgate.errors import UsageError
from evalgate.run.heap import trim
from evalgate.run.layout import (
    EVALS,
    RESULTS,
    RUN_CONFIG,
    RUN_FILES,
    run_folder,
)
from evalgate.run.records import (
    RolloutRecord,
    iter_records,
    journal_bytes,
    parse_line,
    read_records,
)
from evalgate.run.runfiles import (
    JsonObject,
    RunConfig,
    RunMetadata,
    field_error,
    read_metadata,
    read_run_config,
    write_json,
    write_metadata,
    write_run_config,
)

if TYPE_CHECKING:  # the gate's model loads when a recorded gate is read (`runs` needs none)
    from evalgate.config.spec import GateSettings
    from evalgate.run.rollouts import RolloutTable

__all__ = [
    "LoadedRun",
    "RolloutRecord",
    "RunConfig",
    "RunDir",
    "RunMetadata",
    "find_run_dirs",
    "find_runs",
    "is_run_dir",
    "iter_records",
    "load_run",
    "load_runs",
    "loaded_run",
    "read_run_config",
    "recorded_gate",
    "run_dirs_under",
    "write_json",
]


# eq=False: never compared (an identity, not a value); the generated methods would be
# compiled from source at every start-up (dataclasses exec each one: issue #36).
@dataclass(eq=False)
class RunDir:
    path: Path

    @classmethod
    def create(cls, root: Path, benchmark: str, model_id: str, run_id: str) -> RunDir:
        path = root / EVALS / run_folder(benchmark, model_id) / run_id
        (path / "logs").mkdir(parents=True, exist_ok=False)
        return cls(path)

    @property
    def results_path(self) -> Path:
        return self.path / RESULTS

    def open_journal(self) -> IO[str]:
        return self.results_path.open("a", encoding="utf-8")

    # A JSON object (a bench's or a test's hand-made run) is validated into the model first:
    # what is written is always a model's serialisation.
    def write_config(self, config: RunConfig | JsonObject) -> None:
        if not isinstance(config, RunConfig):
            config = RunConfig.model_validate(config)
        write_run_config(self.path, config)

    def write_metadata(self, metadata: RunMetadata | JsonObject) -> None:
        if not isinstance(metadata, RunMetadata):
            metadata = RunMetadata.model_validate(metadata)
        write_metadata(self.path, metadata)

    def attach_log(self, log: Path | None) -> None:
        if log is not None and log.is_file():
            shutil.copyfile(log, self.path / "logs" / log.name)

    def keep_artifacts(self, suite: str, files: list[Path]) -> None:
        """A suite's own outputs (inspect's logs) under ``artifacts/``, beside the journal."""
        for file in files:
            target = self.path / "artifacts"
            target.mkdir(exist_ok=True)
            shutil.copy2(file, target / file.name)


# From this many items, reading texts back returns the heap's free pages first: a report has
# just freed the tens of MB of columns it decided its rows from.
_LARGE = 1 << 16


# eq=False: never compared (an identity, not a value); the generated methods would be
# compiled from source at every start-up (dataclasses exec each one: issue #36).
@dataclass(frozen=True, eq=False)
class LoadedRun:
    """A run directory read back and checked: its config, its rollouts (the columns summaries
    and comparisons read; :meth:`full_records` streams the journal for the rest), its metadata."""

    path: Path
    config: RunConfig
    records: RolloutTable
    metadata: RunMetadata
    origin: JsonObject = field(default_factory=dict)  # e.g. {"commit": sha, "stored_at": ts}
    # The journal's (size, mtime) when read: a report finds the run still held only while the
    # file is what was read (loaded_run).
    journal_stat: tuple[int, int] | None = field(default=None, compare=False, repr=False)

    @property
    def benchmark(self) -> str:
        return self.config.benchmark.name

    @property
    def model(self) -> str:
        return self.config.model.name

    @property
    def key(self) -> tuple[str, str]:
        """(model label, benchmark): what a head run and its baseline pair on."""
        return self.model, self.benchmark

    @property
    def rollouts(self) -> int:
        """k: from the run's config, else its metadata, else the journal itself (a run_config
        without ``benchmark.eval`` is an older or hand-made run, not an error)."""
        configured = self.config.rollouts or self.metadata.rollouts_per_example
        if configured is None:
            configured = 1 + max((int(r.get("rollout", 0)) for r in self.records), default=0)
        return configured

    def first_records(
        self, items: Collection[str], *, answered: bool = False
    ) -> Iterator[tuple[str, dict[str, object]]]:
        """(item id, the journal's record of its first rollout: ``answered``, its first whose
        record has no error) of each of ``items`` the run has, in journal order. The table knows
        which lines those are: only they are parsed (a million-line journal is read, not
        parsed)."""
        table = self.records
        if table.n_items >= _LARGE:  # what the caller just freed goes back first (run/heap.py)
            trim()
        firsts = table.first_rows(answered=answered)
        starts = table.item_offsets if len(table.item_offsets) == table.n_items else None
        wanted: dict[int, tuple[str, int]] = {}  # row → (item, its index)
        for item_id in items:
            index = table.index_of(item_id)
            if index is not None and firsts[index] >= 0:
                wanted[int(firsts[index])] = (item_id, index)
        if not wanted:
            return
        if starts is None:  # a table not read from this journal: its lines counted
            yield from self._scan_rows(wanted)
            return
        # Each item's first line starts where the reader saw it: read from there (its first
        # answered rollout is its first line, or a few lines on), the rest is never read.
        first_any = table.first_rows() if answered and table.errored else firsts
        with (self.path / RESULTS).open("rb") as fh:
            for row in sorted(wanted):
                item_id, index = wanted[row]
                fh.seek(starts[index])
                at = int(first_any[index])
                while raw := fh.readline():
                    if raw[:1] != b"{" and not raw.decode("utf-8", "replace").strip():
                        continue  # a blank line: no row (as the reader skipped it)
                    if at == row:
                        yield item_id, parse_line(raw)
                        break
                    at += 1

    def _scan_rows(
        self, wanted: dict[int, tuple[str, int]]
    ) -> Iterator[tuple[str, dict[str, object]]]:
        last, row = max(wanted), -1
        for _, raw in journal_bytes(self.path / RESULTS):
            if raw[:1] != b"{" and not raw.decode("utf-8", "replace").strip():
                continue  # a blank line: no row (as the reader skipped it)
            row += 1
            if row in wanted:
                yield wanted[row][0], parse_line(raw)
                if row == last:
                    return

    def full_records(self, items: Collection[str] | None = None) -> Iterator[dict[str, object]]:
        """The journal's records as written (prompt, completion, judge's reasons...), of
        ``items`` only when given, read again from disk one at a time."""
        for rec in iter_records(self.path / RESULTS):
            if items is None or rec["example_id"] in items:
                yield rec


def load_run(path: Path, *, origin: JsonObject | None = None) -> LoadedRun:
    """Read and check a finished run directory. Anything evalgate did not write, or a run that
    did not finish (no metadata.json, a torn last line), raises UsageError in one line naming the
    file, the line and the field: a run is compared whole or not at all."""
    path = Path(path)
    config = read_run_config(path)
    records = read_records(path / RESULTS, config.rollouts)
    metadata = read_metadata(path)
    run = LoadedRun(path, config, records, metadata, origin or {}, _stat(path / RESULTS))
    _LOADED[str(path.resolve())] = run
    return run


# Runs loaded and still held by someone (a comparison, the gate): a report written meanwhile
# reads their tables instead of parsing the journals again (loaded_run).
_LOADED: weakref.WeakValueDictionary[str, LoadedRun] = weakref.WeakValueDictionary()


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def loaded_run(path: Path) -> LoadedRun | None:
    """The run at ``path`` as :func:`load_run` read it, while something still holds it and its
    journal is unchanged since; None otherwise (the caller reads the journal)."""
    run = _LOADED.get(str(Path(path).resolve()))
    if run is None or run.journal_stat is None or run.journal_stat != _stat(path / RESULTS):
        return None
    return run


def run_dirs_under(root: Path, *, folder: str = "*", run: str = "*") -> list[Path]:
    """The run directories under an output root, sorted by folder then run id; ``folder``/``run``
    are glob patterns. A folder holding any run file is one, also when its run_config.json is
    lost: readers then refuse it in one line (a baseline left out quietly could hide a
    regression), and `runs` lists it with the reason."""
    return sorted(p for p in Path(root).glob(f"{EVALS}/{folder}/{run}") if is_run_dir(p))


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` is a run's folder: it holds a run file (the config is written first, so
    a folder with only the others lost it)."""
    return any((Path(path) / name).is_file() for name in RUN_FILES)


def find_runs(path: Path) -> dict[tuple[str, str], Path]:
    """(model label, benchmark) → run directory, from a run directory or an output root.

    An output root may hold several invocations; the newest run of each pair wins (run ids start
    with a UTC timestamp, so they sort by time). A run whose run_config.json cannot be read is an
    error, never left out: leaving it out could hide a benchmark from the gate.
    """
    path = Path(path)
    if is_run_dir(path):
        cfg = read_run_config(path)
        return {(cfg.model.name, cfg.benchmark.name): path}
    if not path.is_dir():
        raise UsageError(f"{path}: no such directory (give a run directory or an output root)")
    found: dict[tuple[str, str], Path] = {}
    for run_dir in sorted(run_dirs_under(path), key=lambda p: p.name):
        cfg = read_run_config(run_dir)
        found[(cfg.model.name, cfg.benchmark.name)] = run_dir
    if not found:
        raise UsageError(f"{path}: no evalgate runs found (expected {path}/{EVALS}/*/*/)")
    return found


def load_runs(
    path: Path, *, origin: Callable[[Path], JsonObject] | None = None
) -> dict[tuple[str, str], LoadedRun]:
    """:func:`find_runs`, each run read with :func:`load_run`. ``origin(run_dir)`` gives each
    run's origin (default: its run id)."""
    where = origin or (lambda p: {"run_id": p.name})
    return {key: load_run(p, origin=where(p)) for key, p in find_runs(path).items()}


def find_run_dirs(output_root: Path, run: str) -> list[Path]:
    """The run directories of one invocation: ``run`` is a run directory, or a run id whose
    benchmarks' directories are ``{output_root}/evals/*/{run}``."""
    path = Path(run)
    if is_run_dir(path):
        return [path]
    dirs = run_dirs_under(output_root, run=run)
    if not dirs:
        raise UsageError(f"no run {run!r} under {Path(output_root) / EVALS}")
    return dirs


def recorded_gate(run: LoadedRun) -> GateSettings:
    """The gate policy ``run`` recorded (a baseline's, for `evalgate compare`); one a version of
    evalgate cannot read (another version's, a hand edit) is a one-line error naming the fix."""
    from evalgate.config.spec import GateSettings

    try:
        return GateSettings.model_validate(run.config.gate or {})
    except ValidationError as exc:
        raise UsageError(
            f"{run.path / RUN_CONFIG}: gate.{field_error(exc)} (a policy written by another "
            "evalgate version?); give the policy with --config evals.yaml"
        ) from None

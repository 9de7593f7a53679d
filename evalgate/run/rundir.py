"""The run directory: its layout, its files' formats, and the one loader every reader uses.

``{root}/evals/{benchmark}--{org}--{model}/{run_id}/`` holds ``run_config.json``,
``results.jsonl`` (one line per rollout, appended and flushed as rollouts finish, so a crash loses
nothing already computed), ``metadata.json`` (written when the run finishes) and ``logs/``. Per
invocation, ``{root}`` gets ``scorecard.md`` and ``verdict.json``.

This module owns that layout and those formats: the run writes through :class:`RunDir`; `local
--baseline`, `compare`, `resume`, `runs`, `show`, the Action and `push` find runs with
:func:`find_runs`/:func:`find_run_dirs` and read them with :func:`load_run` (or, to list what is
there, damaged or not, :func:`read_run_config`). A file that is not what evalgate writes is
refused in one line naming the file, the line and the field (:class:`~evalgate.errors.UsageError`,
exit 2), never a traceback deep inside the comparison.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import time
import weakref
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalgate.errors import UsageError

try:  # orjson: parses a journal line ~4x faster than the stdlib; json is the fallback, and the
    # judge of every line orjson refuses (NaN, integers past 64 bits, lone surrogates: valid
    # to json.loads, as the engine writes them), so both read the same records.
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - where orjson is not installed
    _fast_loads = json.loads  # type: ignore[assignment]

if TYPE_CHECKING:  # the gate's model loads when a recorded gate is read (`runs` needs none)
    from evalgate.config.spec import GateSettings
    from evalgate.run.rollouts import RolloutTable

__all__ = [
    "EVALS",
    "JUNIT",
    "METADATA",
    "REPORT_HTML",
    "RESULTS",
    "RUN_CONFIG",
    "RUN_FILES",
    "SCORECARD",
    "VERDICT",
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
    "new_run_id",
    "read_json_object",
    "read_run_config",
    "recorded_gate",
    "run_dirs_under",
    "write_json",
]

# The layout, spelled once.
EVALS = "evals"  # {root}/evals/{benchmark}--{org}--{model}/{run_id}/
RUN_CONFIG = "run_config.json"  # what ran: model, benchmark, gate, fingerprint (at the start)
RESULTS = "results.jsonl"  # one RolloutRecord per line, appended as rollouts finish
METADATA = "metadata.json"  # the summary, written when the run finishes
RUN_FILES = (RUN_CONFIG, RESULTS, METADATA)  # what a store or a push copies
# Per invocation, at the output root: the report files of the last run written there.
SCORECARD = "scorecard.md"
VERDICT = "verdict.json"
JUNIT = "junit.xml"
REPORT_HTML = "report.html"


def new_run_id() -> str:
    """``YYYYmmdd-HHMMSS-mmmrrr``: UTC time to the millisecond, then 3 random hex digits.

    Ids sort by creation time ("newest wins" for baselines, newest first in listings), also for
    two runs started within one second; the random tail keeps parallel jobs apart."""
    now = time.time()
    millis = int(now * 1000) % 1000
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"{stamp}-{millis:03d}{secrets.token_hex(2)[:3]}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"


def write_json(path: Path, data: Any) -> None:
    """Write atomically: a reader never sees half a file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:  # a full disk: no half-written temporary file left beside the runs
        tmp.unlink(missing_ok=True)
        raise


@dataclass
class RunDir:
    path: Path

    @classmethod
    def create(cls, root: Path, benchmark: str, model_id: str, run_id: str) -> RunDir:
        org, _, name = model_id.rpartition("/")
        folder = f"{_slug(benchmark)}--{_slug(org or 'local')}--{_slug(name)}"
        path = root / EVALS / folder / run_id
        (path / "logs").mkdir(parents=True, exist_ok=False)
        return cls(path)

    @property
    def results_path(self) -> Path:
        return self.path / RESULTS

    def open_journal(self) -> IO[str]:
        return self.results_path.open("a", encoding="utf-8")

    def write_config(self, data: dict[str, Any]) -> None:
        write_json(self.path / RUN_CONFIG, data)

    def write_metadata(self, data: dict[str, Any]) -> None:
        write_json(self.path / METADATA, data)

    def attach_log(self, log: Path | None) -> None:
        if log is not None and log.is_file():
            shutil.copyfile(log, self.path / "logs" / log.name)

    def keep_artifacts(self, suite: str, files: list[Path]) -> None:
        """A suite's own outputs (inspect's logs) under ``artifacts/``, beside the journal."""
        for file in files:
            target = self.path / "artifacts"
            target.mkdir(exist_ok=True)
            shutil.copy2(file, target / file.name)


# --- The files' formats ---------------------------------------------------------------------
# Open models (extra="allow"): the fields below are what evalgate's readers rely on; anything
# else a run records (fingerprint details, a suite's own keys) travels along untouched.


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class ModelEntry(_Open):
    name: str
    """The model's label in evals.yaml: runs pair on (label, benchmark)."""


class BenchmarkEntry(_Open):
    name: str
    eval: dict[str, Any] | None = None
    """The benchmark's ``eval`` settings (rollouts, error budget); absent in older runs."""


class RunConfig(_Open):
    """``run_config.json``: written when the run starts."""

    model: ModelEntry
    benchmark: BenchmarkEntry
    model_id: str = ""
    suite: str | None = None  # an agent variant's run: "{benchmark}.{variant}"
    config_path: str | None = None
    gate: dict[str, Any] | None = None  # the policy the run was gated with
    budget: dict[str, Any] | None = None
    fingerprint: dict[str, Any] = Field(default_factory=dict)
    baseline: dict[str, Any] | None = None  # see evalgate.run.baseline


class RunMetadata(_Open):
    """``metadata.json``: the run's summary, written when it finishes."""

    complete: bool = False  # False: stopped early (sequential looks, a budget cap)
    rollouts_per_example: int | None = None
    time_ms: float = 0.0
    sequential: dict[str, Any] | None = None
    # The key of the order the items are read in (evalgate.stats.OrderKey.record: drawn by the
    # gate, never the candidate's); None in runs written before keys (read in the public order).
    order_key: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")


class RolloutRecord(_Open):
    """One line of ``results.jsonl`` (see :mod:`evalgate.run.engine` for every key written)."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)
    example_id: str
    rollout: int = Field(0, ge=0, lt=2**32)
    item_hash: str | None = None
    error: str | None = None
    # The scores: numbers (NaN and ±inf are read as an errored rollout: see run.rollouts.unusable).
    reward: float | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    group: str | None = None
    cost_usd: float | None = Field(None, ge=0)
    judge: dict[str, Any] | None = None
    usage: dict[str, float] = Field(default_factory=dict)


def _field_error(exc: ValidationError) -> str:
    """``field.path: message`` of the first error: one line."""
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(the whole value)"
    return f"{where}: {err['msg']}"


def read_json_object(path: Path) -> dict[str, Any] | None:
    """A run file's JSON object; None when it is missing, unreadable or not an object (a run
    killed while writing it, a hand edit): callers list what they can or refuse in one line."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _read_object(path: Path, what: str) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: missing; {what}") from None
    except OSError as exc:
        raise UsageError(f"{path}: unreadable ({exc.strerror})") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise UsageError(f"{path}: not a JSON object (a {type(value).__name__})")
    return value


def read_run_config(run_dir: Path) -> tuple[dict[str, Any], RunConfig]:
    """``run_config.json`` as written (a dict, for what travels along) and typed; a file that is
    not one evalgate wrote raises UsageError naming the file and the field."""
    path = Path(run_dir) / RUN_CONFIG
    damaged = not path.exists() and any((Path(run_dir) / f).exists() for f in RUN_FILES)
    data = _read_object(
        path,
        "a damaged run folder (its other files are there): restore the file, or remove the "
        "folder to leave the run out"
        if damaged
        else "not an evalgate run directory",
    )
    try:
        return data, RunConfig.model_validate(data)
    except ValidationError as exc:
        raise UsageError(
            f"{path}: {_field_error(exc)} (not a run_config.json evalgate wrote)"
        ) from None


_NUMBER = (float, int)
_NUMBERS = frozenset(_NUMBER)


def _numbers(values: Any) -> bool:
    # set(map(type, ...)) iterates in C: this check runs for every line of every run read.
    return type(values) is dict and _NUMBERS.issuperset(map(type, values.values()))


def _plain_record(value: dict[str, Any]) -> bool:
    """:class:`RolloutRecord`'s checks, inlined: the model costs 60 % more than parsing the line
    (bench/rundir_load.py), and nearly every record is fine. Only a record failing these is
    validated by the model, for its one-line message. Every field a reader uses is checked:
    a baseline's damaged score must never turn into a quietly errored (left out) rollout."""
    rollout = value.get("rollout", 0)
    cost = value.get("cost_usd")
    return (
        type(value.get("example_id")) is str
        and type(rollout) is int
        and 0 <= rollout < 2**32
        and (value.get("item_hash") is None or type(value["item_hash"]) is str)
        and (value.get("error") is None or type(value["error"]) is str)
        and (value.get("reward") is None or type(value["reward"]) in _NUMBER)
        and ("metrics" not in value or _numbers(value["metrics"]))
        and ("usage" not in value or _numbers(value["usage"]))
        and (value.get("group") is None or type(value["group"]) is str)
        and (cost is None or (type(cost) in _NUMBER and cost >= 0))
        and (value.get("judge") is None or type(value["judge"]) is dict)
    )


def _journal_lines(path: Path) -> Iterator[tuple[int, str, bool]]:
    """(line number, text, whether a newline ends it) of each line of a journal, read a block
    at a time: a run of a million rollouts is never held whole, as text or as records."""
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        raise UsageError(f"{path}: missing; not an evalgate run directory") from None
    except OSError as exc:
        raise UsageError(f"{path}: unreadable ({exc.strerror})") from exc
    with fh:
        lineno = 0
        try:
            for raw in fh:  # split on b"\n" only, as the writer does
                lineno += 1
                yield lineno, raw.decode("utf-8"), raw.endswith(b"\n")
        except OSError as exc:
            raise UsageError(f"{path}: unreadable ({exc.strerror})") from exc
        except UnicodeDecodeError as exc:
            raise UsageError(f"{path}: not UTF-8 text ({exc.reason})") from None


def _journal_bytes(path: Path) -> Iterator[tuple[int, bytes]]:
    """:func:`_journal_lines` as bytes (orjson parses them without a decoded copy; a line that
    is not UTF-8 is refused by :func:`_slow_record`, as the decoding reader refused it)."""
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        raise UsageError(f"{path}: missing; not an evalgate run directory") from None
    except OSError as exc:
        raise UsageError(f"{path}: unreadable ({exc.strerror})") from exc
    with fh:
        lineno = 0
        try:
            for raw in fh:  # split on b"\n" only, as the writer does
                lineno += 1
                yield lineno, raw  # a line without its newline is the torn last one
        except OSError as exc:
            raise UsageError(f"{path}: unreadable ({exc.strerror})") from exc


def _parse_line(raw: bytes) -> Any:
    try:
        return _fast_loads(raw)
    except ValueError:  # NaN, big integers: as the stdlib reads them
        return json.loads(raw)


def _slow_record(path: Path, lineno: int, raw: bytes, ended: bool) -> Any:
    """A line orjson refused, read as the stdlib reads it, or refused in one line: not UTF-8,
    cut off mid-line (no newline after it), or not JSON."""
    where = f"{path}:{lineno}"
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason})") from None
    try:
        return json.loads(line)
    except ValueError as exc:
        if not ended:  # no newline after it: the writer was killed mid-line
            raise UsageError(
                f"{where}: cut off mid-line (the run was interrupted: `evalgate resume "
                f"{path.parent.name}` finishes it)"
            ) from None
        raise UsageError(f"{where}: not JSON ({exc})") from None


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    """Every record of a run's journal, in file order, one at a time (unchecked: for readers of
    a run :func:`load_run` has checked, that need fields its table does not keep, such as the
    prompt and the completion)."""
    for _, raw in _journal_bytes(Path(path)):
        try:
            yield _fast_loads(raw)
        except ValueError:
            if raw.decode("utf-8", "replace").strip():
                yield json.loads(raw)


class _Seen:
    """Which (item, rollout) pairs a journal has recorded so far, in a few bytes a rollout:
    a bit mask per item (rollouts below 64; the rare higher index in a set)."""

    def __init__(self) -> None:
        self._masks: list[int] = []
        self._high: set[tuple[int, int]] = set()

    def add(self, item: int, rollout: int) -> bool:
        """Record the pair; False when it was already there."""
        if item == len(self._masks):
            self._masks.append(0)
        if rollout >= 64:
            if (item, rollout) in self._high:
                return False
            self._high.add((item, rollout))
            return True
        bit = 1 << rollout
        if self._masks[item] & bit:
            return False
        self._masks[item] |= bit
        return True


def _first_line(path: Path, item: str, rollout: int | None = None) -> int:
    """The line of ``item``'s first record (of its ``rollout``, when given): an error message's
    "first on line N", looked up again only when there is an error to report."""
    for lineno, line, _ in _journal_lines(path):
        try:
            value = json.loads(line) if line.strip() else None
        except ValueError:
            continue
        if (
            isinstance(value, dict)
            and value.get("example_id") == item
            and (rollout is None or value.get("rollout", 0) == rollout)
        ):
            return lineno
    return 0  # pragma: no cover - the record was read from this file a moment ago


def _read_records(path: Path, rollouts: int | None = None) -> RolloutTable:
    """Every line a whole record; duplicates and torn lines are errors (`resume` repairs both),
    and so is a rollout index at or past the run's configured ``rollouts`` (k), when known.

    Streamed into a :class:`~evalgate.run.rollouts.RolloutTable` (the columns summaries and
    comparisons read; per item, its first content hash, which the checks read back) with a bit
    per rollout for the checks: tens of bytes a rollout, however long the run
    (bench/gate_memory.py)."""
    from evalgate.run.rollouts import RolloutTable

    table = RolloutTable()
    seen = _Seen()
    # Bound once: this loop runs once a rollout (a million times for a large run).
    loads, plain, add, mark, same = (
        _fast_loads,
        _plain_record,
        table.add_checked,
        seen.add,
        table.same_hash,
    )
    offset, starts = 0, table.item_offsets  # where each item's first line starts
    for lineno, raw in _journal_bytes(path):
        at, offset = offset, offset + len(raw)
        try:
            value = loads(raw)
        except ValueError:
            if not raw.decode("utf-8", "replace").strip():  # a blank line, as str.strip sees it
                continue
            value = _slow_record(path, lineno, raw, raw.endswith(b"\n"))
        if not isinstance(value, dict):
            raise UsageError(f"{path}:{lineno}: not a JSON object (a {type(value).__name__})")
        if not plain(value):  # the model says what is wrong, field by field
            try:
                RolloutRecord.model_validate(value)
            except ValidationError as exc:
                raise UsageError(f"{path}:{lineno}: {_field_error(exc)}") from None
        item, rollout, content = (
            value["example_id"],
            value.get("rollout", 0),
            value.get("item_hash"),
        )
        known = table.n_items
        index = add(value)
        if index == known:
            starts.append(at)
        if not mark(index, rollout):
            where, first = f"{path}:{lineno}", _first_line(path, item, rollout)
            raise UsageError(
                f"{where}: duplicate record of item {item!r} rollout {rollout} "
                f"(first on line {first}; `evalgate resume {path.parent.name}` repairs the "
                "journal)"
            )
        if index < known and not same(index, content):  # a new item's hash is its own
            where, first = f"{path}:{lineno}", _first_line(path, item)
            raise UsageError(
                f"{where}: item_hash: item {item!r} has other content than on line "
                f"{first} (two items share one id)"
            )
        if rollouts is not None and rollout >= rollouts:
            raise UsageError(
                f"{path}:{lineno}: rollout: {rollout} is out of range (the run has {rollouts} "
                f"rollout{'s' if rollouts != 1 else ''} per item: 0 to {rollouts - 1})"
            )
    return table


@dataclass(frozen=True)
class LoadedRun:
    """A run directory read back and checked: its config, its rollouts (the columns summaries
    and comparisons read; :meth:`full_records` streams the journal for the rest), its metadata."""

    path: Path
    config: dict[str, Any]
    records: RolloutTable
    metadata: dict[str, Any]
    origin: dict[str, Any] = field(default_factory=dict)  # e.g. {"commit": sha, "stored_at": ts}
    # The journal's (size, mtime) when read: a report finds the run still held only while the
    # file is what was read (loaded_run).
    journal_stat: tuple[int, int] | None = field(default=None, compare=False, repr=False)

    @property
    def benchmark(self) -> str:
        return str(self.config["benchmark"]["name"])

    @property
    def model(self) -> str:
        return str(self.config["model"]["name"])

    @property
    def key(self) -> tuple[str, str]:
        """(model label, benchmark): what a head run and its baseline pair on."""
        return self.model, self.benchmark

    @property
    def rollouts(self) -> int:
        """k: from the run's config, else its metadata, else the journal itself (a run_config
        without ``benchmark.eval`` is an older or hand-made run, not an error)."""
        configured = (self.config["benchmark"].get("eval") or {}).get("rollouts")
        if configured is None:
            configured = self.metadata.get("rollouts_per_example")
        if configured is None:
            configured = 1 + max((int(r.get("rollout", 0)) for r in self.records), default=0)
        return int(configured)

    def first_records(
        self, items: Collection[str], *, answered: bool = False
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(item id, the journal's record of its first rollout: ``answered``, its first whose
        record has no error) of each of ``items`` the run has, in journal order. The table knows
        which lines those are: only they are parsed (a million-line journal is read, not
        parsed)."""
        table = self.records
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
        first_any = table.first_rows()
        with (self.path / RESULTS).open("rb") as fh:
            for row in sorted(wanted):
                item_id, index = wanted[row]
                fh.seek(starts[index])
                at = int(first_any[index])
                while raw := fh.readline():
                    if raw[:1] != b"{" and not raw.decode("utf-8", "replace").strip():
                        continue  # a blank line: no row (as the reader skipped it)
                    if at == row:
                        yield item_id, _parse_line(raw)
                        break
                    at += 1

    def _scan_rows(
        self, wanted: dict[int, tuple[str, int]]
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        last, row = max(wanted), -1
        for _, raw in _journal_bytes(self.path / RESULTS):
            if raw[:1] != b"{" and not raw.decode("utf-8", "replace").strip():
                continue  # a blank line: no row (as the reader skipped it)
            row += 1
            if row in wanted:
                yield wanted[row][0], _parse_line(raw)
                if row == last:
                    return

    def full_records(self, items: Collection[str] | None = None) -> Iterator[dict[str, Any]]:
        """The journal's records as written (prompt, completion, judge's reasons...), of
        ``items`` only when given, read again from disk one at a time."""
        for rec in iter_records(self.path / RESULTS):
            if items is None or rec["example_id"] in items:
                yield rec


def load_run(path: Path, *, origin: dict[str, Any] | None = None) -> LoadedRun:
    """Read and check a finished run directory. Anything evalgate did not write, or a run that
    did not finish (no metadata.json, a torn last line), raises UsageError in one line naming the
    file, the line and the field: a run is compared whole or not at all."""
    path = Path(path)
    config, typed = read_run_config(path)
    k = (typed.benchmark.eval or {}).get("rollouts")
    records = _read_records(path / RESULTS, k if type(k) is int and k > 0 else None)
    meta_path = path / METADATA
    if not meta_path.is_file():
        raise UsageError(
            f"{meta_path}: missing; the run did not finish (`evalgate resume {path.name}` "
            "finishes it)"
        )
    metadata = _read_object(meta_path, "")
    try:
        RunMetadata.model_validate(metadata)
    except ValidationError as exc:
        raise UsageError(f"{meta_path}: {_field_error(exc)}") from None
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
        _, cfg = read_run_config(path)
        return {(cfg.model.name, cfg.benchmark.name): path}
    if not path.is_dir():
        raise UsageError(f"{path}: no such directory (give a run directory or an output root)")
    found: dict[tuple[str, str], Path] = {}
    for run_dir in sorted(run_dirs_under(path), key=lambda p: p.name):
        _, cfg = read_run_config(run_dir)
        found[(cfg.model.name, cfg.benchmark.name)] = run_dir
    if not found:
        raise UsageError(f"{path}: no evalgate runs found (expected {path}/{EVALS}/*/*/)")
    return found


def load_runs(
    path: Path, *, origin: Callable[[Path], dict[str, Any]] | None = None
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
        return GateSettings.model_validate(run.config.get("gate") or {})
    except ValidationError as exc:
        raise UsageError(
            f"{run.path / RUN_CONFIG}: gate.{_field_error(exc)} (a policy written by another "
            "evalgate version?); give the policy with --config evals.yaml"
        ) from None

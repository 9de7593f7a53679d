"""A content-addressed cache of model responses, in SQLite, so an unchanged re-run costs nothing.

The key is a SHA-256 over the endpoint's identity (base_url + model, or what the backend passes),
the exact request body (model, messages, sampling, seed) and the rollout index: the same request
to the same model gives the cached completion, and k rollouts of one item stay k independent
samples. Only successful completions are stored; an error is never cached, so a re-run retries it.

Stored in one SQLite file (stdlib ``sqlite3``, WAL mode) under a cache directory, shareable by
concurrent processes (CI jobs restoring one cache). Writes are batched into one transaction per
``batch`` puts (and on :meth:`flush` / :meth:`close`): a crash loses at most a batch of cache
entries, which only costs their re-request. A cache file that is corrupt, or from an unknown
schema version, is moved aside with a warning and replaced by an empty one; an error while
running disables the cache for the rest of the run. The cache never fails a run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

# sqlite3 is imported where a cache is opened or used, not with this module: a run with the
# cache off (`--no-cache`, `eval.cache: false`) never loads it (~1 ms of its start-up).
if TYPE_CHECKING:
    import sqlite3

__all__ = ["CACHE_FILE", "ResponseCache", "default_cache_dir"]

CACHE_FILE = "responses.sqlite3"
_SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key BLOB PRIMARY KEY,           -- sha256(identity, rollout, request body)
    text TEXT NOT NULL,             -- the completion
    usage TEXT NOT NULL,            -- {"prompt_tokens": n, "completion_tokens": n}
    created REAL NOT NULL           -- unix time, for pruning by age
) WITHOUT ROWID
"""


def default_cache_dir(environ: Mapping[str, str]) -> Path:
    """``$EVALGATE_CACHE_DIR``, else ``$XDG_CACHE_HOME/evalgate``, else ``~/.cache/evalgate``."""
    if environ.get("EVALGATE_CACHE_DIR"):
        return Path(environ["EVALGATE_CACHE_DIR"])
    base = environ.get("XDG_CACHE_HOME") or os.path.join(
        environ.get("HOME") or os.path.expanduser("~"), ".cache"
    )
    return Path(base) / "evalgate"


def _warn_stderr(message: str) -> None:
    print(f"[evalgate] warning: {message}", file=sys.stderr, flush=True)


class ResponseCache:
    """``get``/``put`` completions by key; safe to share between threads and coroutines.

    ``path``: the SQLite file (see :meth:`in_dir` for the usual one under a cache directory).
    ``batch``: puts per write transaction. ``timeout_s``: how long to wait for a lock held by
    another process. ``warn``: where warnings go (default: stderr).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        batch: int = 256,
        timeout_s: float = 10.0,
        warn: Callable[[str], None] = _warn_stderr,
    ) -> None:
        self.path = Path(path)
        self.batch = batch
        self.timeout_s = timeout_s  # how long to wait for another process's write lock
        self.warn = warn
        self.hits = 0
        self.misses = 0
        self.writes = 0
        self.disabled: str | None = None  # why the cache was turned off, if it was
        self._lock = threading.Lock()  # one connection, shared: sqlite3 objects aren't reentrant
        self._pending: dict[bytes, tuple[str, str]] = {}
        self._db: sqlite3.Connection | None = None
        self._open()

    @classmethod
    def in_dir(cls, directory: str | os.PathLike[str], **kwargs: object) -> ResponseCache:
        """The cache file :data:`CACHE_FILE` in ``directory`` (created if missing)."""
        return cls(Path(directory) / CACHE_FILE, **kwargs)  # type: ignore[arg-type]

    # -- keys --------------------------------------------------------------------------------

    @staticmethod
    def key(identity: str, body: bytes, rollout: int) -> bytes:
        """The cache key of one request: identity, rollout index and the encoded body."""
        h = hashlib.sha256(identity.encode("utf-8"))
        h.update(b"\0%d\0" % rollout)
        h.update(body)
        return h.digest()

    # -- reads and writes --------------------------------------------------------------------

    def get(self, key: bytes) -> tuple[str, dict[str, int]] | None:
        """The cached (text, usage) for ``key``, or None."""
        with self._lock:
            row = self._pending.get(key)
            if row is None and self._db is not None:
                import sqlite3  # loaded already: the open connection is one

                try:
                    row = self._db.execute(
                        "SELECT text, usage FROM responses WHERE key = ?", (key,)
                    ).fetchone()
                except sqlite3.Error as exc:
                    self._fail(exc)
                    row = None
            if row is None:
                self.misses += 1
                return None
            try:
                usage = json.loads(row[1])
                if not isinstance(row[0], str) or not isinstance(usage, dict):
                    raise ValueError("wrong types")
            except ValueError:  # a damaged row: a miss, and it will be overwritten
                self.misses += 1
                return None
            self.hits += 1
            return row[0], usage

    def put(self, key: bytes, text: str, usage: Mapping[str, int]) -> None:
        """Store a successful completion (never an error). Written in batches."""
        with self._lock:
            if self._db is None:
                return
            self._pending[key] = (text, json.dumps(dict(usage), separators=(",", ":")))
            if len(self._pending) >= self.batch:
                self._write_pending()

    def flush(self) -> None:
        """Write pending entries now."""
        with self._lock:
            self._write_pending()

    def close(self) -> None:
        with self._lock:
            self._write_pending()
            if self._db is not None:
                self._db.close()
                self._db = None

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        with self._lock:
            self._write_pending()
            if self._db is None:
                return 0
            return int(self._db.execute("SELECT count(*) FROM responses").fetchone()[0])

    # -- internals ---------------------------------------------------------------------------

    def _write_pending(self) -> None:
        if not self._pending or self._db is None:
            self._pending.clear()
            return
        import sqlite3  # loaded already: the open connection is one

        now = time.time()
        rows = [(k, text, usage, now) for k, (text, usage) in self._pending.items()]
        self._pending.clear()
        try:
            with self._db:  # one transaction per batch: one WAL append, not one per response
                self._db.executemany(
                    "INSERT OR REPLACE INTO responses (key, text, usage, created) "
                    "VALUES (?, ?, ?, ?)",
                    rows,
                )
            self.writes += len(rows)
        except sqlite3.Error as exc:
            self._fail(exc)

    def _open(self) -> None:
        import sqlite3

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self._disable(f"cannot create {self.path.parent} ({exc}); running without a cache")
            return
        for attempt in range(2):
            try:
                self._db = self._connect()
                return
            except (sqlite3.Error, _StaleSchema) as exc:
                if self._db is not None:
                    self._db.close()
                    self._db = None
                # Only a damaged or foreign file is moved aside: a locked or read-only one may be
                # another process's live cache.
                if attempt == 0 and _is_corrupt(exc) and self._move_aside(str(exc)):
                    continue
                self._disable(f"cannot open {self.path} ({exc}); running without a cache")
                return

    def _connect(self) -> sqlite3.Connection:
        import sqlite3

        # check_same_thread=False: the lock above serialises use across threads.
        db = sqlite3.connect(self.path, timeout=self.timeout_s, check_same_thread=False)
        self._db = db
        # A corrupt file fails on its first read: the header check (journal_mode) or the schema.
        db.execute("PRAGMA journal_mode=WAL").fetchone()
        db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable enough for a cache
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, _SCHEMA_VERSION):
            raise _StaleSchema(f"cache schema version {version}, expected {_SCHEMA_VERSION}")
        if version == 0:  # a new file; an existing one is opened without writing (no lock)
            with db:
                db.execute(_SCHEMA)
                db.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")
        db.execute("SELECT key FROM responses LIMIT 1").fetchall()
        return db

    def _move_aside(self, why: str) -> bool:
        """Rename the file (and its WAL) out of the way; False if that was not possible."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{os.getpid()}")
        try:
            for suffix in ("", "-wal", "-shm"):
                src = Path(f"{self.path}{suffix}")
                if src.exists():
                    os.replace(src, f"{aside}{suffix}")
        except OSError:
            return False
        self.warn(f"response cache {self.path} is unreadable ({why}); moved it to {aside}")
        return True

    def _fail(self, exc: sqlite3.Error) -> None:
        # An error mid-run: stop using the cache (the run goes on uncached); a damaged file is
        # also moved aside so that the next run starts clean. Lock contention is not damage:
        # that one request just goes uncached.
        import sqlite3

        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            return
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None
        self._pending.clear()
        if _is_corrupt(exc):
            self._move_aside(str(exc))
        self._disable(f"response cache disabled for this run ({exc})")

    def _disable(self, message: str) -> None:
        self.disabled = message
        self.warn(message)


def _is_corrupt(exc: BaseException) -> bool:
    """A damaged or foreign file, as opposed to a busy, read-only or missing one."""
    if isinstance(exc, _StaleSchema):
        return True
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name:
        return name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB"))
    text = str(exc)
    return "malformed" in text or "not a database" in text


class _StaleSchema(Exception):
    pass

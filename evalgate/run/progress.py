"""Progress on long runs: a rich bar in a terminal, periodic plain lines in CI logs."""

from __future__ import annotations

import sys
import time
from typing import IO, Protocol

__all__ = ["PlainProgress", "Progress", "RichProgress", "make_progress"]


class Progress(Protocol):
    def start(self, label: str, total: int) -> None: ...
    def advance(self, *, error: bool = False) -> None: ...
    def finish(self) -> None: ...


class PlainProgress:
    """One line every ``every_s`` seconds (and at the end): readable in a CI log, no escapes."""

    def __init__(self, stream: IO[str] | None = None, every_s: float = 10.0) -> None:
        self.stream = stream or sys.stderr
        self.every_s = every_s

    def start(self, label: str, total: int) -> None:
        self.label, self.total, self.done, self.errors = label, total, 0, 0
        self.t0 = self.last = time.monotonic()
        self._line()

    def advance(self, *, error: bool = False) -> None:
        self.done += 1
        self.errors += error
        now = time.monotonic()
        if now - self.last >= self.every_s:
            self.last = now
            self._line()

    def finish(self) -> None:
        self._line()

    def _line(self) -> None:
        pct = 100.0 * self.done / self.total if self.total else 100.0
        elapsed = time.monotonic() - self.t0
        rate = self.done / elapsed if elapsed > 0 else 0.0
        print(
            f"[evalgate] {self.label}: {self.done}/{self.total} ({pct:.0f}%), "
            f"{self.errors} errors, {rate:.1f}/s, {elapsed:.0f}s",
            file=self.stream,
            flush=True,
        )


class RichProgress:
    def __init__(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as _Rich

        self._bar = _Rich(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[errors]} errors"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            transient=False,
        )

    def start(self, label: str, total: int) -> None:
        self._errors = 0
        self._bar.start()
        self._task = self._bar.add_task(label, total=total, errors=0)

    def advance(self, *, error: bool = False) -> None:
        self._errors += error
        self._bar.update(self._task, advance=1, errors=self._errors)

    def finish(self) -> None:
        self._bar.stop()


def make_progress(environ: dict[str, str], stream: IO[str] | None = None) -> Progress:
    stream = stream or sys.stderr
    if environ.get("CI") or not stream.isatty():
        return PlainProgress(stream)
    return RichProgress()

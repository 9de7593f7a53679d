"""Two invocations reporting into one output folder: each is named, neither is lost.

The output root's scorecard.md and verdict.json are the report of the last invocation that
wrote there. Two ``local`` runs started on one folder at the same time (a CI matrix sharing a
workspace, two terminals) both finish by writing them: the later would silently replace the
earlier, whose runs lie beside its own in ``evals/``. So every invocation also keeps its own
copy under ``reports/{run_id}/``, writes the root under a lock (the root files of one
invocation, never a mix), and the root names every invocation that ran *at the same time* as
this one (it finished after this one started): its run id, verdict and the runs it evaluated,
and where its report is. An invocation that finished before this one started is an earlier
run the folder's root is documented to be replaced by; it is not named.
"""

from __future__ import annotations

import calendar
import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from evalgate._json import items, mapping
from evalgate.report._escape import code_span
from evalgate.run.layout import SCORECARD, VERDICT

__all__ = [
    "REPORTS",
    "concurrent_invocations",
    "invocation_entry",
    "report_lock",
    "started_at",
    "with_note",
]

REPORTS = "reports"  # {root}/reports/{run_id}/: each invocation's own scorecard and verdict
_LOCK = ".report.lock"


def started_at(run_id: str) -> float | None:
    """When the invocation ``run_id`` started (``YYYYmmdd-HHMMSS-mmmrrr``, UTC), in epoch s."""
    try:
        stamp = time.strptime(run_id[:15], "%Y%m%d-%H%M%S")
        millis = int(run_id[16:19])
    except (ValueError, IndexError):
        return None
    return calendar.timegm(stamp) + millis / 1000


@contextlib.contextmanager
def report_lock(root: Path) -> Iterator[None]:
    """Hold the output root's report files for this process while it writes them."""
    fd = os.open(root / _LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the other writer holds it for milliseconds
        yield
    finally:
        os.close(fd)


def invocation_entry(run_id: str, verdict: Mapping[str, object]) -> dict[str, object]:
    """How the root's verdict.json names one invocation."""
    return {
        "run_id": run_id,
        "status": verdict.get("status"),
        "exit_code": verdict.get("exit_code"),
        "runs": [
            f"{mapping(r).get('model')}/{mapping(r).get('benchmark')}"
            for r in items(verdict.get("runs"))
        ],
        "finished_at": time.time(),
        "report": f"{REPORTS}/{run_id}/{SCORECARD}",
    }


def concurrent_invocations(root: Path, run_id: str) -> list[Mapping[str, object]]:
    """The invocations named in the root's current verdict.json (its own and those it named)
    that ran at the same time as ``run_id``: finished after it started."""
    try:
        previous = json.loads((root / VERDICT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []  # none yet, or not one evalgate wrote: nothing to name
    # Only now: parsing the run id's time loads time.strptime's module (~3 ms of a run), which
    # a first report into a folder does not need.
    start = started_at(run_id)
    if start is None or not isinstance(previous, dict):
        return []
    named = [previous.get("invocation"), *items(previous.get("concurrent_invocations"))]
    out: list[Mapping[str, object]] = []
    for entry in named:
        if not isinstance(entry, dict) or entry.get("run_id") in (None, run_id):
            continue
        finished = entry.get("finished_at")
        if isinstance(finished, int | float) and finished >= start:
            out.append(entry)
    return out


def with_note(scorecard: str, others: Sequence[Mapping[str, object]]) -> str:
    """``scorecard`` with a note under its title naming each invocation in ``others``."""
    if not others:
        return scorecard
    lines = []
    for entry in others:
        runs = ", ".join(code_span(str(r)) for r in items(entry.get("runs"))) or "no runs"
        lines.append(
            f"> **Note:** another invocation wrote to this folder while this one ran: run "
            f"{code_span(str(entry['run_id']))} ({runs}) ended {code_span(str(entry['status']))}; "
            f"its report: {code_span(str(entry.get('report')))}\n"
        )
    title, newline, rest = scorecard.partition("\n")
    block = "\n".join(lines)
    if title.startswith("#") and newline:
        return f"{title}\n\n{block}\n{rest.lstrip(chr(10))}"
    return f"{block}\n{scorecard}"

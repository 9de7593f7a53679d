"""The default branch's trend on report.html: each run's recent stored scores, read from the
result store (``evalgate.store``, a later stage, seen through the small protocol below)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from evalgate.gate import Verdict
from evalgate.run.runfiles import stored_metadata

__all__ = ["Trend", "stored_scores", "trend_points"]

# (model, benchmark, metric) → [(label, score)], oldest first: the default branch's stored runs.
Trend = Mapping[tuple[str, str, str], list[tuple[str, float]]]


class _StoredKey(Protocol):
    @property
    def commit(self) -> str: ...


class _Stored(Protocol):
    @property
    def key(self) -> _StoredKey: ...
    @property
    def path(self) -> Path: ...


class _History(Protocol):
    """What the trend reads of a result store (``evalgate.store``, a later stage)."""

    def history(self, name: str, limit: int = 20) -> Sequence[_Stored]: ...


def trend_points(
    store: _History, verdict: Verdict, limit: int = 20
) -> dict[tuple[str, str, str], list[tuple[str, float]]]:
    """The result store's recent default-branch scores of each of the verdict's runs (stored as
    ``{benchmark}--{model label}``), oldest first, as :func:`render_html`'s ``trend``; the score
    is the one :mod:`evalgate.action.trend` charts (``avg_reward``, else the first metric)."""
    return {
        (run.model, run.benchmark, "score"): stored_scores(
            store, f"{run.benchmark}--{run.model}", limit
        )
        for run in verdict.runs
    }


def stored_scores(store: _History, name: str, limit: int) -> list[tuple[str, float]]:
    """(short commit, its metadata's ``headline_score``) of the store's last ``limit`` runs of
    ``name``, oldest first; a run without a readable metadata.json or a score is left out."""
    points = []
    for stored in reversed(store.history(name, limit=limit)):
        meta = stored_metadata(stored.path)
        score = meta.headline_score if meta is not None else None
        if score is not None:
            points.append((stored.key.commit[:7], score))
    return points

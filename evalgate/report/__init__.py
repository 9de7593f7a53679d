"""Rendering: a verdict in, Markdown and JSON out. Pure functions, no I/O."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

import jinja2

from evalgate import __version__
from evalgate.gate import Verdict

__all__ = ["render_scorecard", "verdict_json"]

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("evalgate", "report"),
    autoescape=False,
    trim_blocks=True,
    lstrip_blocks=True,
    undefined=jinja2.StrictUndefined,
)


def _pct(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{100 * value:.1f}%"


def _ci(est: Any) -> str:
    if est is None or math.isnan(est.lo) or math.isnan(est.hi):
        return "–"
    return f"[{100 * est.lo:.1f}, {100 * est.hi:.1f}]"


def render_scorecard(verdict: Verdict) -> str:
    template = _ENV.get_template("scorecard.md.j2")
    runs = {(r.model, r.benchmark): r for r in verdict.runs}
    return template.render(verdict=verdict, runs=runs, pct=_pct, ci=_ci, version=__version__)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def verdict_json(verdict: Verdict) -> dict[str, Any]:
    """The machine-readable verdict (NaN written as null: JSON has no NaN)."""
    return _clean(
        {
            "status": verdict.status,
            "exit_code": int(verdict.exit_code),
            "reasons": list(verdict.reasons),
            "checks": [asdict(c) for c in verdict.checks],
            "runs": [asdict(r) for r in verdict.runs],
            "evalgate_version": __version__,
        }
    )

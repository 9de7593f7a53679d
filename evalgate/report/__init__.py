"""Rendering: a verdict in, Markdown and JSON out. Pure functions, no I/O (but for jinja2's
compiled-template cache: compiling the scorecard costs more than rendering it).

Every ``{{ … }}`` in the template is escaped by the environment's ``finalize`` unless a helper
marked it as Markdown it built itself (:class:`~markupsafe.Markup`): labels, ids, reasons and
completions come from the pull request and the model, and must render inert (``_escape.py``).
"""

from __future__ import annotations

import datetime
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import jinja2
from markupsafe import Markup

from evalgate import __version__, stats
from evalgate._json import integer, items, mapping, number
from evalgate.gate import Verdict
from evalgate.report._escape import code_span, escape_text
from evalgate.run.costs import format_usd

if TYPE_CHECKING:
    from evalgate.compare.paired import MetricComparison, RunComparison

__all__ = ["code_span", "escape_text", "render_scorecard", "verdict_json"]


def _numeric(fn: Callable[..., str]) -> Callable[..., Markup]:
    """Mark a number formatter's output as evalgate's own Markdown (brackets, signs, "<")."""

    def wrapped(*args: object, **kwargs: object) -> Markup:
        return Markup(fn(*args, **kwargs))

    return wrapped


# Compiled when first needed (re's own cache): most runs have no report URL.
_URL = r"https?://[A-Za-z0-9.-]+(?::\d+)?(?:/[A-Za-z0-9._~/%+-]*)?(?:#[A-Za-z0-9_-]*)?"


def _link_target(url: str | None) -> Markup | None:
    """The report link's target, as evalgate's own Markdown when it is a plain http(s) URL (from
    the runner's GITHUB_* variables or EVALGATE_REPORT_URL); anything else gets no link."""
    return Markup(url) if url and re.fullmatch(_URL, url) else None


def _finalize(value: object) -> object:
    # Markup is what a helper built on purpose; numbers are evalgate's own. Anything else is text.
    if isinstance(value, Markup | int | float):
        return value
    return escape_text(value)


class _TemplateCache(jinja2.FileSystemBytecodeCache):
    """Compiled templates under the cache dir; a cache that can't be read or written is none."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except (OSError, ValueError, EOFError, TypeError):  # unreadable or truncated: recompile
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            os.makedirs(self.directory, exist_ok=True)
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _environment(
    *, autoescape: bool, finalize: Callable[[object], object] | None = None
) -> jinja2.Environment:
    """The report templates' environment (the scorecard's and report.html's): strict about
    undefined names, and compiled once into the cache dir (compiling the page's template took
    ~30 ms of every run; compiled once, it is read back)."""
    from evalgate.run.cache import default_cache_dir

    return jinja2.Environment(
        loader=jinja2.PackageLoader("evalgate", "report"),
        bytecode_cache=_TemplateCache(str(default_cache_dir(os.environ) / "templates")),
        autoescape=autoescape,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
        finalize=finalize,
    )


_ENV = _environment(autoescape=False, finalize=_finalize)


def _nan(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _pct(value: float | None) -> str:
    return "–" if _nan(value) else f"{100 * value:.1f}%"  # type: ignore[operator]


def _pp(value: float | None, sign: bool = True) -> str:
    """Percentage points: Δ and margins are differences of proportions."""
    if _nan(value):
        return "–"
    if math.isinf(value):  # type: ignore[arg-type]
        return "∞ (too few items)"
    return f"{100 * value:+.1f} pp" if sign else f"{100 * value:.1f} pp"  # type: ignore[operator]


def _bound(value: float | None, edge: float, scale: stats.Scale | None = None) -> str:
    """A bound in signed pp (or the metric's units) at the precision that keeps it on its side
    of ``edge`` (−δ for the lower bound, 0 for the upper): never "-0.0 pp" beside a FAIL or
    "-3.0 pp" beside a PASS at δ = 3 pp."""
    if _nan(value) or math.isinf(value):  # type: ignore[arg-type]
        return _pp(value)
    if not _in_percent(scale):
        digits = stats.decimals_against(value, edge, 3, scale=1.0)  # type: ignore[arg-type]
        return f"{value:+.{digits}f}"
    digits = stats.decimals_against(value, edge)  # type: ignore[arg-type]
    return f"{100 * value:+.{digits}f} pp"  # type: ignore[operator]


def _pval(value: float | None) -> str:
    if _nan(value):
        return "–"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"  # type: ignore[operator]


def _optional(value: object) -> float | None:
    """A number read from a run file, None when it is missing (or not a number)."""
    return None if value is None else number(value, math.nan)


def _usd(value: float | None) -> str:
    return format_usd(value)


def _requests(stats: Mapping[str, object] | None) -> str:
    """Requests sent, retries by kind, throttling and cache hits, from a run's client stats."""
    if not stats:
        return "–"
    parts = [f"{stats.get('requests', 0):,} sent"]
    if stats.get("retries"):
        kinds = ", ".join(f"{k}: {n}" for k, n in mapping(stats.get("retried_errors")).items())
        parts.append(f"{stats['retries']:,} retried" + (f" ({kinds})" if kinds else ""))
    if stats.get("throttle_decreases"):
        parts.append(
            f"throttled {stats['throttle_decreases']}×, down to {stats.get('min_concurrency')} "
            "in flight"
        )
    if stats.get("cache_hits"):
        parts.append(f"{stats['cache_hits']:,} cached")
    return " · ".join(parts)


def _judge(info: Mapping[str, object]) -> Markup:
    """Who graded a model-graded run, how often (cached), and how far it can be trusted: its
    agreement measured on the labelled set, or a plain note that it was not measured."""
    req = mapping(info.get("requests"))
    # The model id and backend come from config: shown as code spans, inert.
    text = (
        f"judge {code_span(str(info.get('model_id')))} ({code_span(str(info.get('backend')))}), "
        f"{integer(req.get('calls'))} judgements ({integer(req.get('cache_hits'))} from the cache)"
    )
    usage = mapping(info.get("usage"))
    if usage:
        text += (
            f", {integer(usage.get('prompt_tokens'))} / {integer(usage.get('completion_tokens'))} "
            f"tokens, {_usd(_optional(info.get('cost_usd')))}"
        )
    consistency = _optional(info.get("position_consistency"))
    if consistency is not None:
        shown = _pct(consistency)
        text += f", position-swap consistency {shown} over {integer(info['pairs'])} pairs"
        from evalgate.compare.position import CONSISTENCY_FLOOR  # a pairwise judge's run only

        if consistency < CONSISTENCY_FLOOR:
            text += f" (below {100 * CONSISTENCY_FLOOR:.0f}%: it cannot PASS a comparison)"
    agree = mapping(info.get("agreement"))
    if not agree:
        return Markup(text + "; agreement not measured (no labelled set: `scorer.labels`)")
    kappa, accuracy = _optional(agree.get("kappa")), _pct(_optional(agree.get("accuracy")))
    text += (
        f"; measured on {integer(agree['n'])} labelled examples: accuracy {accuracy}, "
        f"Cohen's κ {'n/a' if kappa is None else f'{kappa:.2f}'}"
    )
    self_agreement = _optional(agree.get("self_agreement"))
    if self_agreement is not None:
        shown, k = _pct(self_agreement), integer(agree["samples"])
        text += f", self-agreement {shown} over {k} samples"
    if agree.get("errors"):
        text += f", {integer(agree['errors'])} without a verdict"
    return Markup(text)


def _ci(est: stats.Estimate | None, scale: stats.Scale | None = None) -> str:
    if est is None or _nan(est.lo) or _nan(est.hi):
        return "–"
    if not _in_percent(scale):
        return f"[{est.lo:.4g}, {est.hi:.4g}]"
    return f"[{100 * est.lo:.1f}, {100 * est.hi:.1f}]"


# A metric is shown in its own units (see evalgate.stats.Scale): proportions in % and their
# differences in pp, anything else (counts, rewards on another range) as plain numbers.
def _in_percent(scale: stats.Scale | None) -> bool:
    return scale is None or scale.proportion


def _value(value: float | None, scale: stats.Scale | None = None) -> str:
    if _in_percent(scale) or _nan(value):
        return _pct(value)
    return f"{value:.4g}"


def _diff(value: float | None, scale: stats.Scale | None = None, sign: bool = True) -> str:
    if _in_percent(scale) or _nan(value) or math.isinf(value):  # type: ignore[arg-type]
        return _pp(value, sign)
    return f"{value:+.3g}" if sign else f"{value:.3g}"


# The template's number formatters, each marked safe (figures, never user text): built once.
_NUMBERS = {
    "pct": _numeric(_pct),
    "pp": _numeric(_pp),
    "bound": _numeric(_bound),
    "pval": _numeric(_pval),
    "ci": _numeric(_ci),
    "value": _numeric(_value),
    "diff": _numeric(_diff),
    "usd": _numeric(_usd),
    "requests": _numeric(_requests),
}


def _run_scale(verdict: Verdict, benchmark: str, metric: str) -> stats.Scale | None:
    """The scale of a run metric: declared in the policy, else from every run's items."""
    # Streamed, not listed: a million items' values as Python floats held ~80 MiB at the peak
    # of `evalgate compare` (bench/compare_scale.py).
    maps = [
        values
        for run in verdict.runs
        if run.benchmark == benchmark
        for values in [run.per_item.get(metric, {})]
        if values
    ]
    declared = (verdict.policy.get("scales") or {}).get(metric)
    if not maps and not declared:
        return None
    return stats.metric_scale((v for values in maps for v in values.values()), declared)


def _cell(text: str) -> Markup:
    """Free text (prompts, completions) verbatim in one Markdown table cell."""
    return code_span(text)


def _age(stored_at: str, now: datetime.datetime | None = None) -> str:
    """'3 days ago' from an ISO-8601 UTC time; '' if unparseable."""
    try:
        then = datetime.datetime.fromisoformat(stored_at.replace("Z", "+00:00"))
    except ValueError:
        return ""
    now = now or datetime.datetime.now(datetime.UTC)
    seconds = max(0.0, (now - then).total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n > 1 else ''} ago"
    return "just now"


def _why_rerun(origin: Mapping[str, object]) -> str:
    """Why the Action re-ran the merge-base (``evalgate.action.main._baselines``)."""
    why = origin.get("why")
    if why == "rerun":
        return ": `baseline: rerun`"
    if why == "no-store":
        return ": no result store (`results_store: none`)"
    if why == "not-stored":
        runs = ", ".join(code_span(str(m)) for m in items(origin.get("missing")))
        return f": nothing usable stored for it or its ancestors ({runs})"
    return ""


def _origin(comp: RunComparison) -> Markup:
    """Where the baseline came from: the commit, and in the Action how it relates to the PR's
    merge-base (that commit re-run, and why; or stored for it or its nearest ancestor)."""
    origin = comp.base_origin or {}
    if origin.get("commit"):
        commit = str(origin["commit"])
        merge_base = str(origin.get("merge_base") or "")
        stored = origin.get("stored_at")
        age = escape_text(f", stored {_age(stored)} ({stored})") if stored else ""
        if origin.get("rerun"):
            where = "the merge-base " if merge_base == commit else ""
            why = _why_rerun(origin)
            return Markup(f"{where}commit {code_span(commit[:12])} (re-run for this PR{why})")
        if merge_base == commit:
            relation = ", the merge-base"
        elif merge_base:
            relation = (
                f", the nearest stored ancestor of the merge-base {code_span(merge_base[:12])}"
            )
        else:
            relation = ""
        return Markup(f"commit {code_span(commit[:12])}{relation}{age}")
    return Markup(f"run {code_span(origin.get('run_id', comp.base_path))}")


if TYPE_CHECKING:  # at run time a plain dict: a TypedDict class costs ~20 µs a field to build

    class _Matrix(TypedDict):
        models: list[str]
        rows: dict[tuple[str, str], dict[str, stats.Estimate]]  # (benchmark, metric) → model → est
        best: dict[tuple[str, str], str]  # the model with the highest mean, when they differ
else:
    _Matrix = dict


def _matrix(verdict: Verdict) -> _Matrix:
    """benchmark × metric rows, one column per model: the cross-model comparison."""
    models = list(dict.fromkeys(r.model for r in verdict.runs))
    rows: dict[tuple[str, str], dict[str, stats.Estimate]] = {}
    for run in verdict.runs:
        for metric, est in run.metrics.items():
            rows.setdefault((run.benchmark, metric), {})[run.model] = est
    best: dict[tuple[str, str], str] = {}
    for key, cells in rows.items():
        scored = [(est.mean, m) for m, est in cells.items() if not _nan(est.mean)]
        if len(scored) > 1 and len({v for v, _ in scored}) > 1:
            best[key] = max(scored)[1]
    return {"models": models, "rows": rows, "best": best}


def _worst(mc: MetricComparison) -> str:
    """The score an errored PR rollout was given on the PASS side (evalgate.run.imputed)."""
    return "–" if mc.imputed_as is None else f"{mc.imputed_as:g}"


def render_scorecard(
    verdict: Verdict,
    *,
    show_details: bool = True,
    max_flips: int = 20,
    max_reasons: int = 20,
    report_url: str | None = None,
    report_artifact: str | None = None,
    relative_to: Path | None = None,
) -> str:
    """The Markdown scorecard. ``show_details=False`` drops the collapsed sections (for size);
    ``report_url``: where report.html can be opened (a link line when known), in the artifact
    ``report_artifact`` (named in the line; None: a URL the user gave); ``relative_to``:
    the scorecard's folder, that run folders inside it are named relative to (an absolute path
    is the writing machine's or container's, meaningless to the reader)."""

    def where(path: str) -> str:
        if relative_to is None or not path:
            return path
        base = os.path.realpath(relative_to)
        full = os.path.realpath(path)
        return os.path.relpath(full, base) if full.startswith(base + os.sep) else path

    template = _ENV.get_template("scorecard.md.j2")
    runs = {(r.model, r.benchmark): r for r in verdict.runs}
    baseline_checks = {
        (c.model, c.benchmark, c.metric): c for c in verdict.checks if c.kind == "baseline"
    }

    def n_flips(direction: str) -> int:
        return sum(f.direction == direction for c in verdict.comparisons for f in c.flips)

    return template.render(
        verdict=verdict,
        runs=runs,
        baseline_checks=baseline_checks,
        **_NUMBERS,
        scale_of=lambda benchmark, metric: _run_scale(verdict, benchmark, metric),
        judge=_judge,
        cell=_cell,
        code=code_span,
        where=where,
        origin=_origin,
        n_flips=n_flips,
        worst=_worst,
        matrix=_matrix(verdict),
        show_details=show_details,
        max_flips=max_flips,
        max_reasons=max_reasons,
        version=__version__,
        report_url=_link_target(report_url),
        report_artifact=report_artifact,
    )


def _clean(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):  # JSON has no NaN or Infinity
        return None
    if isinstance(value, dict):
        return _clean_dict(value)
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _clean_dict(value: Mapping[str, object]) -> dict[str, object]:
    return {k: _clean(v) for k, v in value.items()}


def verdict_json(verdict: Verdict) -> dict[str, object]:
    """The machine-readable verdict (NaN and infinities written as null)."""
    return _clean_dict(
        {
            "status": verdict.status,
            "exit_code": int(verdict.exit_code),
            "on_inconclusive": verdict.on_inconclusive,
            "policy": verdict.policy,
            "reasons": list(verdict.reasons),
            "checks": [asdict(c) for c in verdict.checks],
            "comparisons": [asdict(c) for c in verdict.comparisons],
            "runs": [
                # Emptied before asdict, which would deep-copy every item's values to drop them.
                {
                    k: v
                    for k, v in asdict(replace(r, per_item={}, groups={})).items()
                    if k not in ("per_item", "groups")
                }
                for r in verdict.runs
            ],
            "evalgate_version": __version__,
        }
    )

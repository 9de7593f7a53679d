"""report.html: the verdict as one self-contained page (no network, no CDN, no server).

The summary — scores with their CIs, Δ against the baseline drawn against the margin −δ, the
default branch's trend — is rendered here as static HTML and inline SVG, so it paints before any
script runs. The per-item tables (prompt, reference, base and PR completions, reward, error kind)
travel as one JSON block that a small inline script renders in batches as they scroll into view:
a 2,000-item run paints its first screen without building 2,000 rows (bench/report_paint.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import jinja2

from evalgate import __version__, stats
from evalgate._json import items, mapping
from evalgate.errors import UsageError
from evalgate.gate import Verdict
from evalgate.report import _environment
from evalgate.report._charts import Delta, Score, svg_delta, svg_scores, svg_trend
from evalgate.report.trend import Trend
from evalgate.run.layout import RESULTS
from evalgate.run.rundir import LoadedRun, iter_records, loaded_run, read_run_config

if TYPE_CHECKING:
    from typing import NotRequired, TypedDict

    import numpy as np
    import numpy.typing as npt

    # The shapes of the page's data, for the type checker only: at run time each would be a
    # TypedDict class built at import (every field's annotation compiled into a ForwardRef:
    # ~1 ms for these and _charts' on every run's way out, issue #36); there, plain dicts.
    class _Shown(TypedDict):
        """A listed item's texts, from its first record, capped."""

        prompt: str
        answer: str
        completion: str
        judge: str | None

    class _Row(TypedDict):
        """One row of a run's table in the page's data block."""

        id: str
        status: str
        prompt: str
        answer: str
        base: str | None
        pr: str
        reward_pr: float | None
        reward_base: float | None
        error: str | None
        error_text: str | None
        judge: str | None

    class _LeftOut(TypedDict):
        status: str  # unchanged, regressed, improved, errored
        n: int  # items not listed
        listed: int  # items listed with that status

    class _RunData(TypedDict):
        key: str
        agent: bool
        has_base: bool
        counts: dict[str, int]
        left_out: list[_LeftOut]
        results: str
        table: _RunRows  # its rows are streamed into the data block, not kept

    class _TrendLine(TypedDict):
        label: str
        svg: str
        last: tuple[str, float]

    class _Benchmark(TypedDict):
        name: str
        scores: list[Score]
        deltas: list[Delta]
        trends: list[_TrendLine]
        errors: NotRequired[list[str]]
        score_svg: str
        delta_svg: str
else:
    _Shown = _Row = _LeftOut = _RunData = _TrendLine = _Benchmark = dict

__all__ = [
    "MAX_CHANGED_ROWS",
    "MAX_UNCHANGED_ROWS",
    "render_html",
    "report_url",
    "write_html",
]

_ENV = _environment(autoescape=True)
_MAX_TEXT = 4000  # characters of one prompt/completion kept in the page (the rest: results.jsonl)


def report_url(environ: Mapping[str, str]) -> str | None:
    """Where readers find report.html: ``EVALGATE_REPORT_URL``, else the Actions run's artifacts
    (the example workflows upload the outputs there); None outside Actions."""
    if environ.get("EVALGATE_REPORT_URL"):
        return environ["EVALGATE_REPORT_URL"]
    server, repo, run = (
        environ.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")
    )
    if server and repo and run:
        return f"{server}/{repo}/actions/runs/{run}#artifacts"
    return None


def _finite(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _text(value: object) -> str:
    """A prompt (chat messages) or completion as plain text, capped."""
    if type(value) is str and len(value) <= _MAX_TEXT:  # most completions and answers
        return value
    if value is None:
        return ""
    if isinstance(value, list):  # chat messages: the last user turn is the question
        for message in reversed(value):
            if isinstance(message, dict) and message.get("role") == "user":
                value = message.get("content", "")
                break
        else:
            value = json.dumps(value, ensure_ascii=False)
    text = str(value)
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT] + f"\n… ({len(text):,} characters)"


def _judge_text(rec: Mapping[str, object]) -> str | None:
    """A model-graded rollout's judgement: each sample's score and reasoning (its raw reply
    when no verdict could be read)."""
    judge = rec.get("judge")
    if judge is None:  # not model-graded (most runs): no samples
        return None
    samples = items(mapping(judge).get("samples"))
    if not samples:
        return None
    parts = []
    for i, value in enumerate(samples, 1):
        sample = mapping(value)
        score = _finite(sample.get("score"))
        shown = f"{score:.2f}" if score is not None else "no verdict"
        body = sample.get("reasoning") if score is not None else sample.get("raw")
        order = f" {sample['order']}" if sample.get("order") else ""  # pairwise: which first
        parts.append(f"[{i}{order}] {shown}: {body or ''}".strip())
    return _text("\n".join(parts))


_SHOWN = ("prompt", "answer", "completion", "judge")
# Unchanged items listed per run, in the run's order: every changed or errored item is listed
# whatever the count, but a page of 250,000 rows (~1 GB) opens in no browser; the rest are in
# the run's results.jsonl, and the page says how many were left out.
MAX_UNCHANGED_ROWS = 2000
# ... and a ceiling on the rest, per status, for the run that breaks (or errors on) every one of
# its 250,000 items: the first 20,000 show what broke as well as all of them would.
MAX_CHANGED_ROWS = 20_000


class _Stat:
    """One item's outcome over its rollouts: the mean of its finite rewards and its first
    error, gathered as the journal streams by (no texts: those are read back for shown rows)."""

    __slots__ = ("error", "n", "total")

    def __init__(self) -> None:
        self.error: str | None = None
        self.total, self.n = 0.0, 0

    def add(self, rec: Mapping[str, object]) -> None:
        error, reward = rec.get("error"), _finite(rec.get("reward"))
        if error:
            self.error = self.error or str(error)
        if error is None and reward is not None:
            self.total, self.n = self.total + reward, self.n + 1

    @property
    def reward(self) -> float | None:
        return self.total / self.n if self.n else None


# Items, and characters of shown texts, the outcome pass keeps of each item's first record, so
# that a run of a few thousand items has its journal read once, not again for the rows; past
# either they are dropped and the rows read the listed items' texts back (a run of any size,
# bounded memory).
_KEEP_ITEMS, _KEEP_CHARS = 10_000, 8_000_000


def _stats(run_dir: Path) -> tuple[dict[str, _Stat], dict[str, _Shown] | None]:
    """Each item's outcome, in the order the journal first names it, and each item's first
    record's shown fields in that order (None past :data:`_KEEP_ITEMS` or :data:`_KEEP_CHARS`)."""
    out: dict[str, _Stat] = {}
    firsts: dict[str, _Shown] | None = {}
    kept = 0
    for rec in iter_records(run_dir / RESULTS):
        item_id = rec["example_id"]
        stat = out.get(item_id)
        if stat is None:
            stat = out[item_id] = _Stat()
            if firsts is not None:
                shown = firsts[item_id] = _shown(rec)
                judge = shown["judge"]
                kept += len(shown["prompt"]) + len(shown["answer"]) + len(shown["completion"])
                if judge is not None:
                    kept += len(judge)
                if kept > _KEEP_CHARS or len(firsts) > _KEEP_ITEMS:
                    firsts = None
        # _Stat.add's common record inline (no error, a finite float reward): once a line, on
        # the way out of every run.
        reward = rec.get("reward")
        if rec.get("error") is None and type(reward) is float and reward - reward == 0.0:
            stat.total += reward
            stat.n += 1
        else:
            stat.add(rec)
    return out, firsts


def _firsts(run_dir: Path, ids: Collection[str]) -> Iterator[tuple[str, _Shown]]:
    """The first record's shown fields of each of ``ids``, in journal order, texts capped."""
    seen: set[str] = set()
    for rec in iter_records(run_dir / RESULTS):
        item_id = rec["example_id"]
        if item_id in ids and item_id not in seen:
            seen.add(item_id)
            yield item_id, _shown(rec)


def _shown(rec: Mapping[str, object]) -> _Shown:
    answer, completion, prompt = rec.get("answer"), rec.get("completion"), rec.get("prompt")
    # _text's common chat prompt inline: its last message is the user's question, short text.
    last = prompt[-1] if type(prompt) is list and prompt else None
    if type(last) is dict and last.get("role") == "user":
        content = last.get("content", "")
        if type(content) is not str or len(content) > _MAX_TEXT:
            content = _text(prompt)
    else:
        content = _text(prompt)
    return {
        "prompt": content,
        # _text's common case (a short string, as it is) inline: once an item, on the way out
        # of every run.
        "answer": answer if type(answer) is str and len(answer) <= _MAX_TEXT else _text(answer),
        "completion": completion
        if type(completion) is str and len(completion) <= _MAX_TEXT
        else _text(completion),
        "judge": _judge_text(rec) if rec.get("judge") is not None else None,
    }


def _status(head: float | None, base: float | None, errored: bool, has_base: bool) -> str:
    if errored:
        return "errored"
    if not has_base or head is None or base is None:
        return "same"
    return "regressed" if head < base - 1e-9 else "improved" if head > base + 1e-9 else "same"


class _RunRows:
    """One run's table: which items it lists and their counts, decided from the journals'
    outcomes alone; :meth:`rows` then reads the listed items' texts back as it yields them,
    so the rows travel to the page one at a time (never the whole table in memory)."""

    def __init__(self, head_dir: str, base_dir: str | None, unchanged_rows: int) -> None:
        self.head = Path(head_dir)
        self.base = Path(base_dir) if base_dir else None
        self.agent = False
        self.omitted: dict[str, int] = {}  # status → items not listed
        self.left_out: list[_LeftOut] = []
        # id → (status, PR reward, base reward, error), in the run's order
        self.listed: dict[str, tuple[str, float | None, float | None, str | None]] = {}
        self.counts = {"regressed": 0, "improved": 0, "errored": 0, "all": 0}
        # The runs a comparison just read, while still held: their tables give every item's
        # outcome (no second parse of the journals, no object per item); else the journals.
        self._held = loaded_run(self.head), loaded_run(self.base) if self.base else None
        # The journal pass's first records, when it kept them (no second read for the rows).
        self._kept: tuple[dict[str, _Shown] | None, dict[str, _Shown] | None] = None, None
        if self._held[0] is not None and (self.base is None or self._held[1] is not None):
            self.agent = self._held[0].config.benchmark.kind == "agent"
            self._list_held(self._held[0], self._held[1], unchanged_rows)
            return
        self._held = None, None
        try:
            config = read_run_config(self.head)
            heads, head_firsts = _stats(self.head)
        except UsageError:
            self.base = None
            return
        self.agent = config.benchmark.kind == "agent"
        bases: dict[str, _Stat] = {}
        base_firsts: dict[str, _Shown] | None = None
        if self.base is not None:
            try:
                bases, base_firsts = _stats(self.base)
            except UsageError:
                self.base, bases = None, {}
        self._kept = head_firsts, base_firsts
        listed = dict.fromkeys(("regressed", "improved", "errored", "same"), 0)
        for item_id, stat in heads.items():
            base = bases.get(item_id)
            h, b = stat.reward, base.reward if base else None
            status = _status(h, b, stat.error is not None, base is not None)
            if listed[status] >= (unchanged_rows if status == "same" else MAX_CHANGED_ROWS):
                self.omitted[status] = self.omitted.get(status, 0) + 1
                continue
            listed[status] += 1
            self.listed[item_id] = (status, h, b, stat.error)
        self.counts = {k: listed[k] for k in ("regressed", "improved", "errored")}
        self.counts["all"] = len(self.listed)
        # The page's line per status left out: how many, of how many listed.
        self.left_out = [
            {"status": "unchanged" if k == "same" else k, "n": n, "listed": listed[k]}
            for k, n in self.omitted.items()
        ]

    def _list_held(self, head: LoadedRun, base: LoadedRun | None, unchanged_rows: int) -> None:
        """What the journal pass below lists, from the held runs' columns (numpy): the same
        items, statuses, counts and order."""
        import numpy as np

        from evalgate.compare.join import join_ids  # the same join as the comparison's

        mean_h, count_h, error_h = head.records.outcomes()
        n = head.records.n_items
        has_h = count_h > 0
        errored = np.zeros(n, dtype=bool)
        errored[list(error_h)] = True
        if base is not None and base.records.n_items:  # (a baseline may have recorded nothing)
            mean_b, count_b, _ = base.records.outcomes()
            at = join_ids(base.records, head.records)  # no list of a million ids
            has_base = at >= 0
            b_mean = np.where(has_base, mean_b[np.maximum(at, 0)], np.nan)
            has_b = has_base & (np.where(has_base, count_b[np.maximum(at, 0)], 0) > 0)
        else:
            at = np.full(n, -1, dtype=np.int64)
            has_base = has_b = np.zeros(n, dtype=bool)
            b_mean = np.full(n, np.nan)
        both = ~errored & has_base & has_h & has_b
        with np.errstate(invalid="ignore"):
            regressed = both & (mean_h < b_mean - 1e-9)
            improved = both & (mean_h > b_mean + 1e-9)
        masks = {
            "regressed": regressed,
            "improved": improved,
            "errored": errored,
            "same": ~(regressed | improved | errored),
        }
        listed = dict.fromkeys(masks, 0)
        shown: list[npt.NDArray[np.intp]] = []
        first_omitted: list[tuple[int, str, int]] = []
        for status, mask in masks.items():
            rows = np.nonzero(mask)[0]
            cap = unchanged_rows if status == "same" else MAX_CHANGED_ROWS
            listed[status] = min(cap, rows.size)
            shown.append(rows[:cap])
            if rows.size > cap:
                first_omitted.append((int(rows[cap]), status, int(rows.size - cap)))
        self.omitted = {status: count for _, status, count in sorted(first_omitted)}
        status_of = np.empty(n, dtype=object)
        for status, mask in masks.items():
            status_of[mask] = status
        for index in np.sort(np.concatenate(shown)).tolist():
            h = float(mean_h[index]) if has_h[index] else None
            b = float(b_mean[index]) if has_b[index] else None
            self.listed[head.records.item_id(index)] = (status_of[index], h, b, error_h.get(index))
        self.counts = {k: listed[k] for k in ("regressed", "improved", "errored")}
        self.counts["all"] = len(self.listed)
        self.left_out = [
            {"status": "unchanged" if k == "same" else k, "n": n_left, "listed": listed[k]}
            for k, n_left in self.omitted.items()
        ]

    def _firsts(self, run: int) -> Iterator[tuple[str, _Shown]]:
        held, path, kept = self._held[run], (self.head, self.base)[run], self._kept[run]
        if kept is not None:  # in journal order, as the read below yields them
            yield from ((i, shown) for i, shown in kept.items() if i in self.listed)
            return
        if held is None:
            assert path is not None
            yield from _firsts(path, self.listed)
            return
        for item_id, rec in held.first_records(self.listed):
            yield item_id, _shown(rec)

    def rows(self) -> Iterator[_Row]:
        """The listed items' rows, in the run's order: texts read back from the journals."""
        if not self.listed:
            return
        base_first: dict[str, tuple[str, str]] = {}
        if self.base is not None:
            base_first = {  # what a row shows of the base: its prompt and completion
                i: (f["prompt"], f["completion"]) for i, f in self._firsts(1)
            }
        for item_id, first in self._firsts(0):
            status, h, b, error = self.listed[item_id]
            base = base_first.pop(item_id, None)
            yield {
                "id": item_id,
                "status": status,
                "prompt": first["prompt"]
                or (base[0] if base else "")
                or "(not recorded: the request failed)",
                "answer": first["answer"],
                "base": base[1] if base else None,
                "pr": first["completion"],
                "reward_pr": h,
                "reward_base": b,
                "error": error.split(":", 1)[0] if error else None,
                "error_text": _text(error) if error else None,
                "judge": first["judge"],
            }


def _benchmark(name: str) -> _Benchmark:
    return {
        "name": name,
        "scores": [],
        "deltas": [],
        "trends": [],
        "score_svg": "",
        "delta_svg": "",
    }


def _benchmarks(verdict: Verdict, trend: Trend) -> list[_Benchmark]:
    out: dict[str, _Benchmark] = {}
    margin = float(verdict.policy.get("margin", 0.0))
    for run in verdict.runs:
        entry = out.setdefault(run.benchmark, _benchmark(run.benchmark))
        for metric, est in run.metrics.items():
            entry["scores"].append(
                {
                    "model": run.model,
                    "metric": metric,
                    "mean": _finite(est.mean),
                    "lo": _finite(est.lo),
                    "hi": _finite(est.hi),
                    "n": est.n,
                }
            )
        if run.infra_error:
            entry.setdefault("errors", []).append(f"{run.model}: {run.infra_error}")
    status = {
        (c.model, c.benchmark, c.metric): c.status for c in verdict.checks if c.kind == "baseline"
    }
    for comp in verdict.comparisons:
        entry = out.setdefault(comp.benchmark, _benchmark(comp.benchmark))
        for mc in comp.metrics:
            r = mc.result
            entry["deltas"].append(
                {
                    "model": comp.model,
                    "metric": mc.metric,
                    "delta": _finite(r.delta) if r else None,
                    "lo": _finite(r.lo) if r else None,
                    "hi": _finite(r.hi) if r else None,
                    # Shown at the precision that keeps each bound on its side of its edge.
                    "lo_digits": stats.decimals_against(r.lo, -r.margin) if r else 1,
                    "hi_digits": stats.decimals_against(r.hi, 0.0) if r else 1,
                    "status": status.get((comp.model, comp.benchmark, mc.metric), mc.status),
                    # PR rollouts that errored, scored the worst value for PASS (run.imputed)
                    "imputed": mc.imputed,
                    "imputed_as": mc.imputed_as,
                }
            )
    for (model, bench, metric), points in trend.items():
        if bench in out and len(points) >= 2:
            out[bench]["trends"].append(
                {"label": f"{model} · {metric}", "svg": svg_trend(points), "last": points[-1]}
            )
    for entry in out.values():
        entry["score_svg"] = svg_scores(entry["scores"]) if entry["scores"] else ""
        entry["delta_svg"] = svg_delta(entry["deltas"], margin) if entry["deltas"] else ""
    return list(out.values())


def _runs_data(verdict: Verdict, unchanged_rows: int) -> list[_RunData]:
    base_paths = {(c.model, c.benchmark): c.base_path for c in verdict.comparisons}
    out: list[_RunData] = []
    for run in verdict.runs:
        if not run.run_dir:
            continue
        table = _RunRows(run.run_dir, base_paths.get((run.model, run.benchmark)), unchanged_rows)
        out.append(
            {
                "key": f"{run.model} / {run.benchmark}",
                "agent": table.agent,
                "has_base": (run.model, run.benchmark) in base_paths,
                "counts": table.counts,
                "left_out": table.left_out,
                "results": str(Path(run.run_dir) / RESULTS),
                "table": table,
            }
        )
    return out


# Built once: json.dumps with non-default arguments builds a new encoder on every call, and the
# page's data block encodes one row per listed item.
_SCRIPT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _json_for_script(data: object) -> str:
    # Inside <script> only "</" can end the element early; escaping it keeps any text inert.
    text = _SCRIPT_JSON.encode(data)
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


try:  # orjson: a batch of rows ~5x faster than the stdlib, where its bytes are the same
    from orjson import dumps as _fast_dumps
except ImportError:  # pragma: no cover - where orjson is not installed
    _fast_dumps = None  # type: ignore[assignment]


def _plain(value: float | None) -> bool:
    """Whether both encoders write ``value`` alike: None, 0, and floats of 1e-4 ≤ |x| < 1e16
    (plain decimals, the shortest that reads back; outside it the stdlib writes an exponent
    (1e-05, 1e+16) and orjson does not)."""
    return value is None or value == 0.0 or 1e-4 <= abs(value) < 1e16


def _rows_for_script(batch: list[_Row]) -> str:
    """:func:`_json_for_script` of a batch of rows, the same text: by orjson when every float
    in it is :func:`_plain` (rows hold text, None and those two means otherwise, which orjson
    escapes as the stdlib's ``ensure_ascii=False`` form does), else, or for what orjson
    refuses (a lone surrogate), by the stdlib. Once a batch of rows, as a run's report is
    written after its last reply (tests/test_report_rows.py holds the two equal)."""
    if _fast_dumps is not None:
        for row in batch:
            if not (_plain(row["reward_pr"]) and _plain(row["reward_base"])):
                break
        else:
            try:
                text = _fast_dumps(batch).decode("utf-8")
            except TypeError:
                pass
            else:
                return text.replace("</", "<\\/").replace("<!--", "<\\!--")
    return _json_for_script(batch)


_ROWS_PER_CHUNK = 256  # rows encoded (and handed to the template) together: a few hundred kB


def _data_chunks(runs: list[_RunData]) -> Iterator[str]:
    """The page's data block, ``[{key, agent, has_base, counts, rows: [...]}, ...]``, as JSON
    written a batch of rows at a time: one encoder call and one template output per batch, not
    per row. A list's encoding is its rows' joined by "," (the separators above), so the bytes
    are the same; "</" and "<!--" cannot span the "},{" between two rows."""
    yield "["
    for n, run in enumerate(runs):
        head = {k: v for k, v in run.items() if k != "table"}
        yield ("," if n else "") + _json_for_script(head)[:-1] + ',"rows":['
        batch: list[_Row] = []
        first = True
        for row in run["table"].rows():
            batch.append(row)
            if len(batch) == _ROWS_PER_CHUNK:
                yield ("" if first else ",") + _rows_for_script(batch)[1:-1]
                batch, first = [], False
        if batch:
            yield ("" if first else ",") + _rows_for_script(batch)[1:-1]
        yield "]}"
    yield "]"


def _stream(
    verdict: Verdict, trend: Trend | None, scorecard_url: str | None, unchanged_rows: int
) -> jinja2.environment.TemplateStream:
    runs = _runs_data(verdict, unchanged_rows)
    template = _ENV.get_template("report.html.j2")
    return template.stream(
        verdict=verdict,
        benchmarks=_benchmarks(verdict, trend or {}),
        runs=runs,
        data=_data_chunks(runs),
        version=__version__,
        margin=float(verdict.policy.get("margin", 0.0)),
        alpha=float(verdict.policy.get("alpha", 0.05)),
        scorecard_url=scorecard_url,
    )


def write_html(
    verdict: Verdict,
    path: Path,
    *,
    trend: Trend | None = None,
    scorecard_url: str | None = None,
    unchanged_rows: int = MAX_UNCHANGED_ROWS,
) -> None:
    """Write the report page to ``path`` as it is rendered (no whole-page string is built)."""
    stream = _stream(verdict, trend, scorecard_url, unchanged_rows)
    stream.enable_buffering(64)  # a few kB per write, not one per template fragment
    with Path(path).open("w", encoding="utf-8") as fh:
        fh.writelines(stream)


def render_html(
    verdict: Verdict,
    *,
    trend: Trend | None = None,
    scorecard_url: str | None = None,
    unchanged_rows: int = MAX_UNCHANGED_ROWS,
) -> str:
    """The report page as one string (:func:`write_html` writes it without holding it).
    ``trend``: stored default-branch scores per (model, benchmark, metric); ``unchanged_rows``:
    how many unchanged items each run's table lists."""
    return "".join(_stream(verdict, trend, scorecard_url, unchanged_rows))

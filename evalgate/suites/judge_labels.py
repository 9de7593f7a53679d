"""How far a judge can be trusted, measured on a labelled set the user keeps in the repo.

A labelled set is JSONL, one judged example a line: ``question``, ``completion``, optionally
``reference`` and ``id``, and ``label`` — the grade a person gave: ``pass``/``fail`` (or
true/false, 1/0) for a pass/fail judge, a number on the scale for a scaled one. The judge grades
every example k times; the measures are:

- accuracy and Cohen's κ of the judge's verdict against the labels, both read as pass/fail (a
  score ≥ 0.5 after mapping to [0, 1] is a pass): κ discounts the agreement a judge gets by
  chance (one that passes everything agrees with a set of mostly-passing labels, and has κ 0);
- self-agreement: the share of examples whose k judgements are all the same (needs k ≥ 2);
- errors: examples the judge gave no readable verdict for (left out of the other measures).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from evalgate.errors import ConfigError
from evalgate.suites.judge import Judge, JudgeFailed

__all__ = ["agreement", "cohen_kappa", "labels_path", "load_labels", "measure"]


def labels_path(config: Any, bench: Any) -> Path | None:
    """The benchmark's labelled set, relative to the evals.yaml (kept relative in the config:
    the fingerprint must not hold a checkout's absolute path)."""
    labels = getattr(getattr(bench, "scorer", None), "labels", None)
    if labels is None:
        return None
    return (Path(config.path).parent / labels).resolve()


def _label(value: Any, scale: Any, where: str) -> float:
    """A label as a score in [0, 1] on the judge's scale."""
    if scale == "pass-fail":
        if isinstance(value, bool):
            return float(value)
        text = str(value).strip().lower()
        if text in ("pass", "true", "1", "yes", "correct"):
            return 1.0
        if text in ("fail", "false", "0", "no", "incorrect"):
            return 0.0
        raise ConfigError(f"{where}: label {value!r} is not pass or fail")
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ConfigError(f"{where}: label {value!r} is not a number on the judge's scale")
    if not scale.min <= value <= scale.max:
        raise ConfigError(f"{where}: label {value} is outside the scale {scale.min}-{scale.max}")
    return (float(value) - scale.min) / (scale.max - scale.min)


def load_labels(path: Path, scale: Any) -> list[dict[str, Any]]:
    """The labelled examples, each with its label as a score in [0, 1] (``label_score``)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot read the judge's labelled set ({exc.strerror})"
        ) from None
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"{where}: not JSON ({exc})") from None
        if not isinstance(row, dict):
            raise ConfigError(f"{where}: a labelled example is a JSON object")
        missing = [k for k in ("question", "completion", "label") if k not in row]
        if missing:
            raise ConfigError(f"{where}: missing {', '.join(missing)}")
        row["label_score"] = _label(row["label"], scale, where)
        row.setdefault("id", str(n))
        rows.append(row)
    if not rows:
        raise ConfigError(f"{path}: the judge's labelled set is empty")
    return rows


def cohen_kappa(a: list[bool], b: list[bool]) -> float | None:
    """Cohen's κ of two raters' pass/fail calls; None when chance agreement is total (both
    raters gave one answer throughout: κ is undefined)."""
    n = len(a)
    if n == 0:
        return None
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa, pb = sum(a) / n, sum(b) / n
    expected = pa * pb + (1 - pa) * (1 - pb)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1 - expected)


def agreement(rows: list[dict[str, Any]], judged: list[list[float] | None]) -> dict[str, Any]:
    """The measures for labelled ``rows`` and the judge's k scores per row (None: no verdict)."""
    pairs = [(r["label_score"], s) for r, s in zip(rows, judged, strict=True) if s is not None]
    labels = [lab >= 0.5 for lab, _ in pairs]
    verdicts = [sum(s) / len(s) >= 0.5 for _, s in pairs]
    k = max((len(s) for _, s in pairs), default=0)
    n = len(pairs)
    return {
        "n": len(rows),
        "judged": n,
        "errors": len(rows) - n,
        "samples": k,
        "accuracy": sum(x == y for x, y in zip(labels, verdicts, strict=True)) / n if n else None,
        "kappa": cohen_kappa(labels, verdicts),
        "mean_abs_error": sum(abs(lab - sum(s) / len(s)) for lab, s in pairs) / n if n else None,
        "self_agreement": (sum(len(set(s)) == 1 for _, s in pairs) / n if n and k > 1 else None),
    }


async def measure(judge: Judge, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Grade every labelled example with ``judge`` (its client bound) and measure agreement;
    ``details``: each example's label, scores or error, for the reader."""
    import asyncio

    async def one(row: dict[str, Any]) -> list[float] | str:
        context = judge.context(
            question=str(row["question"]),
            completion=str(row["completion"]),
            reference=str(row.get("reference") or ""),
            item_id=str(row["id"]),
            fields=row,
        )
        try:
            out = await judge.grade(context, usage={})
        except JudgeFailed as exc:
            return str(exc)
        return [float(s["score"]) for s in out["samples"]]

    results = await asyncio.gather(*(one(r) for r in rows))
    scores = [r if isinstance(r, list) else None for r in results]
    out = agreement(rows, scores)
    out["details"] = [
        {"id": row["id"], "label": row["label"], "scores": r}
        if isinstance(r, list)
        else {"id": row["id"], "label": row["label"], "error": r}
        for row, r in zip(rows, results, strict=True)
    ]
    return out

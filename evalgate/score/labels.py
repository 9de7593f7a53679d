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

Pairwise, an example has ``completion_a`` and ``completion_b`` and a label ``a``, ``b`` or
``tie``; the judge sees both orders, κ is over the three categories, and position-swap
consistency is the share of examples whose two orders gave the same preference.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, TypedDict

from evalgate.config.spec.judge import JudgeScale
from evalgate.errors import ConfigError
from evalgate.score.base import JudgeFailed
from evalgate.score.judge import Judge
from evalgate.score.verdict import Scale

if TYPE_CHECKING:
    from evalgate.config import Config
    from evalgate.config.spec import JudgeScorer

__all__ = [
    "Agreement",
    "Judged",
    "LabelledExample",
    "agreement",
    "cohen_kappa",
    "labels_path",
    "load_labels",
    "measure",
]


@dataclass(frozen=True)
class LabelledExample:
    """One line of a labelled set: the JSON object as written (its ``id`` defaulted to its line
    number; the judge's template sees it as ``item``) and its label as a score in [0, 1]."""

    row: dict[str, object]
    label_score: float

    def text(self, name: str) -> str:
        return str(self.row.get(name) or "")


class Judged(TypedDict):
    """The judge's judgement of one labelled example: its mean score, the k scores of each
    repeated question (one group, or one per order when pairwise) and, pairwise, whether the
    two orders agreed."""

    score: float
    groups: list[list[float]]
    consistent: NotRequired[bool]


class Agreement(TypedDict):
    """How far a judge agrees with a labelled set (`evalgate judge-check`, the scorecard)."""

    n: int
    judged: int
    errors: int
    samples: int
    accuracy: float | None
    kappa: float | None
    mean_abs_error: float | None
    self_agreement: float | None
    position_consistency: NotRequired[float | None]  # pairwise only
    details: NotRequired[list[dict[str, object]]]  # each example's label, scores or error
    calls: NotRequired[int]  # `judge-check`: the judge's calls, and the cache's share
    cache_hits: NotRequired[int]


def labels_path(config: Config, bench: object) -> Path | None:
    """The benchmark's labelled set, relative to the evals.yaml (in PR mode the exam's merge
    makes it absolute, in the base's tree)."""
    labels = getattr(getattr(bench, "scorer", None), "labels", None)
    if labels is None:
        return None
    return (Path(config.path).parent / labels).resolve()


_PAIR_LABELS = {"a": 0.0, "b": 1.0, "tie": 0.5}  # as the preference for B (the "PR" side)


def _label(value: object, scale: Scale, where: str) -> float:
    """A label as a score in [0, 1] on the judge's scale (pairwise: the preference for B)."""
    if scale == "pairwise":
        score = _PAIR_LABELS.get(str(value).strip().lower())
        if score is None:
            raise ConfigError(f"{where}: label {value!r} is not a, b or tie")
        return score
    if not isinstance(scale, JudgeScale):  # pass-fail
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


def load_labels(path: Path, spec: JudgeScorer) -> list[LabelledExample]:
    """The labelled examples of a judge (``spec``: its scorer config), each with its label as
    a score in [0, 1] (``label_score``). Pairwise examples have ``completion_a`` and
    ``completion_b`` and a label ``a``, ``b`` or ``tie``."""
    pairwise = spec.mode == "pairwise"
    scale: Scale = "pairwise" if pairwise else spec.scale
    needed = ("question", "completion_a", "completion_b", "label") if pairwise else (
        "question", "completion", "label")  # fmt: skip
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise ConfigError(f"{path}: cannot read the judge's labelled set ({why})") from exc
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
        missing = [k for k in needed if k not in row]
        if missing:
            raise ConfigError(f"{where}: missing {', '.join(missing)}")
        score = _label(row["label"], scale, where)
        row["label_score"] = score  # in the template's `item` too, as it always was
        row.setdefault("id", str(n))
        rows.append(LabelledExample(row, score))
    if not rows:
        raise ConfigError(f"{path}: the judge's labelled set is empty")
    return rows


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's κ of two raters' calls (pass/fail, or any categories); None when chance
    agreement is total (both raters gave one answer throughout: κ is undefined)."""
    n = len(a)
    if n == 0:
        return None
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    expected = sum((a.count(c) / n) * (b.count(c) / n) for c in set(a) | set(b))
    if expected >= 1.0:
        return None
    return (observed - expected) / (1 - expected)


def _category(score: float, pairwise: bool) -> bool | str:
    if not pairwise:
        return score >= 0.5
    return "b" if score > 0.5 else "a" if score < 0.5 else "tie"


def agreement(
    rows: Sequence[LabelledExample], judged: Sequence[Judged | None], *, pairwise: bool = False
) -> Agreement:
    """The measures for labelled ``rows`` and the judge's judgements (None: no verdict)."""
    pairs = [(r.label_score, j) for r, j in zip(rows, judged, strict=True) if j is not None]
    labels = [_category(lab, pairwise) for lab, _ in pairs]
    verdicts = [_category(j["score"], pairwise) for _, j in pairs]
    k = max((len(g) for _, j in pairs for g in j["groups"]), default=0)
    n = len(pairs)
    same = [all(len(set(g)) <= 1 for g in j["groups"]) for _, j in pairs]
    out: Agreement = {
        "n": len(rows),
        "judged": n,
        "errors": len(rows) - n,
        "samples": k,
        "accuracy": sum(x == y for x, y in zip(labels, verdicts, strict=True)) / n if n else None,
        "kappa": cohen_kappa(labels, verdicts),
        "mean_abs_error": sum(abs(lab - j["score"]) for lab, j in pairs) / n if n else None,
        "self_agreement": sum(same) / n if n and k > 1 else None,
    }
    if pairwise:
        asked = [j["consistent"] for _, j in pairs if "consistent" in j]
        out["position_consistency"] = sum(asked) / len(asked) if asked else None
    return out


async def measure(judge: Judge, rows: Sequence[LabelledExample]) -> Agreement:
    """Grade every labelled example with ``judge`` (its client bound) and measure agreement;
    ``details``: each example's label, scores or error, for the reader."""
    import asyncio

    pairwise = judge.spec.mode == "pairwise"

    async def one(example: LabelledExample) -> Judged | str:
        context = judge.context(
            question=str(example.row["question"]),
            completion=str(example.row["completion_b" if pairwise else "completion"]),
            reference=example.text("reference"),
            item_id=str(example.row["id"]),
            fields=example.row,
        )
        try:
            if pairwise:  # B plays the PR, A the baseline: the score is the preference for B
                out = await judge.grade_pair(context, str(example.row["completion_a"]), usage={})
            else:
                out = await judge.grade(context, usage={})
        except JudgeFailed as exc:
            return str(exc)
        groups: dict[str, list[float]] = {}
        for sample in out["samples"]:
            score = sample["score"]
            assert score is not None  # a judgement without one raised JudgeFailed
            groups.setdefault(sample.get("order", ""), []).append(float(score))
        got: Judged = {"score": out["score"], "groups": list(groups.values())}
        if "consistent" in out:
            got["consistent"] = out["consistent"]
        return got

    results = await asyncio.gather(*(one(r) for r in rows))
    out = agreement(rows, [r if isinstance(r, dict) else None for r in results], pairwise=pairwise)
    out["details"] = [
        {"id": ex.row["id"], "label": ex.row["label"], **r}
        if isinstance(r, dict)
        else {"id": ex.row["id"], "label": ex.row["label"], "error": r}
        for ex, r in zip(rows, results, strict=True)
    ]
    return out

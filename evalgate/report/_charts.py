"""report.html's inline SVG charts: scores with their CIs, Δ with its bounds against the margin
−δ, a run's trend. Static markup (every label escaped), so the summary paints before any script
runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from markupsafe import escape

__all__ = ["Delta", "Score", "svg_delta", "svg_scores", "svg_trend"]


if TYPE_CHECKING:  # at run time plain dicts: a TypedDict class costs ~20 µs a field to build

    class Score(TypedDict):
        model: str
        metric: str
        mean: float | None
        lo: float | None
        hi: float | None
        n: int

    class Delta(TypedDict):
        model: str
        metric: str
        delta: float | None
        lo: float | None
        hi: float | None
        lo_digits: int
        hi_digits: int
        status: str
        imputed: int
        imputed_as: float | None
else:
    Score = Delta = dict


def _line(x1: float, x2: float, y1: float, y2: float, cls: str) -> str:
    return f'<line x1="{x1:.1f}" x2="{x2:.1f}" y1="{y1:.1f}" y2="{y2:.1f}" class="{cls}"/>'


def svg_scores(rows: list[Score]) -> str:
    """Horizontal bars 0–100 % with the CI as a whisker, one per model × metric."""
    width, bar_h, left = 520, 22, 170
    scale = width - left - 60
    parts = []
    for i, r in enumerate(rows):
        y = i * bar_h + 4
        label = escape(f"{r['model']} · {r['metric']}")
        parts.append(f'<text x="0" y="{y + 14}" class="lbl">{label}</text>')
        if r["mean"] is None:
            continue
        w = max(0.0, min(1.0, r["mean"])) * scale
        parts.append(f'<rect x="{left}" y="{y + 3}" width="{w:.1f}" height="14" class="bar"/>')
        if r["lo"] is not None and r["hi"] is not None:
            x1, x2 = left + max(0.0, r["lo"]) * scale, left + min(1.0, r["hi"]) * scale
            parts.append(
                f'<line x1="{x1:.1f}" x2="{x2:.1f}" y1="{y + 10}" y2="{y + 10}" class="ci"/>'
            )
        parts.append(
            f'<text x="{left + scale + 6}" y="{y + 14}" class="val">{100 * r["mean"]:.1f}%</text>'
        )
    height = len(rows) * bar_h + 8
    body = "".join(parts)
    return f'<svg class="chart" width="{width}" height="{height}" role="img">{body}</svg>'


def svg_delta(comps: list[Delta], margin: float) -> str:
    """Δ with its bounds per model × metric, against 0 and the margin −δ (dashed)."""
    vals = [v for c in comps for v in (c["lo"], c["hi"], c["delta"]) if v is not None]
    lo = min([*vals, -2 * margin, -0.05])
    hi = max([*vals, margin, 0.05])
    width, row_h, left = 520, 24, 170
    scale = (width - left - 70) / (hi - lo)

    def x(v: float) -> float:
        return left + (v - lo) * scale

    height = len(comps) * row_h + 30
    parts = [
        f'<line x1="{x(0):.1f}" x2="{x(0):.1f}" y1="0" y2="{height - 16}" class="zero"/>',
        _line(x(-margin), x(-margin), 0, height - 16, "margin"),
        f'<text x="{x(-margin):.1f}" y="{height - 4}" class="axis" text-anchor="middle">'
        f"−δ ({-100 * margin:.1f} pp)</text>",
        f'<text x="{x(0) + 3:.1f}" y="9" class="axis">0</text>',
    ]
    for i, c in enumerate(comps):
        y = i * row_h + 20  # below the "0" label
        label = escape(f"{c['model']} · {c['metric']}")
        parts.append(f'<text x="0" y="{y + 4}" class="lbl">{label}</text>')
        if c["delta"] is None:
            continue
        cls = c["status"].lower()
        if c["lo"] is not None and c["hi"] is not None:
            parts.append(_line(x(c["lo"]), x(c["hi"]), y, y, f"iv {cls}"))
        parts.append(f'<circle cx="{x(c["delta"]):.1f}" cy="{y}" r="4" class="pt {cls}"/>')
        parts.append(
            f'<text x="{width - 64}" y="{y + 4}" class="val">{100 * c["delta"]:+.1f} pp</text>'
        )
    body = "".join(parts)
    return f'<svg class="chart" width="{width}" height="{height}" role="img">{body}</svg>'


def svg_trend(points: list[tuple[str, float]]) -> str:
    width, height, pad = 260, 60, 6
    n = len(points)
    coords = [
        (pad + i * (width - 2 * pad) / max(1, n - 1), height - pad - v * (height - 2 * pad))
        for i, (_, v) in enumerate(points)
    ]
    line = " ".join(f"{a:.1f},{b:.1f}" for a, b in coords)
    dots = "".join(
        f'<circle cx="{a:.1f}" cy="{b:.1f}" r="2.5">'
        f"<title>{escape(lbl)}: {100 * v:.1f}%</title></circle>"
        for (a, b), (lbl, v) in zip(coords, points, strict=True)
    )
    svg = f'<svg class="trend" width="{width}" height="{height}">'
    return f'{svg}<polyline points="{line}"/>{dots}</svg>'

"""A small mermaid chart of the default branch's recent scores (GitHub renders mermaid)."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["trend_section"]


def trend_chart(name: str, points: list[tuple[str, float]]) -> str:
    labels = ", ".join(f'"{sha}"' for sha, _ in points)
    values = ", ".join(f"{v:.3f}" for _, v in points)
    return (
        "```mermaid\nxychart-beta\n"
        f'    title "{name}"\n'
        f"    x-axis [{labels}]\n"
        '    y-axis "score" 0 --> 1\n'
        f"    line [{values}]\n```\n"
    )


def trend_section(
    trend: Mapping[tuple[str, str, str], list[tuple[str, float]]], limit: int = 10
) -> str:
    """Markdown with one chart per run that has at least two stored scores: the latest
    ``limit`` of the points :func:`evalgate.report.trend.trend_points` read from the result store
    for report.html's trend (one read of the store, one score, for both)."""
    charts = [
        trend_chart(f"{benchmark}--{model}", points[-limit:])
        for (model, benchmark, _), points in trend.items()
        if len(points[-limit:]) >= 2
    ]
    if not charts:
        return ""
    body = "\n".join(charts)
    return f"\n<details><summary>Trend on the default branch</summary>\n\n{body}\n</details>\n"

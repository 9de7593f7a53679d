"""A small mermaid chart of the default branch's recent scores (GitHub renders mermaid)."""

from __future__ import annotations

from typing import Any

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


def trend_section(store: Any, names: list[str], limit: int = 10) -> str:
    """Markdown with one chart per stored run name that has at least two stored runs."""
    from evalgate.report.html import stored_scores

    charts = []
    for name in dict.fromkeys(names):
        points = stored_scores(store, name, limit)  # oldest first
        if len(points) >= 2:
            charts.append(trend_chart(name, points))
    if not charts:
        return ""
    body = "\n".join(charts)
    return f"\n<details><summary>Trend on the default branch</summary>\n\n{body}\n</details>\n"

"""The scorecard's trend chart (the Action's mermaid chart) and report.html's trend plot show the
same stored default-branch scores: the store is read once, for both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalgate.action.trend import trend_section
from evalgate.report.trend import trend_points
from evalgate.store.base import RunKey
from evalgate.store.local_dir import LocalDirStore
from tests.report_runs import make_runs, verdict_of


def test_the_chart_plots_what_the_html_trend_plots(tmp_path: Path, scripted_server: Any) -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "head").mkdir()
    runs = make_runs(tmp_path, scripted_server)
    store = LocalDirStore(tmp_path / "store")
    (base_arith,) = runs.base.glob("evals/arith--*/*")
    commits = ("a" * 40, "b" * 40, "c" * 40)  # three default-branch runs of arith
    for commit in commits:
        store.save(RunKey(commit=commit, name="arith--scripted"), base_arith)
    trend = trend_points(store, verdict_of(runs.head, runs.base))
    (points,) = [p for p in trend.values() if p]
    assert [sha for sha, _ in points] == [c[:7] for c in commits]

    markdown = trend_section(trend)
    assert markdown.count("xychart-beta") == 1  # capitals has no stored run: no chart
    assert 'title "arith--scripted"' in markdown
    assert 'x-axis ["aaaaaaa", "bbbbbbb", "ccccccc"]' in markdown
    assert f"line [{', '.join(f'{v:.3f}' for _, v in points)}]" in markdown
    assert trend_section({key: points[:1] for key in trend}) == ""  # one point is no trend

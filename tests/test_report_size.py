"""report.html stays a page a browser opens, whatever the run's size: every item that changed or
errored is listed in full, unchanged items up to a cap, and the page says how many it left out
and where they are (no browser needed: the assertions read the page's data block)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from evalgate.report import html as report_html
from evalgate.run.fingerprint import item_hash
from evalgate.run.rundir import RunDir

N_ITEMS = report_html.MAX_UNCHANGED_ROWS + 600  # more items than the cap


def _outcome(i: int, head: bool) -> tuple[float | None, str | None]:
    """Base: right on 70 % of items. The PR loses every 97th item, wins every 89th that the
    base got wrong, and errors on every 211th; the rest is unchanged."""
    right = i % 10 < 7
    if head and i % 211 == 5:
        return None, "http_500: upstream exploded"
    if head and i % 97 == 0 and right:
        return 0.0, None
    if head and i % 89 == 1 and not right:
        return 1.0, None
    return float(right), None


def _write_run(root: Path, *, head: bool) -> Path:
    run = RunDir.create(root, "mem", "org/m", "20260101-000000-000abc")
    run.write_config(
        {
            "model": {"name": "m"},
            "benchmark": {"name": "mem", "eval": {"rollouts": 1, "max_error_rate": 0.5}},
            "model_id": "org/m",
            "config_path": "evals.yaml",
            "gate": {"margin": 0.05},
            "fingerprint": {
                "measurement": {"dataset": "d", "scorer": {"type": "exact"}},
                "subject": {"model": "m"},
            },
        }
    )
    with run.open_journal() as fh:
        for i in range(N_ITEMS):
            prompt, answer = f"What is {i} + 1?", str(i + 1)
            reward, error = _outcome(i, head)
            rec = {
                "example_id": f"item-{i:05d}",
                "item_hash": item_hash(prompt, answer, ""),
                "rollout": 0,
                "group": None,
                "prompt": [{"role": "user", "content": prompt}],
                "completion": None if error else f"{'PR' if head else 'base'} says {i}",
                "answer": answer,
                "reward": reward,
                "metrics": {} if error else {"accuracy": reward},
                "usage": {"prompt_tokens": 10, "completion_tokens": 5},
                "timing": {"start": 1.0, "total_ms": 1.0},
                "error": error,
            }
            fh.write(json.dumps(rec) + "\n")
    run.write_metadata({"complete": True, "rollouts_per_example": 1, "time_ms": 1.0})
    return run.path


def _page_data(page: str) -> list[dict[str, Any]]:
    block = re.search(r'id="evalgate-data">(.*?)</script>', page, re.S)
    assert block is not None
    return json.loads(block.group(1))


def test_a_run_larger_than_the_cap_lists_every_changed_item_and_counts_the_rest(
    tmp_path: Path,
) -> None:
    _write_run(tmp_path / "base", head=False)
    head_dir = _write_run(tmp_path / "head", head=True)
    out = tmp_path / "out"
    code = main(
        ["compare", str(tmp_path / "base"), str(tmp_path / "head"), "--output", str(out)],
        out=io.StringIO(),
    )
    assert code in (0, 1)
    page = (out / "report.html").read_text(encoding="utf-8")
    (run,) = _page_data(page)
    rows = {r["id"]: r for r in run["rows"]}

    expected = {"regressed": set(), "improved": set(), "errored": set(), "same": set()}
    for i in range(N_ITEMS):
        base, _ = _outcome(i, False)
        head, error = _outcome(i, True)
        status = "errored" if error else "same" if head == base else "regressed"
        status = "improved" if status == "regressed" and head > base else status  # type: ignore[operator]
        expected[status].add(f"item-{i:05d}")
    assert all(expected[k] for k in ("regressed", "improved", "errored"))

    for status in ("regressed", "improved", "errored"):  # every one of them, in full
        shown = {i for i, r in rows.items() if r["status"] == status}
        assert shown == expected[status], status
        assert run["counts"][status] == len(expected[status])
    first = rows[min(expected["regressed"])]
    assert first["pr"].startswith("PR says") and first["base"].startswith("base says")
    assert first["prompt"].startswith("What is ") and first["reward_base"] == 1.0
    errored = rows[min(expected["errored"])]
    assert errored["error"] == "http_500" and "upstream exploded" in errored["error_text"]

    same = [i for i, r in rows.items() if r["status"] == "same"]
    cap = report_html.MAX_UNCHANGED_ROWS
    assert same == sorted(expected["same"])[:cap]  # the first ones, in the run's order
    left_out = len(expected["same"]) - cap
    assert left_out > 0 and run["counts"]["all"] == len(rows) == N_ITEMS - left_out
    text = re.sub(r"<[^>]+>", "", page)
    assert f"{left_out:,} more unchanged items" in text
    assert str(head_dir / "results.jsonl") in text


def test_a_run_under_the_cap_lists_every_item_and_says_nothing_left_out(tmp_path: Path) -> None:
    assert report_html.MAX_UNCHANGED_ROWS >= 1000  # a page to scroll, not a truncation by default
    for side in ("base", "head"):
        _write_run(tmp_path / side, head=side == "head")
    page = report_html.render_html(_verdict(tmp_path), unchanged_rows=N_ITEMS)
    (run,) = _page_data(page)
    assert len(run["rows"]) == run["counts"]["all"] == N_ITEMS
    assert run["left_out"] == [] and "not listed here" not in page


def test_a_run_that_breaks_more_items_than_the_ceiling_says_how_many_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page of a run that errs on all its 250,000 items stays bounded too."""
    for side in ("base", "head"):
        _write_run(tmp_path / side, head=side == "head")
    monkeypatch.setattr(report_html, "MAX_CHANGED_ROWS", 3)
    page = report_html.render_html(_verdict(tmp_path), unchanged_rows=5)
    (run,) = _page_data(page)
    errored = [i for i in range(N_ITEMS) if _outcome(i, True)[1]]
    listed = [r["id"] for r in run["rows"] if r["status"] == "errored"]
    assert listed == [f"item-{i:05d}" for i in errored[:3]] and run["counts"]["errored"] == 3
    text = re.sub(r"<[^>]+>", "", page)
    assert f"{len(errored) - 3:,} more errored items are not listed here (the first 3 are)" in text
    assert "more unchanged items are not listed here (the first 5 are)" in text


def test_the_page_reads_each_journal_once_and_writes_the_same_bytes_past_the_text_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs no comparison holds: each journal is read once, for the outcomes and the shown
    texts together; a run whose texts pass the budget reads them back, and rows encoded in
    batches or one by one, to the same page."""
    runs = {side: _write_run(tmp_path / side, head=side == "head") for side in ("base", "head")}
    verdict = _verdict(tmp_path)
    monkeypatch.setattr(report_html, "loaded_run", lambda path: None)  # the journals' path
    reads: list[Path] = []
    real = report_html.iter_records

    def counting(path: Path) -> Any:
        reads.append(Path(path))
        return real(path)

    monkeypatch.setattr(report_html, "iter_records", counting)
    page = report_html.render_html(verdict)
    assert sorted(reads) == sorted(p / "results.jsonl" for p in runs.values())
    (run,) = _page_data(page)
    assert run["rows"][0]["prompt"].startswith("What is ") and run["rows"][0]["base"]
    monkeypatch.setattr(report_html, "_KEEP_CHARS", 0)  # every text past the budget
    assert report_html.render_html(verdict) == page
    monkeypatch.setattr(report_html, "_KEEP_CHARS", 10**9)
    monkeypatch.setattr(report_html, "_KEEP_ITEMS", 100)  # more items than kept
    assert report_html.render_html(verdict) == page
    monkeypatch.setattr(report_html, "_ROWS_PER_CHUNK", 1)  # rows encoded one at a time
    assert report_html.render_html(verdict) == page


def _verdict(tmp_path: Path) -> Any:
    from tests.report_runs import verdict_of

    return verdict_of(tmp_path / "head", tmp_path / "base")

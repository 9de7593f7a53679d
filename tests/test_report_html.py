"""report.html in a real browser: Debian's headless chromium (through Playwright) loads the
report of a real run from disk, with every network request refused, and the test asserts on the
rendered DOM and saves a screenshot next to the test's output."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from evalgate.compare.paired import load_run
from evalgate.report.html import render_html
from evalgate.report.trend import trend_points
from evalgate.store.base import RunKey
from evalgate.store.local_dir import LocalDirStore
from tests.conftest import read_jsonl
from tests.report_runs import CAPITALS, make_big_runs, make_runs, verdict_of

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (dev extra)")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium")


@pytest.fixture
def browser():
    """Call it once the run is made: Playwright's sync API holds an event loop on this thread
    while it is open (and the CLI's run needs ``asyncio.run``)."""
    opened: list[Any] = []

    def launch() -> Any:
        pw = sync_api.sync_playwright().start()
        opened.append(pw)
        return pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])

    yield launch
    for pw in opened:
        pw.stop()


def _open(browser: Any, path: Path) -> tuple[Any, list[str]]:
    """The page, loaded from disk with anything but file:// refused (and recorded)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    remote: list[str] = []

    def guard(route: Any) -> None:
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            remote.append(route.request.url)
            route.abort()

    page.route("**/*", guard)
    page.goto(path.as_uri())
    return page, remote


def _screenshot(page: Any, tmp_path: Path, name: str, record_property: Any) -> Path:
    shot = tmp_path / name
    page.screenshot(path=str(shot), full_page=False)
    keep = os.environ.get("EVALGATE_TEST_ARTIFACTS")  # CI uploads this folder
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / name)
    record_property("screenshot", str(shot))  # lands in pytest's --junitxml output
    print(f"screenshot: {shot}")
    return shot


def test_report_of_a_real_run_in_chromium(
    tmp_path: Path, scripted_server: Any, browser: Any, record_property: Any
) -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "head").mkdir()
    runs = make_runs(tmp_path, scripted_server)
    report = runs.head / "report.html"
    page, remote = _open(browser(), report)

    assert "evalgate: ERROR" in page.inner_text("h1")
    # Per benchmark: scores with CIs, and Δ drawn against the dashed −δ line.
    assert page.locator("section.bench").count() == 2
    arith = page.locator("#bench-arith")
    assert arith.locator("table.scores").first.inner_text().count("%") >= 1
    assert arith.locator("svg line.margin").count() == 1
    assert "FAIL" in arith.locator("tr.delta-row").inner_text()
    assert "no stored default-branch scores" in arith.inner_text()

    # Per item: the regressed filter is on first; base and PR side by side, diff highlighted.
    run = page.locator("section.run", has_text="scripted / arith")
    rows = run.locator("tbody tr")
    assert run.locator("button.on").inner_text().startswith("regressed (")
    n_regressed = int(run.locator("button.on").inner_text().split("(")[1].rstrip(")"))
    assert n_regressed > 0 and rows.count() == n_regressed
    first = rows.first
    assert "regressed" in first.get_attribute("class")
    assert first.locator(".base del").count() == 1 and first.locator(".pr ins").count() == 1
    assert first.locator("td").nth(2).inner_text() == "1.00 → 0.00"
    run.locator("button[data-filter=all]").click()
    assert rows.count() == 40
    run.locator("button[data-filter=improved]").click()
    assert rows.count() == 1 and "no improved items" in rows.first.inner_text()

    broken = page.locator("section.run", has_text="broken / capitals")
    n_capitals = len(CAPITALS.read_text().splitlines())  # every item of the broken model errored
    assert broken.locator("button.on").inner_text() == f"errored ({n_capitals})"
    assert broken.locator("tbody tr").first.locator("td").nth(3).inner_text() == "http_500"

    shot = _screenshot(page, tmp_path, "report.png", record_property)
    assert shot.stat().st_size > 10_000
    assert remote == []  # self-contained: nothing fetched from anywhere


def test_large_report_renders_rows_in_batches(
    tmp_path: Path, scripted_server: Any, browser: Any, record_property: Any
) -> None:
    head = make_big_runs(tmp_path, scripted_server, 2000)
    page, remote = _open(browser(), head / "report.html")
    run = page.locator("section.run").first
    run.locator("button[data-filter=all]").click()
    rows = run.locator("tbody tr")
    assert rows.count() == 50  # the first batch only: 2,000 rows are not built up front
    page.locator("section.run .sentinel").first.scroll_into_view_if_needed()
    page.wait_for_function("document.querySelectorAll('section.run tbody tr').length > 50")
    assert rows.count() in (100, 150)
    run.locator("button[data-filter=regressed]").click()
    n_regressed = int(run.locator("button.on").inner_text().split("(")[1].rstrip(")"))
    assert n_regressed > 50 and rows.count() == 50  # every 10th item regressed; one batch shown
    assert run.locator("tbody tr.regressed").count() == 50
    _screenshot(page, tmp_path, "report-2000.png", record_property)
    assert remote == []


def _agent_run(run_dir: Path) -> None:
    """Turn a saved run into an agent benchmark's: completions as the agent runner reports them
    (verdict, agent facts, the agent's last message, the check's output)."""
    cfg = json.loads((run_dir / "run_config.json").read_text())
    cfg["benchmark"]["kind"] = "agent"
    (run_dir / "run_config.json").write_text(json.dumps(cfg))
    recs = read_jsonl(run_dir / "results.jsonl")
    for rec in recs:
        rec["completion"] = (
            f"[fail] check exited 1\nagent: 3.2 s, turns=4, tool_calls=6\n"
            f"--- agent's last message ---\nI edited {rec['example_id']}.py\n"
            "--- check output (tail) ---\nAssertionError: expected 42"
        )
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_trend_and_agent_transcripts(
    tmp_path: Path, scripted_server: Any, browser: Any, record_property: Any
) -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "head").mkdir()
    runs = make_runs(tmp_path, scripted_server)
    store = LocalDirStore(tmp_path / "store")
    (base_arith,) = runs.base.glob("evals/arith--*/*")
    for commit in ("a" * 40, "b" * 40, "c" * 40):  # three default-branch runs of arith
        store.save(RunKey(commit=commit, name="arith--scripted"), base_arith)
    (head_caps,) = runs.head.glob("evals/capitals--org--scripted/*")
    _agent_run(head_caps)
    verdict = verdict_of(runs.head, runs.base)
    page_path = tmp_path / "report-trend.html"
    page_path.write_text(render_html(verdict, trend=trend_points(store, verdict)))
    assert load_run(head_caps).config.benchmark.kind == "agent"

    page, remote = _open(browser(), page_path)
    trend = page.locator("#bench-arith .trend-row")
    assert trend.count() == 1 and "scripted · score" in trend.inner_text()
    assert trend.locator("circle").count() == 3
    assert "no stored default-branch scores" in page.locator("#bench-capitals").inner_text()
    agent = page.locator("section.run", has_text="scripted / capitals")
    assert "agent: transcript and check output" in agent.locator("h3").inner_text()
    agent.locator("button[data-filter=all]").click()
    first = agent.locator("tbody tr").first.locator(".pr")
    assert first.locator(".sec").all_inner_texts() == [
        "agent's last message",
        "check output (tail)",
    ]
    assert "AssertionError: expected 42" in first.inner_text()
    _screenshot(page, tmp_path, "report-agent.png", record_property)
    assert remote == []


def test_scorecard_links_the_report_when_its_url_is_known(
    tmp_path: Path, scripted_server: Any
) -> None:
    from evalgate.cli import main
    from evalgate.report.html import report_url
    from tests.conftest import answer_arith, write_config

    server = scripted_server(answer_arith)
    cfg = write_config(
        tmp_path,
        f"""
models:
  - {{name: s, backend: openai, base_url: "{server.base_url}", model: org/m}}
benchmarks:
  - name: arith
    eval: {{num_examples: 3}}
""",
    )
    actions = {
        "GITHUB_SERVER_URL": "https://github.example",
        "GITHUB_REPOSITORY": "acme/app",
        "GITHUB_RUN_ID": "77",
    }
    url = "https://github.example/acme/app/actions/runs/77#artifacts"
    assert report_url(actions) == url
    assert report_url({**actions, "EVALGATE_REPORT_URL": "https://x.example/r.html"}) == (
        "https://x.example/r.html"
    )
    # Linked only where the job uploads the outputs (evalgate.report.link): a job
    # whose `run:` step calls `evalgate local`, then uploads the folder whatever the verdict.
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "ci.yml").write_text(
        "jobs:\n  evals:\n    steps:\n      - run: evalgate local evals.yaml --output out\n"
        "      - uses: actions/upload-artifact@v4\n        if: ${{ !cancelled() }}\n"
        "        with: {name: evals, path: out}\n"
    )
    actions |= {
        "GITHUB_WORKFLOW_REF": "acme/app/.github/workflows/ci.yml@refs/heads/main",
        "GITHUB_JOB": "evals",
        "GITHUB_WORKSPACE": str(tmp_path),
    }
    out = tmp_path / "out"
    assert main(["local", str(cfg), "--output", str(out), "--no-cache"], environ=actions) == 0
    assert (
        f"]({url}): report.html in this run's `evals` artifact"
        in (out / "scorecard.md").read_text()
    )
    assert main(["local", str(cfg), "--output", str(tmp_path / "o3")], environ=actions) == 0
    assert "report.html" not in (tmp_path / "o3" / "scorecard.md").read_text()  # not uploaded
    assert (out / "report.html").is_file() and (out / "junit.xml").is_file()
    assert main(["local", str(cfg), "--output", str(tmp_path / "o2")], environ={}) == 0
    assert "report.html" not in (tmp_path / "o2" / "scorecard.md").read_text()  # no URL, no link

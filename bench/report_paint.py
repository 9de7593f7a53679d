"""How fast report.html opens: first paint of a 2,000-item run in headless chromium.

Usage: ``python bench/report_paint.py [--items 2000] [--repeat 5]``

Makes a real baseline and PR run of ``--items`` items through the CLI (against a scripted
OpenAI-compatible server on loopback), then loads the PR's report.html from disk in Debian's
chromium (through Playwright) ``--repeat`` times, each in a fresh page, and prints the median of:

- first contentful paint (``performance.getEntriesByType("paint")``),
- rows ready: the page's ``evalgate-rows`` performance mark (its script has built the first
  batch of table rows),
- rows in the DOM right after load.

Both pages open on the "all" filter (every item listed), the worst case. Reference, measured in
the same run: the *same file* with the batch size set so every row is built up front (what a
report without lazy rendering does); the ratios are printed. Also the file
size and the time to render the HTML in Python. Figures only; no assertion, no threshold.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python bench/report_paint.py` from a checkout
    sys.path.insert(0, str(ROOT))

from evalgate.compare.paired import load_run  # noqa: E402
from tests.conftest import scripted_servers  # noqa: E402
from tests.report_runs import make_big_runs  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
_MEASURE = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const fcp = performance.getEntriesByType("paint").find(e => e.name === "first-contentful-paint");
  const mark = performance.getEntriesByName("evalgate-rows")[0];
  return {fcp: fcp ? fcp.startTime : null,
          dcl: mark ? mark.startTime : nav.domContentLoadedEventEnd,
          rows: document.querySelectorAll("section.run tbody tr").length};
}"""


def _measure(browser: object, path: Path, repeat: int) -> dict[str, float]:
    runs = []
    for _ in range(repeat):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})  # type: ignore[attr-defined]
        page.goto(path.as_uri(), wait_until="load")
        page.wait_for_function(
            "performance.getEntriesByType('paint').some(e => e.name === 'first-contentful-paint')"
        )
        runs.append(page.evaluate(_MEASURE))
        page.close()
    return {k: statistics.median(r[k] for r in runs) for k in ("fcp", "dcl", "rows")}


def _render_time(head: Path) -> float:
    """Seconds to build report.html in Python from the saved runs (what `local` spends)."""
    from evalgate.compare.paired import compare_with_baselines, summary_of
    from evalgate.config.spec import GateSettings
    from evalgate.gate import decide
    from evalgate.report.html import render_html

    (head_dir,) = head.glob("evals/*/*")
    (base_dir,) = head.parent.parent.glob("b/out/evals/*/*")
    h, b = load_run(head_dir), load_run(base_dir)
    gate = GateSettings()
    comps = compare_with_baselines([h], {(b.model, b.benchmark): b}, gate)
    verdict = decide([summary_of(h)], gate, error_budgets={}, comparisons=comps)
    t0 = time.perf_counter()
    render_html(verdict)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="evalgate-paint-"))
    try:
        with (
            contextlib.contextmanager(scripted_servers)() as start,
            contextlib.redirect_stdout(sys.stderr),  # the runs' scorecards
        ):
            head = make_big_runs(tmp, start, args.items)
        text = (head / "report.html").read_text(encoding="utf-8")
        first = 'run.counts.regressed ? "regressed" : run.counts.errored ? "errored" : "all"'
        assert first in text, "report.html's script changed: update the bench"
        text = text.replace(first, '"all"')
        lazy, eager = tmp / "report-lazy.html", tmp / "report-eager.html"
        lazy.write_text(text, encoding="utf-8")
        eager.write_text(text.replace("var BATCH = 50;", "var BATCH = 1e9;"), encoding="utf-8")
        render_s = _render_time(head)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            ref = _measure(browser, eager, args.repeat)
            got = _measure(browser, lazy, args.repeat)
            browser.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    size = len(text.encode("utf-8"))
    print(f"report.html, {args.items:,} items: {size / 1e6:.2f} MB, built in {render_s:.2f} s")
    print(f"{'':<28}{'first paint':>14}{'rows ready':>13}{'rows built':>12}")
    for name, m in (("lazy (report.html)", got), ("eager reference", ref)):
        print(f"{name:<28}{m['fcp']:>11.0f} ms{m['dcl']:>10.0f} ms{m['rows']:>12.0f}")
    print(
        f"ratio lazy / eager: first paint {got['fcp'] / ref['fcp']:.2f}, "
        f"rows ready {got['dcl'] / ref['dcl']:.2f}  (median of {args.repeat}; target < 2,000 ms)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The scorecard's Runs table says how hard a run was on its endpoint: requests sent, retries by
kind, throttling (how far AIMD cut the concurrency) and cache hits; costs with the precision a
small number needs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalgate.cli import main
from evalgate.report import _requests
from evalgate.run.costs import format_usd
from tests.conftest import answer_arith, write_config


def test_costs_print_with_sensible_precision() -> None:
    assert format_usd(0.000048) == "$0.000048"
    assert format_usd(0.0123) == "$0.012"
    assert format_usd(0.5) == "$0.50"
    assert format_usd(1234.5) == "$1,234.50"
    assert format_usd(0.0) == "$0"
    assert format_usd(None) == "–"


def test_requests_cell_lists_retries_throttling_and_cache() -> None:
    cell = _requests(
        {
            "requests": 1204,
            "retries": 226,
            "retried_errors": {"http_429": 220, "timeout": 6},
            "throttle_decreases": 3,
            "min_concurrency": 1,
            "cache_hits": 40,
        }
    )
    assert cell == (
        "1,204 sent · 226 retried (http_429: 220, timeout: 6) · throttled 3×, down to 1 in "
        "flight · 40 cached"
    )
    assert _requests({"requests": 4, "retries": 0}) == "4 sent"


def test_runs_table_shows_a_throttled_run(tmp_path: Path, scripted_server: Any) -> None:
    """Every other request is answered 429 at first: the table shows the retries and the cut."""

    def script(body: dict[str, Any], n: int) -> Any:
        if n < 4:
            return (429, "slow down", {"Retry-After": "0"})
        return answer_arith(body, n)

    server = scripted_server(script)
    config = write_config(
        tmp_path,
        f"""
models: [{{name: m, backend: openai, base_url: "{server.base_url}", model: org/m}}]
benchmarks:
  - name: arith
    eval: {{num_examples: 6, max_concurrent: 4}}
""",
    )
    out = tmp_path / "out"
    code = main(["local", str(config), "--output", str(out), "--no-cache"], environ={"CI": "1"})
    assert code == 0
    (meta_path,) = (out / "evals").glob("arith--*/*/metadata.json")
    stats = json.loads(meta_path.read_text())["requests"]
    assert stats["retried_errors"] == {"http_429": 4} and stats["min_concurrency"] < 4
    scorecard = (out / "scorecard.md").read_text()
    row = next(line for line in scorecard.splitlines() if line.startswith("| m (`org/m`)"))
    assert f"{stats['requests']} sent · 4 retried (http_429: 4) · throttled" in row
    assert f"down to {stats['min_concurrency']} in flight" in row

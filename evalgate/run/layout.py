"""The run directory's layout, spelled once: its folders' and files' names, and the run id.

``{root}/evals/{benchmark}--{org}--{model}/{run_id}/`` holds ``run_config.json``,
``results.jsonl`` and ``metadata.json`` (and ``logs/``); per invocation, ``{root}`` gets the
report files. Everything else imports these names (a guard test reads the syntax tree of every
module for a spelling of them): :mod:`evalgate.run.runfiles` owns the two JSON files' formats,
:mod:`evalgate.run.records` the journal's, :mod:`evalgate.run.rundir` finding and loading runs.
"""

from __future__ import annotations

import re
import secrets
import time

__all__ = [
    "EVALS",
    "JUNIT",
    "METADATA",
    "REPORT_HTML",
    "RESULTS",
    "RUN_CONFIG",
    "RUN_FILES",
    "SCORECARD",
    "VERDICT",
    "new_run_id",
    "run_folder",
]

EVALS = "evals"  # {root}/evals/{benchmark}--{org}--{model}/{run_id}/
RUN_CONFIG = "run_config.json"  # what ran: model, benchmark, gate, fingerprint (at the start)
RESULTS = "results.jsonl"  # one RolloutRecord per line, appended as rollouts finish
METADATA = "metadata.json"  # the summary, written when the run finishes
RUN_FILES = (RUN_CONFIG, RESULTS, METADATA)  # what a store or a push copies
# Per invocation, at the output root: the report files of the last run written there.
SCORECARD = "scorecard.md"
VERDICT = "verdict.json"
JUNIT = "junit.xml"
REPORT_HTML = "report.html"


def new_run_id() -> str:
    """``YYYYmmdd-HHMMSS-mmmrrr``: UTC time to the millisecond, then 3 random hex digits.

    Ids sort by creation time ("newest wins" for baselines, newest first in listings), also for
    two runs started within one second; the random tail keeps parallel jobs apart."""
    now = time.time()
    millis = int(now * 1000) % 1000
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"{stamp}-{millis:03d}{secrets.token_hex(2)[:3]}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"


def run_folder(benchmark: str, model_id: str) -> str:
    """``{benchmark}--{org}--{model}``: the folder under ``evals/`` of a model's runs of a
    benchmark (``local`` for a model id without an organisation)."""
    org, _, name = model_id.rpartition("/")
    return f"{_slug(benchmark)}--{_slug(org or 'local')}--{_slug(name)}"

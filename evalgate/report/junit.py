"""The verdict as JUnit XML, for test-report tools (dorny/test-reporter, GitLab test reports).

One ``<testsuite>`` per model × benchmark and one ``<testcase>`` per gate check (a threshold, a
baseline comparison, the error budget): FAIL is a ``<failure>`` with the reason, INCONCLUSIVE a
``<skipped>`` with the minimum detectable effect, ERROR an ``<error>``. Score-only metrics (no
threshold, no baseline) decide nothing and are not test cases. The shape follows the schema the
common reporters read (Jenkins' junit-10.xsd): counts on every suite and on the root.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from evalgate.gate import Check, Verdict

if TYPE_CHECKING:
    from evalgate.run.summary import RunSummary

__all__ = ["render_junit"]

_KINDS = ("threshold", "baseline", "errors")


def _pp(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "unknown"
    if math.isinf(value):  # as on the scorecard: no regression is detectable at this n
        return "∞ (too few items)"
    return f"{100 * value:.1f} pp"


def _case_name(check: Check) -> str:
    if check.kind == "threshold":
        shown = "?" if check.threshold is None else f"{100 * check.threshold:.1f}%"
        return f"{check.metric} ≥ {shown} (threshold)"
    if check.kind == "baseline":
        return f"{check.metric} not worse than the baseline (baseline)"
    return "rollouts ran within the error budget (errors)"


def _skipped_message(check: Check) -> str:
    mde = check.comparison.mde if check.comparison is not None else None
    text = f"INCONCLUSIVE: {check.reason}" if check.reason else "INCONCLUSIVE"
    if check.kind == "baseline":
        # Whose power: the regression test's (U < 0), not P(FAIL), which PASS can pre-empt.
        text += f"; MDE {_pp(mde)} (the drop that makes U < 0 with 80 % power)"
    return text


def _case(suite: ET.Element, check: Check, classname: str) -> str:
    case = ET.SubElement(suite, "testcase", name=_case_name(check), classname=classname, time="0")
    if check.status == "FAIL":
        ET.SubElement(
            case, "failure", message=check.reason, type="evalgate.FAIL"
        ).text = check.reason
        return "failures"
    if check.status == "ERROR":
        ET.SubElement(
            case, "error", message=check.reason, type="evalgate.ERROR"
        ).text = check.reason
        return "errors"
    if check.status == "INCONCLUSIVE":
        ET.SubElement(case, "skipped", message=_skipped_message(check))
        return "skipped"
    if check.reason:
        ET.SubElement(case, "system-out").text = check.reason
    return "passed"


def _suites(verdict: Verdict) -> dict[tuple[str, str], list[Check]]:
    keys = [(r.model, r.benchmark) for r in verdict.runs]
    keys += [(c.model, c.benchmark) for c in verdict.comparisons]
    out: dict[tuple[str, str], list[Check]] = {k: [] for k in dict.fromkeys(keys)}
    for check in verdict.checks:
        if check.kind in _KINDS:
            out.setdefault((check.model, check.benchmark), []).append(check)
    return out


def render_junit(verdict: Verdict) -> str:
    """The JUnit XML document (UTF-8 text with its declaration)."""
    runs: dict[tuple[str, str], RunSummary] = {(r.model, r.benchmark): r for r in verdict.runs}
    root = ET.Element("testsuites", name=f"evalgate: {verdict.status}")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    for (model, benchmark), checks in _suites(verdict).items():
        run = runs.get((model, benchmark))
        seconds = float(run.time_s) if run is not None else 0.0
        suite = ET.SubElement(root, "testsuite", name=f"{model} / {benchmark}")
        counts = {"tests": len(checks), "failures": 0, "errors": 0, "skipped": 0}
        if run is not None:
            props = ET.SubElement(suite, "properties")
            for key, prop in (("model_id", run.model_id), ("run_dir", run.run_dir)):
                ET.SubElement(props, "property", name=key, value=str(prop))
        for check in checks:
            outcome = _case(suite, check, f"evalgate.{model}.{benchmark}")
            if outcome in counts:
                counts[outcome] += 1
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", f"{seconds:.3f}")
        total_time += seconds
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", f"{total_time:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"

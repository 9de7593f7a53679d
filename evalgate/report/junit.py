"""The verdict as JUnit XML, for test-report tools (dorny/test-reporter, GitLab test reports).

One ``<testsuite>`` per model × benchmark and one ``<testcase>`` per gate check (a threshold, a
baseline comparison, the error budget): FAIL is a ``<failure>`` with the reason, INCONCLUSIVE a
``<skipped>`` with the minimum detectable effect, ERROR an ``<error>``. Score-only metrics (no
threshold, no baseline) decide nothing and are not test cases. The shape follows the schema the
common reporters read (Jenkins' junit-10.xsd): counts on every suite and on the root.

Written as text by :class:`_Element`, byte for byte what ElementTree's ``indent`` and
``tostring`` wrote (tests/test_junit.py holds the two equal): importing ElementTree and expat
took ~1.5 ms of every run's last stretch, for a document of a few elements.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from evalgate.gate import Check, Verdict

if TYPE_CHECKING:
    from evalgate.run.summary import RunSummary

__all__ = ["render_junit"]

_KINDS = ("threshold", "baseline", "errors")

# ElementTree's escapes: character data (&, <, >), and attribute values, which also keep quotes,
# tabs and line ends as references (a parser would otherwise normalise them to spaces).
_TEXT = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_ATTRIBUTE = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        '"': "&quot;",
        "\r": "&#13;",
        "\n": "&#10;",
        "\t": "&#09;",
    }
)


class _Element:
    """An XML element: attributes in the order given, then text or child elements (never both
    here), written as ElementTree indents and serialises them."""

    __slots__ = ("attrs", "children", "tag", "text")

    def __init__(self, tag: str, **attrs: str) -> None:
        self.tag, self.attrs = tag, attrs
        self.text: str | None = None
        self.children: list[_Element] = []

    def add(self, tag: str, **attrs: str) -> _Element:
        child = _Element(tag, **attrs)
        self.children.append(child)
        return child

    def set(self, key: str, value: str) -> None:
        self.attrs[key] = value

    def write(self, out: list[str], depth: int = 0) -> None:
        attrs = "".join(f' {k}="{v.translate(_ATTRIBUTE)}"' for k, v in self.attrs.items())
        out.append(f"<{self.tag}{attrs}")
        if self.children:  # each child on its own line, two spaces deeper
            inner = "\n" + "  " * (depth + 1)
            out.append(">")
            for child in self.children:
                out.append(inner)
                child.write(out, depth + 1)
            out.append("\n" + "  " * depth + f"</{self.tag}>")
        elif self.text:
            out.append(f">{self.text.translate(_TEXT)}</{self.tag}>")
        else:
            out.append(" />")


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


def _case(suite: _Element, check: Check, classname: str) -> str:
    case = suite.add("testcase", name=_case_name(check), classname=classname, time="0")
    if check.status == "FAIL":
        case.add("failure", message=check.reason, type="evalgate.FAIL").text = check.reason
        return "failures"
    if check.status == "ERROR":
        case.add("error", message=check.reason, type="evalgate.ERROR").text = check.reason
        return "errors"
    if check.status == "INCONCLUSIVE":
        case.add("skipped", message=_skipped_message(check))
        return "skipped"
    if check.reason:
        case.add("system-out").text = check.reason
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
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n']
    _document(verdict).write(out)
    out.append("\n")
    return "".join(out)


def _document(verdict: Verdict) -> _Element:
    """The ``<testsuites>`` element: one suite per model × benchmark, one case per gate check."""
    runs: dict[tuple[str, str], RunSummary] = {(r.model, r.benchmark): r for r in verdict.runs}
    root = _Element("testsuites", name=f"evalgate: {verdict.status}")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    for (model, benchmark), checks in _suites(verdict).items():
        run = runs.get((model, benchmark))
        seconds = float(run.time_s) if run is not None else 0.0
        suite = root.add("testsuite", name=f"{model} / {benchmark}")
        counts = {"tests": len(checks), "failures": 0, "errors": 0, "skipped": 0}
        if run is not None:
            props = suite.add("properties")
            for key, prop in (("model_id", run.model_id), ("run_dir", run.run_dir)):
                props.add("property", name=key, value=str(prop))
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
    return root

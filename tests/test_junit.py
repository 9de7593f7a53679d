"""junit.xml from a real run, read back with a real JUnit parser (junitparser)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from junitparser import Error, Failure, JUnitXml, Skipped

from tests.report_runs import make_runs


@pytest.fixture
def runs(tmp_path: Path, scripted_server: Any):
    (tmp_path / "base").mkdir()
    (tmp_path / "head").mkdir()
    return make_runs(tmp_path, scripted_server)


def test_junit_from_a_real_run(runs: Any) -> None:
    assert runs.exit_code == 3  # one model's server only errors
    verdict = json.loads((runs.head / "verdict.json").read_text())
    gate_checks = [c for c in verdict["checks"] if c["kind"] in ("threshold", "baseline", "errors")]
    by_status = {
        s: [c for c in gate_checks if c["status"] == s]
        for s in ("PASS", "FAIL", "INCONCLUSIVE", "ERROR")
    }
    assert all(by_status.values()), {k: len(v) for k, v in by_status.items()}  # every outcome

    xml = JUnitXml.fromfile(str(runs.head / "junit.xml"))
    suites = {s.name: s for s in xml}
    assert set(suites) == {
        "scripted / arith",
        "scripted / capitals",
        "broken / arith",
        "broken / capitals",
    }
    assert xml.tests == len(gate_checks)
    assert xml.failures == len(by_status["FAIL"])
    assert xml.errors == len(by_status["ERROR"])
    assert xml.skipped == len(by_status["INCONCLUSIVE"])

    arith = suites["scripted / arith"]
    cases = {c.name: c for c in arith}
    assert set(cases) == {
        "accuracy ≥ 50.0% (threshold)",
        "accuracy not worse than the baseline (baseline)",
    }
    (failure,) = cases["accuracy not worse than the baseline (baseline)"].result
    assert isinstance(failure, Failure) and failure.message.startswith("Δ -0.")
    assert cases["accuracy ≥ 50.0% (threshold)"].is_passed
    (skipped,) = next(iter(suites["scripted / capitals"])).result
    assert isinstance(skipped, Skipped) and "MDE" in skipped.message
    errors = [r for c in suites["broken / capitals"] for r in c.result]
    assert errors and isinstance(errors[0], Error) and "rollouts errored" in errors[0].message
    for suite in xml:  # each suite's counts agree with its cases (what reporters sum up)
        results = [r for c in suite for r in c.result]
        assert suite.tests == len(list(suite))
        assert suite.failures == sum(isinstance(r, Failure) for r in results)
        assert suite.errors == sum(isinstance(r, Error) for r in results)
        assert suite.skipped == sum(isinstance(r, Skipped) for r in results)


def test_junit_shape_follows_the_common_schema(runs: Any) -> None:
    """What Jenkins' junit-10.xsd requires: named suites with counts, properties first,
    testcases with name and classname, at most one outcome element each."""
    root = ET.parse(runs.head / "junit.xml").getroot()
    assert root.tag == "testsuites"
    for suite in root.iter("testsuite"):
        for attr in ("name", "tests", "failures", "errors", "skipped", "time"):
            assert suite.get(attr) is not None, attr
        children = [c.tag for c in suite]
        assert children[0] == "properties"
        assert set(children[1:]) <= {"testcase"}
        for case in suite.iter("testcase"):
            assert case.get("name") and case.get("classname")
            outcomes = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
            assert len(outcomes) <= 1


def _run(model: str, benchmark: str, run_dir: str) -> Any:
    from evalgate.run.summary import RunSummary

    return RunSummary(
        benchmark=benchmark,
        model=model,
        model_id=f"org/{model} & <co>",
        run_dir=run_dir,
        n_items=1,
        rollouts=1,
        n_rollouts=1,
        errors=0,
        error_kinds={},
        metrics={},
        usage={},
        time_s=1.2345,
    )


# Reasons as a provider, a path or a model may make them: every character XML escapes, line
# ends and tabs (kept in attributes as references), the empty reason, and non-ASCII text.
_REASONS = [
    'Δ -0.05 < 0: "worse" & <b>broken</b> > 1',
    "line one\nline two\r\nthree\ttabbed",
    "",
    "   ",
    "ünïcødé ✅ — \u200b zero-width",
]


def _verdicts() -> list[Any]:
    from evalgate.gate import Check, Verdict

    statuses = ("PASS", "FAIL", "ERROR", "INCONCLUSIVE")
    kinds = ("threshold", "baseline", "errors", "score")
    checks = tuple(
        Check("m<1>", 'b"&', "accuracy", kind, status, reason=reason, threshold=0.5)  # type: ignore[arg-type]
        for status in statuses
        for kind in kinds
        for reason in _REASONS
    )
    runs = (_run("m<1>", 'b"&', "evals/b/run 1"), _run("other", "bench", "x\ty"))
    return [
        Verdict("FAIL", checks, runs, ("a reason",)),
        Verdict("PASS", checks[:3], runs[:1], ()),
        Verdict("UNGATED", (), runs, ()),  # suites without a test case
        Verdict("ERROR", checks, (), ()),  # suites without a run (no properties)
        Verdict("ERROR", (), (), ()),  # nothing at all: an empty root
    ]


def _via_elementtree(verdict: Any) -> str:
    """The document as ElementTree indents and writes the same elements (what evalgate wrote
    before it wrote the text itself)."""
    from evalgate.report.junit import _document

    def build(node: Any, parent: ET.Element | None) -> ET.Element:
        element = (
            ET.Element(node.tag, dict(node.attrs))
            if parent is None
            else ET.SubElement(parent, node.tag, dict(node.attrs))
        )
        element.text = node.text
        for child in node.children:
            build(child, element)
        return element

    root = build(_document(verdict), None)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


@pytest.mark.parametrize("index", range(5))
def test_junit_text_is_what_elementtree_writes(index: int) -> None:
    from evalgate.report.junit import render_junit

    verdict = _verdicts()[index]
    text = render_junit(verdict)
    assert text == _via_elementtree(verdict)
    root = ET.fromstring(text.split("\n", 1)[1])  # and it reads back: the same attributes
    if verdict.checks:
        messages = [e.get("message") for e in root.iter("failure")]
        assert messages == [
            c.reason for c in verdict.checks if c.status == "FAIL" and c.kind != "score"
        ]

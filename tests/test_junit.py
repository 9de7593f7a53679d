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

"""CHANGELOG.md is what a release publishes as its notes (.ci/changelog.py, run by the release
workflow): the current version has a section, and a version without one is refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import evalgate

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / ".ci" / "changelog.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_the_current_version_has_notes() -> None:
    done = _run(f"v{evalgate.__version__}")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines and not any(line.startswith("## ") for line in lines)  # its section alone


def test_a_version_without_a_section_is_refused_in_one_line(tmp_path: Path) -> None:
    log = tmp_path / "CHANGELOG.md"
    log.write_text("# Changelog\n\n## 1.2.3\n\n- one change\n\n## 1.2.2\n\n- an older one\n")
    done = _run("1.2.3", str(log))
    assert (done.returncode, done.stdout.strip()) == (0, "- one change")
    missing = _run("v9.9.9", str(log))
    assert missing.returncode == 1 and missing.stdout == ""
    (line,) = missing.stderr.strip().splitlines()
    assert "9.9.9" in line and str(log) in line
    log.write_text("# Changelog\n\n## 1.2.3\n\n## 1.2.2\n\n- an older one\n")
    assert _run("1.2.3", str(log)).returncode == 1  # a heading with no notes is none


def test_the_release_workflow_reads_the_changelog() -> None:
    workflow = (ROOT / ".github" / "workflows" / "release.yml").read_text()
    assert "python .ci/changelog.py" in workflow

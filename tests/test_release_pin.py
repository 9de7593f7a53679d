"""A release pins action.yml's image by digest (a tag like `:v1` can be pushed over, so pinning
`org/evalgate@<commit>` would not pin the code that runs); the release workflow checks it on
every version tag."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / ".ci" / "release_pin.py"
DIGEST = "sha256:" + "ab" * 32


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_the_tagged_image_fails_the_check_in_one_line(tmp_path: Path) -> None:
    action = tmp_path / "action.yml"
    action.write_text((ROOT / "action.yml").read_text())  # main's: the moving :v1 tag
    done = _run("check", str(action))
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert ":v1" in line and "digest" in line


def test_pin_writes_the_digest_form_and_the_check_passes(tmp_path: Path) -> None:
    action = tmp_path / "action.yml"
    original = (ROOT / "action.yml").read_text()
    action.write_text(original)
    assert _run("pin", DIGEST, str(action)).returncode == 0
    text = action.read_text()
    assert f"image: docker://ghcr.io/org/evalgate@{DIGEST}\n" in text
    assert text.replace(f"@{DIGEST}", ":v1") == original  # nothing else changed
    assert _run("check", str(action)).returncode == 0
    assert _run("pin", "sha256:short", str(action)).returncode == 2


def test_the_release_workflow_runs_the_check_on_version_tags() -> None:
    release = (ROOT / ".github" / "workflows" / "release.yml").read_text()
    assert 'tags: ["v[0-9]+.[0-9]+.[0-9]+"]' in release
    assert "python .ci/release_pin.py check action.yml" in release

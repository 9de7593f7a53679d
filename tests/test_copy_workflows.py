"""The workflows the README tells users to copy work unchanged in *their* repository: no
`uses: ./…` (there it is the user's own code, not evalgate), evalgate and every other action
pinned by commit, clean under zizmor's default and auditor personas, valid against GitHub's
workflow schema; the README's inline example is the file, word for word."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COPIED = sorted((ROOT / "examples" / "workflows").glob("*.yml"))
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_docs_name_the_copyable_workflows_and_inline_one_verbatim() -> None:
    assert {p.name for p in COPIED} == {"evalgate.yml", "evalgate-pr.yml", "evalgate-publish.yml"}
    action = (ROOT / "docs" / "action.md").read_text(encoding="utf-8")
    assert "examples/workflows/" in action
    # Every page that inlines the copyable workflow (docs/index.md mirrors the README).
    pages = [README, *(p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md")))]
    for text in (t for t in pages if "uses: org/evalgate@" in t):
        blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
        inline = [b for b in blocks if "uses: org/evalgate@" in b]
        assert inline == [(ROOT / "examples" / "workflows" / "evalgate.yml").read_text()]


@pytest.mark.parametrize("path", COPIED, ids=lambda p: p.name)
def test_no_local_action_and_every_action_pinned_by_commit(path: Path) -> None:
    uses = re.findall(r"^\s*-?\s*uses:\s*(\S+)", path.read_text(), flags=re.M)
    assert uses and any(u.startswith("org/evalgate@") for u in uses)
    for ref in uses:
        assert not ref.startswith("./"), f"{path.name}: {ref} is the user's own code there"
        assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", ref), f"{path.name}: {ref}"


@pytest.mark.skipif(shutil.which("zizmor") is None, reason="needs zizmor (.[dev])")
@pytest.mark.parametrize("persona", ["regular", "auditor"])
def test_clean_under_zizmor(tmp_path: Path, persona: str) -> None:
    # As in a user's repository: the files alone under .github/workflows.
    dest = tmp_path / ".github" / "workflows"
    dest.mkdir(parents=True)
    for path in COPIED:
        shutil.copy(path, dest / path.name)
    done = subprocess.run(
        ["zizmor", "--offline", "--persona", persona, "--format", "plain", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No findings" in done.stdout + done.stderr


@pytest.mark.skipif(shutil.which("check-jsonschema") is None, reason="needs check-jsonschema")
def test_valid_against_githubs_workflow_schema() -> None:
    done = subprocess.run(
        ["check-jsonschema", "--builtin-schema", "vendor.github-workflows", *map(str, COPIED)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr

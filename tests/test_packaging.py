"""The Action's packaging: action.yml and the Dockerfile say what the entrypoint expects."""

from __future__ import annotations

import json
import re

import yaml

from evalgate.action.inputs import ActionInputs
from tests.conftest import ROOT


def test_action_inputs_match_what_the_entrypoint_reads() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"] == {"using": "docker", "image": "Dockerfile"}
    names = set(action["inputs"])
    assert all(re.fullmatch(r"[a-z_]+", n) for n in names)  # underscores: INPUT_NAME works
    assert all(spec.get("description") for spec in action["inputs"].values())
    read = set(ActionInputs.__dataclass_fields__)
    assert names == read
    assert action["inputs"]["github_token"]["default"] == "${{ github.token }}"
    assert set(action["outputs"]) == {
        "verdict",
        "exit_code",
        "crash_log",
        "scorecard",
        "results_dir",
        "summary",
    }


def test_dockerfile_entrypoint_is_exec_form_absolute_and_runs_as_root() -> None:
    text = (ROOT / "Dockerfile").read_text()
    entry = re.search(r"^ENTRYPOINT (.+)$", text, re.M)
    assert entry is not None
    argv = json.loads(entry.group(1))
    assert argv[0].startswith("/") and argv[1:] == ["-m", "evalgate", "action"]
    assert not re.search(r"^USER ", text, re.M)
    assert "bubblewrap" in text and "litellm[proxy]==1.103.0" in text
    assert "1.107.0" not in text


def test_litellm_pin_never_the_compromised_release() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    pins = re.findall(r"litellm\[proxy\]==([0-9.]+)", text)
    assert pins and all(p != "1.107.0" for p in pins)

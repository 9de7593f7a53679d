"""The base commit's tree, written for the exam: the same files, and no link out of it, on a
Python with tarfile's ``data_filter`` (3.11.4+) and on one without (the Action image's 3.11.2)."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from evalgate.action.exam import materialise


def _repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "repo"
    (repo / "data").mkdir(parents=True)
    (repo / "data" / "qa.jsonl").write_text('{"id": "1"}\n')
    (repo / "run.sh").write_text("echo hi\n")
    (repo / "run.sh").chmod(0o755)
    os.symlink("qa.jsonl", repo / "data" / "inside")
    os.symlink("/etc/passwd", repo / "data" / "absolute")
    os.symlink("../../outside", repo / "data" / "escapes")
    who = {f"GIT_{role}_{key}": value for role in ("AUTHOR", "COMMITTER")
           for key, value in (("NAME", "t"), ("EMAIL", "t@t"))}  # fmt: skip
    env = {**os.environ, **who}
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True, env=env)
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()
    return repo, sha


@pytest.mark.parametrize("has_data_filter", [True, False])
def test_the_base_tree_is_written_without_links_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, has_data_filter: bool
) -> None:
    if not has_data_filter:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    elif not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python's tarfile has no data_filter")
    repo, sha = _repo(tmp_path)
    into = tmp_path / "exam"
    into.mkdir()
    materialise(repo, sha, into)
    assert (into / "data" / "qa.jsonl").read_text() == '{"id": "1"}\n'
    assert os.access(into / "run.sh", os.X_OK)
    assert os.readlink(into / "data" / "inside") == "qa.jsonl"
    assert not os.path.lexists(into / "data" / "absolute")
    assert not os.path.lexists(into / "data" / "escapes")

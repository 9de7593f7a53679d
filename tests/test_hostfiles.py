"""Host files read for prompts and sandboxes (skills, an MCP config) never follow a link out of
the repository, are regular files, and are read up to a cap: in `local` mode as in the Action."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from evalgate.config.load import load_config
from evalgate.errors import ConfigError
from evalgate.suites.agent.builtin import find_skills

ROOT = Path(__file__).resolve().parent.parent
SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- not-for-a-prompt"


def _repo(tmp_path: Path) -> tuple[Path, Path]:
    """A repository (with .git) holding a skills folder, and a secret outside it."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "skills").mkdir()
    (repo / "skills" / "shell.md").write_text("# POSIX shell tips\n")
    secret = tmp_path / "home" / ".ssh" / "id_ed25519"
    secret.parent.mkdir(parents=True)
    secret.write_text(SECRET + "\n")
    return repo, secret


@pytest.mark.parametrize("target", ["secret", "/proc/self/environ", "/etc/shadow"])
def test_a_skill_that_links_out_of_the_repository_is_refused(tmp_path: Path, target: str) -> None:
    repo, secret = _repo(tmp_path)
    os.symlink(secret if target == "secret" else target, repo / "skills" / "leak.md")
    with pytest.raises(ConfigError, match="is outside the repository") as err:
        find_skills(repo / "skills")
    assert "leak.md" in str(err.value) and SECRET not in str(err.value)


def test_a_skill_folder_linked_out_is_refused_per_file(tmp_path: Path) -> None:
    repo, secret = _repo(tmp_path)
    os.symlink(secret.parent, repo / "skills" / "keys")  # keys/SKILL.md would be read through it
    (secret.parent / "SKILL.md").write_text(f"---\ndescription: {SECRET}\n---\n")
    with pytest.raises(ConfigError, match="is outside the repository"):
        find_skills(repo / "skills")


def test_a_link_inside_the_repository_is_read(tmp_path: Path) -> None:
    repo, _ = _repo(tmp_path)
    (repo / "docs").mkdir()
    (repo / "docs" / "git.md").write_text("# Git tips\n")
    os.symlink(repo / "docs" / "git.md", repo / "skills" / "git.md")
    assert {s.description for s in find_skills(repo / "skills")} == {"POSIX shell tips", "Git tips"}


def test_a_skill_over_the_cap_or_not_a_file_is_refused(tmp_path: Path) -> None:
    repo, _ = _repo(tmp_path)
    (repo / "skills" / "huge.md").write_bytes(b"#" * (2 << 20))
    with pytest.raises(ConfigError, match="over 1024 KiB"):
        find_skills(repo / "skills")
    (repo / "skills" / "huge.md").unlink()
    os.mkfifo(repo / "skills" / "pipe.md")  # a reader would block forever
    with pytest.raises(ConfigError, match="not a regular file"):
        find_skills(repo / "skills")


def test_dev_zero_is_refused_without_reading_it(tmp_path: Path) -> None:
    # Not run against the old code: it read /dev/zero without limit (memory until killed).
    repo, _ = _repo(tmp_path)
    os.symlink("/dev/zero", repo / "skills" / "zero.md")
    with pytest.raises(ConfigError, match="is outside the repository"):
        find_skills(repo / "skills")


def _agent_evals(repo: Path, variant: str) -> Path:
    shutil.copytree(ROOT / "benchmarks" / "agent-basics" / "hello-file", repo / "tasks" / "hello")
    evals = repo / "evals.yaml"
    evals.write_text(
        "models: [{name: m, backend: openai, base_url: 'http://127.0.0.1:9/v1'}]\n"
        "benchmarks:\n"
        "  - {name: ag, kind: agent, tasks: tasks, agent: {type: command, command: [goat]},\n"
        f"     variants: [{{name: v, {variant}}}]}}\n"
    )
    return evals


@pytest.mark.parametrize(
    ("variant", "link"),
    [
        ("mcp_config: /proc/self/environ", None),
        ("mcp_config: mcp.json", "/proc/self/environ"),
        ("mcp_config: mcp.json", "secret"),
        ("skills_dir: /etc", None),
    ],
    ids=["host-environ", "link-to-environ", "link-to-key", "host-skills"],
)
def test_local_mode_refuses_host_files_for_the_agent(
    tmp_path: Path, variant: str, link: str | None
) -> None:
    from evalgate.suites.agent.suite import AgentSuite

    repo, secret = _repo(tmp_path)
    if link is not None:
        os.symlink(secret if link == "secret" else link, repo / "mcp.json")
    evals = _agent_evals(repo, variant)
    with pytest.raises(ConfigError, match="is outside the repository"):
        config = load_config(evals)
        (bench,) = config.benchmarks
        AgentSuite.from_spec(bench, "v")


def test_the_exam_trees_root_is_the_repository(tmp_path: Path) -> None:
    # The Action's exam tree (git archive) has no .git: its top is given, so a config in a
    # subfolder may name the tree's shared skills, and nothing above the tree.
    tree = tmp_path / "exam"
    (tree / "skills").mkdir(parents=True)
    (tree / "sub").mkdir()
    evals = _agent_evals(tree / "sub", "skills_dir: ../skills")
    config = load_config(evals, root=tree)
    assert config.benchmarks[0].variants[0].skills_dir == str(tree / "skills")
    with pytest.raises(ConfigError, match="is outside the repository"):
        load_config(evals)  # without it: the evals.yaml's folder, which the skills are above


def test_an_hf_dataset_folder_out_of_the_repository_is_refused_in_pr_mode(tmp_path: Path) -> None:
    from evalgate.action.exam import check_paths

    repo, _ = _repo(tmp_path)
    (repo / "evals.yaml").write_text(
        "benchmarks:\n  - {name: h, kind: hf, dataset: ../home, split: train}\n"
    )
    with pytest.raises(ConfigError, match=r"h: dataset: .* is outside the repository"):
        check_paths(load_config(repo / "evals.yaml"), repo, "evals.yaml")

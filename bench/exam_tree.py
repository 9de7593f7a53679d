"""What reading the exam from the base commit costs a PR run: the base commit's tree written out
with ``git archive`` (:func:`evalgate.action.exam.materialise`), against ``git worktree add`` of
the same commit (what a baseline re-run already does), in one run on this repository.

Read the ratio (archive / worktree), not the absolute figures: the machine's cores are shared.

Usage: python bench/exam_tree.py [--repeats 5] [--repo PATH]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from evalgate.action import git as gitops
from evalgate.action.exam import materialise


def _archive(repo: Path, sha: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        materialise(repo, sha, Path(tmp))
        return time.perf_counter() - start


def _worktree(repo: Path, sha: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        gitops.git(repo, "worktree", "add", "--detach", f"{tmp}/wt", sha)
        took = time.perf_counter() - start
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", f"{tmp}/wt"],
                       check=True)  # fmt: skip
        return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    sha = gitops.git(args.repo, "rev-parse", "HEAD").strip()
    files = len(gitops.git(args.repo, "ls-tree", "-r", "--name-only", sha).split())
    archive = statistics.median(_archive(args.repo, sha) for _ in range(args.repeats))
    worktree = statistics.median(_worktree(args.repo, sha) for _ in range(args.repeats))
    print(f"{files} files at {sha[:12]}, median of {args.repeats}")
    print(f"git archive (the exam's tree): {archive * 1000:7.0f} ms")
    print(f"git worktree add (reference):  {worktree * 1000:7.0f} ms")
    print(f"ratio archive / worktree:      {archive / worktree:7.2f}")


if __name__ == "__main__":
    main()

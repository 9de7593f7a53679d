"""The base commit's tree, where the exam is read from in PR mode.

The base's whole tree is materialised (``git archive``, through the one git wrapper: git, not
the PR's working tree, so nothing the PR edits reaches the measurement) and its evals.yaml is
loaded there, so that its exam paths (data files, task folders, inspect task files, verifiers
environments) resolve to the base's files.
"""

from __future__ import annotations

import os
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from evalgate.action import git as gitops
from evalgate.config.load import Config
from evalgate.config.spec import Benchmark

__all__ = ["anchor_local_data", "materialise"]


def materialise(workdir: Path, sha: str, into: Path) -> None:
    """The tree of commit ``sha`` (the whole repository), written under ``into``.

    A symlink that leads out of the tree is not written: the exam never reads outside it."""

    # On disk, not in memory: a repository can be large.
    with tempfile.TemporaryDirectory(prefix="evalgate-archive-") as tmp:
        archive = Path(tmp) / "base.tar"
        gitops.git(workdir, "archive", "--format=tar", f"--output={archive}", sha, timeout=600)
        with tarfile.open(archive) as tar:
            # members=, not filter=: the Action image's Python (3.11.2) predates filter=.
            tar.extractall(into, members=list(_inside(tar, str(into))))


def _inside(tar: tarfile.TarFile, dest: str) -> Iterator[tarfile.TarInfo]:
    """The members that stay inside ``dest``: tarfile's own ``data_filter`` where this Python
    has it (3.11.4+), else the same rules for what ``git archive`` writes (files, folders,
    links): no absolute or ``..`` names, no link whose target leaves the tree."""
    root = os.path.realpath(dest)
    for member in tar.getmembers():
        data_filter = getattr(tarfile, "data_filter", None)
        if data_filter is not None:
            try:
                kept = data_filter(member, dest)
            except tarfile.FilterError:
                continue
            yield kept
            continue
        if not (member.isfile() or member.isdir() or member.issym()):
            continue
        path = os.path.realpath(os.path.join(root, member.name))
        if os.path.isabs(member.name) or os.path.commonpath([root, path]) != root:
            continue
        if member.issym():
            target = os.path.normpath(
                os.path.join(os.path.dirname(os.path.join(root, member.name)), member.linkname)
            )
            if os.path.isabs(member.linkname) or os.path.commonpath([root, target]) != root:
                continue
        yield member


def anchor_local_data(config: Config, cwd: Path) -> Config:
    """``config`` with an hf benchmark's local ``data_files`` (and a ``dataset`` that is a local
    folder) made absolute against ``cwd``, where `datasets` would look for them: in the base's
    tree they must name the base's files, not the PR's checkout."""
    benchmarks = tuple(_anchored(bench, cwd) for bench in config.benchmarks)
    return config.model_copy(update={"benchmarks": benchmarks})


def _anchored(bench: Benchmark, cwd: Path) -> Benchmark:
    if bench.kind != "hf":
        return bench
    update: dict[str, object] = {}
    files = bench.data_files
    if isinstance(files, str) and not Path(files).is_absolute():
        update["data_files"] = str(cwd / files)
    elif isinstance(files, list):
        update["data_files"] = [f if Path(f).is_absolute() else str(cwd / f) for f in files]
    if not Path(bench.dataset).is_absolute() and (cwd / bench.dataset).exists():
        update["dataset"] = str(cwd / bench.dataset)
    return bench.model_copy(update=update) if update else bench

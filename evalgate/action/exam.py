"""The exam from the base commit, the candidate from the PR (see :mod:`evalgate.config.split`).

In PR mode the base commit's tree is materialised and its evals.yaml loaded there
(:mod:`~evalgate.action.base_tree`: its exam paths resolve to the base's files);
:func:`merge` lays the PR's candidate fields over the base's benchmarks
(:mod:`~evalgate.action.exam_merge`); :func:`exam_changes` says what the PR changed in the exam,
for the comment (:mod:`~evalgate.action.exam_changes`); :func:`check_secret_routes` refuses a
secret the PR would send somewhere the base does not (:mod:`~evalgate.action.secret_policy`);
and :func:`check_paths` refuses a path out of the repository
(:mod:`~evalgate.action.repo_paths`). This module gathers them: the PR mode's one entry.
"""

from __future__ import annotations

from evalgate.action.base_tree import anchor_local_data, materialise
from evalgate.action.exam_changes import exam_changes
from evalgate.action.exam_merge import merge
from evalgate.action.repo_paths import check_paths
from evalgate.action.secret_policy import check_secret_routes, secret_routes

__all__ = [
    "anchor_local_data",
    "check_paths",
    "check_secret_routes",
    "exam_changes",
    "materialise",
    "merge",
    "secret_routes",
]

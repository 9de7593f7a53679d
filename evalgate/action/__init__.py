"""The GitHub Action: ``python -m evalgate action`` (the Docker image's entrypoint).

``run`` mode evaluates the checked-out code and gates the PR; ``publish`` mode (for a trusted
``workflow_run`` job) only posts the comment of a run whose results were uploaded as an artifact.
"""

from __future__ import annotations

from evalgate.action.main import run_action

__all__ = ["run_action"]

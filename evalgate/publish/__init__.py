"""Publishing results on GitHub: workflow commands, the REST client, the sticky comment.

``actions`` writes what a workflow step can emit (outputs, the job summary, annotations);
``github`` talks to the REST API; ``sticky`` keeps one scorecard comment per pull request.
"""

from __future__ import annotations

from evalgate.publish.actions import ActionsEnv
from evalgate.publish.github import GitHubClient, GitHubError, IssueComment
from evalgate.publish.sticky import StickyResult, upsert_sticky_comment

__all__ = [
    "ActionsEnv",
    "GitHubClient",
    "GitHubError",
    "IssueComment",
    "StickyResult",
    "upsert_sticky_comment",
]

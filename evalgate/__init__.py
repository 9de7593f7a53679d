"""evalgate: gate pull requests on LLM evaluation results.

The package reads as the pipeline, one sub-package per stage, numbered in docs/development.md:
``config`` (evals.yaml → Config) → ``serve`` (a model → an Endpoint) → ``sandbox`` → ``suites``
(items and one scored rollout) → ``run`` (items × rollouts, journaled) → ``compare`` (paired with
the baseline, by the pure ``stats``) → ``gate`` (→ Verdict) → ``report`` → ``publish`` /
``store``; ``pipeline`` wires them, ``action``, ``commands`` and ``cli`` sit on top. Public
entry points: ``python -m evalgate`` / ``evalgate.cli.main(argv)`` and the Action (``python -m
evalgate action``).
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]

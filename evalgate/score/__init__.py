"""Stage 4, score: a completion in, a reward out.

- ``scorers``: pure rules on a completion and a reference answer (exact, numeric, regex,
  contains, choice);
- ``judge``: the model-graded scorer (``scorer: {type: judge}``), with its prompts
  (``_prompts``) and the reading of its verdicts (``verdict``); ``labels``: how far a judge
  agrees with a labelled set (`evalgate judge-check`, the scorecard);
- ``relay``: the judge of code that grades in its own process (inspect's ``grader`` role,
  verifiers' judges), reached through a loopback endpoint; ``vf_judge``: the verifiers side of
  it, inside the worker process;
- ``humaneval``: HumanEval's test runner (``_humaneval_runner``, run in the sandbox: the
  problem's own tests decide, no model) and the reading of its verdict.

Both judges are :class:`~evalgate.score.base.JudgeBase`: served, bound, priced and counted
alike. The names below load on first use: a run whose benchmarks have no judge never imports the
judge's modules (start-up time).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evalgate.score.base import JudgeBase, JudgeFailed, judge_identity
    from evalgate.score.judge import JUDGE_PROTOCOL, Judge
    from evalgate.score.labels import labels_path, load_labels, measure
    from evalgate.score.relay import Grader, JudgeRelay, Tab
    from evalgate.score.scorers import Scorer, make_scorer
    from evalgate.score.verdict import Verdict, parse_reply

# name → the module of this package that defines it.
_WHERE = {
    "JudgeBase": "base",
    "JudgeFailed": "base",
    "judge_identity": "base",
    "JUDGE_PROTOCOL": "judge",
    "Judge": "judge",
    "labels_path": "labels",
    "load_labels": "labels",
    "measure": "labels",
    "Grader": "relay",
    "JudgeRelay": "relay",
    "Tab": "relay",
    "Scorer": "scorers",
    "make_scorer": "scorers",
    "Verdict": "verdict",
    "parse_reply": "verdict",
}

__all__ = [
    "JUDGE_PROTOCOL",
    "Grader",
    "Judge",
    "JudgeBase",
    "JudgeFailed",
    "JudgeRelay",
    "Scorer",
    "Tab",
    "Verdict",
    "judge_identity",
    "labels_path",
    "load_labels",
    "make_scorer",
    "measure",
    "parse_reply",
]


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"evalgate.score.{module}"), name)

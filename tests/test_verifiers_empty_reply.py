"""Legacy verifiers (0.3.x) turn an empty model reply into ``EmptyModelResponseError`` in the
rollout's ``error``; the v1 API scores the same reply 0. Both must score it 0: an empty answer is
a wrong answer, not an infrastructure error (which would make the verdict ERROR, exit 3)."""

from __future__ import annotations

import pytest

from evalgate.errors import InfraError
from evalgate.suites._vf_legacy import _output_outcome

# What verifiers 0.3.1's legacy env returns for a reply with no content and no tool call
# (ErrorData as built by verifiers.legacy.utils.error_utils).
EMPTY = {
    "prompt": [{"role": "user", "content": "What is 6 x 7?"}],
    "completion": [],
    "reward": None,
    "metrics": {},
    "error": {
        "error": "EmptyModelResponseError",
        "message": "Model returned no content and did not call any tools",
        "error_chain_repr": "EmptyModelResponseError('Model returned no content ...')",
        "error_chain_str": "Model returned no content and did not call any tools",
    },
}


def test_an_empty_legacy_reply_scores_zero() -> None:
    outcome = _output_outcome(dict(EMPTY))
    assert outcome.reward == 0.0
    assert outcome.completion == ""


def test_other_legacy_errors_still_raise() -> None:
    broken = {**EMPTY, "error": {**EMPTY["error"], "error": "ToolCallError"}}
    with pytest.raises(InfraError, match="vf_ToolCallError"):
        _output_outcome(broken)

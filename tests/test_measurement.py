"""One derivation of what a benchmark measures with.

The base policy (``action.policy``) decides before the run whether a PR changed the measurement;
the comparison (``compare.paired``) refuses afterwards a baseline whose recorded measurement
differs. If the two disagree, a PR that changes something only one of them sees is judged by
the other: a ``sandbox.timeout_s`` change passed the policy and then made the comparison
"not comparable" (INCONCLUSIVE, not FAIL). Each mutation below must be seen by both or by neither.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalgate.action.policy import BasePolicy, policy_checks
from evalgate.config.load import load_config
from evalgate.run.fingerprint import fingerprint

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "benchmarks" / "agent-basics"

_BASE = {
    "agent": f"{{name: b, kind: agent, tasks: '{TASKS}', sandbox: {{timeout_s: 120}}}}",
    "humaneval": "{name: b, kind: humaneval, sandbox: {timeout_s: 120}}",
    "jsonl": "{name: b, kind: jsonl, path: data.jsonl}",
}
# (kind, what changes, the PR's entry)
_CHANGES = [
    ("agent", "sandbox.timeout_s", _BASE["agent"].replace("timeout_s: 120", "timeout_s: 121")),
    ("agent", "sandbox.network", _BASE["agent"].replace("}}", ", network: model-only}}")),
    ("agent", "sandbox.memory_mb", _BASE["agent"].replace("}}", ", memory_mb: 4096}}")),
    ("agent", "eval.rollouts", _BASE["agent"].replace("}}", "}, eval: {rollouts: 3}}")),
    ("humaneval", "sandbox.timeout_s", _BASE["humaneval"].replace("120", "121")),
    ("jsonl", "scorer", _BASE["jsonl"].replace("}", ", scorer: {type: contains}}")),
    ("jsonl", "eval.rollouts", _BASE["jsonl"].replace("}", ", eval: {rollouts: 2}}")),
    # The subject: the PR's to change; neither side may call it a measurement change.
    ("jsonl", "system_prompt", _BASE["jsonl"].replace("}", ", system_prompt: Be brief.}")),
    ("jsonl", "sampling", _BASE["jsonl"].replace("}", ", sampling: {temperature: 0.7}}")),
]


def _config(tmp_path: Path, name: str, entry: str) -> Any:
    (tmp_path / "data.jsonl").write_text('{"id": "a", "prompt": "1+1?", "answer": "2"}\n')
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        "models: [{name: m, backend: openai, base_url: 'http://127.0.0.1:9/v1'}]\n"
        f"benchmarks:\n  - {entry}\n"
    )
    return load_config(path, [])


def _recorded(config: Any) -> dict[str, Any]:
    bench, model = config.benchmarks[0], config.models[0]
    return fingerprint(bench, model, "m", [])["measurement"]


@pytest.mark.parametrize(
    ("kind", "what", "entry"), _CHANGES, ids=[f"{k}-{w}" for k, w, _ in _CHANGES]
)
def test_the_policy_and_the_comparison_see_the_same_measurement(
    tmp_path: Path, kind: str, what: str, entry: str
) -> None:
    base = _config(tmp_path, "base", _BASE[kind])
    pr = _config(tmp_path, "pr", entry)
    compared_differs = _recorded(base) != _recorded(pr)
    refused = policy_checks(BasePolicy("base", "0" * 40, base), pr)
    assert bool(refused) == compared_differs, (what, refused, _recorded(base), _recorded(pr))
    if compared_differs:  # a measurement change FAILs with the reason, never INCONCLUSIVE later
        assert [c.status for c in refused] == ["FAIL"]
        assert any(part in refused[0].reason for part in what.split("."))


def test_an_unchanged_config_is_the_same_measurement(tmp_path: Path) -> None:
    for entry in _BASE.values():
        a, b = _config(tmp_path, "a", entry), _config(tmp_path, "b", entry)
        assert _recorded(a) == _recorded(b)
        assert policy_checks(BasePolicy("base", "0" * 40, a), b) == []

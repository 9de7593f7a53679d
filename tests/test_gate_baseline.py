"""The gate against a baseline, end to end: scripted models over real HTTP, real statistics.

The datasets reproduce the worked example of the gate's statistics notes: n = 200 binary items,
base right on 140, PR right on 132, with 26 items lost and 18 gained (b/c = 26/18).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from tests.conftest import write_config

N = 200


def _dataset(tmp_path: Path) -> None:
    rows = [{"id": f"q{i:03d}", "prompt": f"Q{i}", "answer": f"A{i}"} for i in range(N)]
    (tmp_path / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def _answers(correct: set[int]):
    def script(body: dict[str, Any], n: int) -> str:
        i = int(body["messages"][-1]["content"].removeprefix("Q"))
        return f"A{i}" if i in correct else "wrong"

    return script


BASE = set(range(140))
HEAD_26_18 = set(range(114)) | set(range(140, 158))  # loses 114..139 (26), gains 140..157 (18)


def _config(tmp_path: Path, url: str, gate: str = "", scorer: str = "exact") -> Path:
    _dataset(tmp_path)
    return write_config(
        tmp_path,
        f"""
models:
  - {{name: m, backend: openai, base_url: "{url}", model: org/m}}
benchmarks:
  - {{name: qa, kind: jsonl, path: qa.jsonl, scorer: {{type: {scorer}}}}}
eval: {{max_concurrent: 16}}
gate: {{margin: 0.05{gate}}}
""",
    )


def _local(tmp_path: Path, server: Any, out: str, *extra: str, **kw: Any) -> tuple[int, dict]:
    config = _config(tmp_path, server.base_url, **kw)
    code = main(
        ["local", str(config), "--output", str(tmp_path / out), *extra], environ={"CI": "1"}
    )
    return code, json.loads((tmp_path / out / "verdict.json").read_text())


def _baseline_check(verdict: dict) -> dict:
    (check,) = [c for c in verdict["checks"] if c["kind"] == "baseline"]
    return check


def test_worked_example_is_inconclusive(tmp_path: Path, scripted_server: Any) -> None:
    base = scripted_server(_answers(BASE))
    head = scripted_server(_answers(HEAD_26_18))
    assert _local(tmp_path, base, "base")[0] == 0
    code, verdict = _local(tmp_path, head, "head", "--baseline", str(tmp_path / "base"))
    assert verdict["status"] == "INCONCLUSIVE"
    assert code == 0  # on_inconclusive: warn
    result = _baseline_check(verdict)["comparison"]["result"]
    assert result["n"] == N and result["discordant"] == [26, 18]
    assert result["base_mean"] == 0.70 and result["head_mean"] == 0.66
    # The gate's exact unconditional test (not the notes' conditional McNemar 0.146 and Wald
    # 0.38; README "How the gate decides" says where the notes differ): same verdict.
    assert result["method"] == "exact-unconditional"
    assert result["p_regression"] == pytest.approx(0.1247, abs=0.001)
    assert result["p_noninferiority"] == pytest.approx(0.455, abs=0.005)
    # The bounds shown are the inversion of the same tests: INCONCLUSIVE ⇔ lo ≤ −δ and hi ≥ 0.
    assert result["lo"] <= -0.05 and result["hi"] >= 0.0
    scorecard = (tmp_path / "head" / "scorecard.md").read_text()
    assert "| m | qa | accuracy | 70.0% | 66.0% | -4.0 pp" in scorecard
    assert "26 regressed, 18 improved" in scorecard


def test_inconclusive_can_be_made_to_fail(tmp_path: Path, scripted_server: Any) -> None:
    base = scripted_server(_answers(BASE))
    head = scripted_server(_answers(HEAD_26_18))
    _local(tmp_path, base, "base")
    code, verdict = _local(
        tmp_path, head, "head", "--baseline", str(tmp_path / "base"), gate=", on_inconclusive: fail"
    )
    assert (verdict["status"], code) == ("INCONCLUSIVE", 1)


def test_clear_regression_fails(tmp_path: Path, scripted_server: Any) -> None:
    base = scripted_server(_answers(BASE))
    head = scripted_server(_answers(set(range(100)) | set(range(140, 145))))  # b/c = 40/5
    _local(tmp_path, base, "base")
    code, verdict = _local(tmp_path, head, "head", "--baseline", str(tmp_path / "base"))
    assert (verdict["status"], code) == ("FAIL", 1)
    check = _baseline_check(verdict)
    assert check["comparison"]["result"]["discordant"] == [40, 5]
    flips = verdict["comparisons"][0]["flips"]
    assert len(flips) == 45 and flips[0]["direction"] == "regressed"


def test_unchanged_model_passes(tmp_path: Path, scripted_server: Any) -> None:
    server = scripted_server(_answers(BASE))
    _local(tmp_path, server, "base")
    code, verdict = _local(tmp_path, server, "head", "--baseline", str(tmp_path / "base"))
    assert (verdict["status"], code) == ("PASS", 0)
    assert verdict["comparisons"][0]["flips"] == []


def test_compare_command_matches_local_baseline(tmp_path: Path, scripted_server: Any) -> None:
    base = scripted_server(_answers(BASE))
    head = scripted_server(_answers(set(range(100)) | set(range(140, 145))))
    _local(tmp_path, base, "base")
    _local(tmp_path, head, "head")  # no baseline: thresholds only
    code = main(
        [
            "compare",
            str(tmp_path / "base"),
            str(tmp_path / "head"),
            "--output",
            str(tmp_path / "cmp"),
        ]
    )
    verdict = json.loads((tmp_path / "cmp" / "verdict.json").read_text())
    assert (verdict["status"], code) == ("FAIL", 1)
    assert verdict["policy"]["margin"] == 0.05  # the baseline's recorded policy


def test_compare_gates_exactly_as_local_does(tmp_path: Path, scripted_server: Any) -> None:
    """`evalgate compare` on saved runs and `local --baseline` are one decision: same verdict
    file, check for check (they share pipeline.gate_runs)."""
    base = scripted_server(_answers(BASE))
    head = scripted_server(_answers(set(range(100)) | set(range(140, 145))))
    _local(tmp_path, base, "base")
    _, live = _local(tmp_path, head, "head", "--baseline", str(tmp_path / "base"))
    assert main(
        [
            "compare",
            str(tmp_path / "base"),
            str(tmp_path / "head"),
            "--output",
            str(tmp_path / "cmp"),
        ]
    ) == live_code(live)
    saved = json.loads((tmp_path / "cmp" / "verdict.json").read_text())
    assert [(c["kind"], c["status"]) for c in saved["checks"]] == [
        (c["kind"], c["status"]) for c in live["checks"]
    ]


def live_code(verdict: dict) -> int:
    return {"PASS": 0, "FAIL": 1, "INCONCLUSIVE": 0, "ERROR": 3}[verdict["status"]]


def test_compare_reads_a_run_config_without_eval_settings(
    tmp_path: Path, scripted_server: Any
) -> None:
    """A run_config.json written without `benchmark.eval` (older or hand-made runs) is compared
    with the default error budget instead of crashing with a KeyError."""
    server = scripted_server(_answers(BASE))
    _local(tmp_path, server, "base")
    _local(tmp_path, server, "head")
    for cfg in (tmp_path / "head").glob("evals/*/*/run_config.json"):
        data = json.loads(cfg.read_text())
        del data["benchmark"]["eval"]
        cfg.write_text(json.dumps(data))
    code = main(
        [
            "compare",
            str(tmp_path / "base"),
            str(tmp_path / "head"),
            "--output",
            str(tmp_path / "cmp"),
        ]
    )
    verdict = json.loads((tmp_path / "cmp" / "verdict.json").read_text())
    assert (verdict["status"], code) == ("PASS", 0)


def test_changed_scorer_is_not_comparable(tmp_path: Path, scripted_server: Any) -> None:
    server = scripted_server(_answers(BASE))
    _local(tmp_path, server, "base")
    code, verdict = _local(
        tmp_path, server, "head", "--baseline", str(tmp_path / "base"), scorer="contains"
    )
    # Nothing that cannot be compared passes quietly while the base gates: FAIL, reason on top.
    assert verdict["status"] == "FAIL" and code == 1
    (comp,) = verdict["comparisons"]
    assert comp["comparable"] is False and comp["reason"].startswith("scorer differs")
    top = "\n".join((tmp_path / "head" / "scorecard.md").read_text().splitlines()[:8])
    assert "not comparable: scorer differs" in top, top


@pytest.mark.parametrize("command", ["local", "compare"])
def test_no_item_in_common_fails_with_the_reason_on_top(
    tmp_path: Path, scripted_server: Any, command: str
) -> None:
    """Every prompt edited (a space appended): nothing pairs with the baseline. That is a FAIL
    with the reason in the scorecard's first lines, in `local --baseline` and `compare` alike."""
    server = scripted_server(_answers(BASE))
    _local(tmp_path, server, "base")
    config = _config(tmp_path, server.base_url)
    rows = [{"id": f"q{i:03d}", "prompt": f"Q{i} ", "answer": f"A{i}"} for i in range(N)]
    (tmp_path / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    extra = ["--baseline", str(tmp_path / "base")] if command == "local" else []
    code = main(["local", str(config), "--output", str(tmp_path / "head"), *extra],
                environ={"CI": "1"})  # fmt: skip
    out = tmp_path / "head"
    if command == "compare":
        code = main(["compare", str(tmp_path / "base"), str(out), "--output", str(out / "cmp")])
        out = out / "cmp"
    verdict = json.loads((out / "verdict.json").read_text())
    assert (verdict["status"], code) == ("FAIL", 1)
    top = "\n".join((out / "scorecard.md").read_text().splitlines()[:8])
    assert "no item in common" in top, top


def test_changed_prompt_is_compared_and_reported(tmp_path: Path, scripted_server: Any) -> None:
    server = scripted_server(_answers(BASE))
    _local(tmp_path, server, "base")
    _, verdict = _local(
        tmp_path,
        server,
        "head",
        "--baseline",
        str(tmp_path / "base"),
        "--benchmarks.qa.system_prompt=Be brief.",
    )
    (comp,) = verdict["comparisons"]
    assert comp["comparable"] and comp["changes"] == ["prompt"]
    assert "the PR changed: prompt" in (tmp_path / "head" / "scorecard.md").read_text()


def test_compare_rejects_a_folder_without_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["compare", str(tmp_path / "empty"), str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("evalgate: error:") and "no evalgate runs found" in err


def test_quickstart_capitals_unchanged_is_not_a_pass_from_five_groups(
    tmp_path: Path, scripted_server: Any
) -> None:
    # The quickstart's capitals (20 items in 5 groups), the same answers twice: Δ = 0 with no
    # variance, from 5 groups. That is no evidence of non-inferiority at δ = 3 pp.
    import shutil

    from tests.conftest import ROOT

    shutil.copy(ROOT / "examples" / "quickstart" / "capitals.jsonl", tmp_path / "capitals.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "capitals.jsonl").read_text().splitlines()]
    answers = {r["prompt"]: r["answer"] for r in rows[::2]}  # right on half of them

    def script(body: dict[str, Any], n: int) -> str:
        country = body["messages"][-1]["content"]
        return answers.get(country, "I don't know")

    server = scripted_server(script)
    config = write_config(
        tmp_path,
        f"""
models: [{{name: m, backend: openai, base_url: "{server.base_url}", model: org/m}}]
benchmarks: [{{name: capitals, kind: jsonl, path: capitals.jsonl, scorer: {{type: contains}}}}]
""",
    )
    out = tmp_path / "out"
    assert main(["local", str(config), "--output", str(out / "base")], environ={"CI": "1"}) == 0
    main(
        ["local", str(config), "--output", str(out / "head"), "--baseline", str(out / "base")],
        environ={"CI": "1"},
    )
    verdict = json.loads((out / "head" / "verdict.json").read_text())
    check = _baseline_check(verdict)
    result = check["comparison"]["result"]
    assert result["n_clusters"] == 5 and result["delta"] == 0.0
    assert check["status"] == "INCONCLUSIVE" and verdict["status"] == "INCONCLUSIVE"
    assert result["lo"] <= -0.03  # the bound shown agrees with the verdict
    assert "few groups (5 < 20)" in check["reason"]
    scorecard = html.unescape((out / "head" / "scorecard.md").read_text())  # "<" is escaped
    assert "few groups (5 < 20): the non-inferiority bound over groups is wide" in scorecard


def test_compare_counts_a_nan_reward_as_an_error_not_a_crash(
    tmp_path: Path, scripted_server: Any
) -> None:
    base = scripted_server(_answers(BASE))
    head = scripted_server(_answers(BASE))
    _local(tmp_path, base, "base")
    _local(tmp_path, head, "head")
    (results,) = (tmp_path / "head").glob("**/results.jsonl")
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    for row in rows[:3]:  # 3 of 200 rollouts: within the default 5 % error budget
        row["reward"] = float("nan")
        row["metrics"] = {k: float("nan") for k in row["metrics"]}
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["compare", str(tmp_path / "base"), str(tmp_path / "head"), "--output"]
    code = main([*args, str(tmp_path / "cmp")])
    verdict = json.loads((tmp_path / "cmp" / "verdict.json").read_text())
    assert code == 0 and verdict["status"] == "PASS"
    assert _baseline_check(verdict)["comparison"]["result"]["n"] == N - 3
    # Over the budget: ERROR (exit 3), the kind named in one line.
    for row in rows[:20]:
        row["reward"] = float("inf")
        row["metrics"] = {k: float("inf") for k in row["metrics"]}
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main([*args, str(tmp_path / "cmp2")])
    verdict = json.loads((tmp_path / "cmp2" / "verdict.json").read_text())
    assert code == 3 and verdict["status"] == "ERROR"
    assert any("non-finite score" in r for r in verdict["reasons"])


def test_an_edited_item_is_never_paired_with_its_old_self(
    tmp_path: Path, scripted_server: Any
) -> None:
    """Items pair on (id, content hash): a PR that rewrites the answers of the 26 items its model
    fails, to what the model says, gains nothing from them (they are counted as changed)."""
    server = scripted_server(_answers(HEAD_26_18 - set(range(140, 158))))
    _local(tmp_path, server, "base")
    config = _config(tmp_path, server.base_url)
    rows = [
        {"id": f"q{i:03d}", "prompt": f"Q{i}", "answer": "wrong" if 114 <= i < 140 else f"A{i}"}
        for i in range(N)
    ]
    (tmp_path / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    main(
        ["local", str(config), "--output", str(tmp_path / "head"), "--baseline",
         str(tmp_path / "base")],
        environ={"CI": "1"},
    )  # fmt: skip
    verdict = json.loads((tmp_path / "head" / "verdict.json").read_text())
    (comp,) = verdict["comparisons"]
    assert comp["n_changed"] == 26
    assert comp["n_paired"] == N - 26

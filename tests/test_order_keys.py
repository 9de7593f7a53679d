"""The order a run's items are read in is fixed by a key the candidate can neither know nor choose.

Graded PASS bounds are a betting process over the items in one order, valid by Ville's
inequality only when that order does not depend on the scores. Issue 35: a fixed run's order
was public (sha256("0:" + id)), so a PR that knew it kept the base's answers on the first 70 %
and failed the last 30 % (k = 4, n = 500) PASSed at Δ̂ = −15 pp; a sequential run's key was the
candidate's own `sampling.seed`, so a PR could try 20 seeds and keep one that PASSed. Now the
gate draws the key (a fixed run's after every output is recorded, a sequential run's when it
starts) and records it in the run, where `evalgate compare` reads it back (docs/gate.md, "The
order of the items").
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalgate import stats
from evalgate.cli import main
from evalgate.compare.paired import compare_metric
from tests.conftest import write_config

ALPHA = 0.05
MARGIN = 0.03


# --- the attack of the issue, end to end --------------------------------------------------

N_ATTACK = 500
IDS = [f"q{i:03d}" for i in range(N_ATTACK)]


def _right(i: int, rollout: int) -> bool:
    """The base model: item i's rollout is right with a fixed latent rate (a seeded hash)."""
    rate = 1.0 / (1.0 + np.exp(-(1.6 + 2.8 * np.random.default_rng(i).standard_normal())))
    draw = int.from_bytes(hashlib.sha256(f"{i}/{rollout}".encode()).digest()[:8], "big")
    return draw / 2**64 < rate


def _base(body: dict[str, Any], n: int) -> str:
    i = int(body["messages"][-1]["content"].removeprefix("Q"))
    return f"A{i}" if _right(i, int(body["seed"])) else "wrong"


def _adversary(tail: float) -> Any:
    """The PR's model, written with the library and the base run in hand: it computes the order
    it expects the gate to read the items in (the public one every run used), keeps the base's
    answers on the first items of it and fails every rollout of the last ``tail`` of them."""
    expected = stats.item_order(IDS, 0)
    doomed = set(expected[round((1.0 - tail) * len(expected)) :])

    def script(body: dict[str, Any], n: int) -> str:
        i = int(body["messages"][-1]["content"].removeprefix("Q"))
        return "wrong" if f"q{i:03d}" in doomed else _base(body, n)

    return script


def _config(tmp_path: Path, url: str, extra: str = "") -> Path:
    rows = [{"id": f"q{i:03d}", "prompt": f"Q{i}", "answer": f"A{i}"} for i in range(N_ATTACK)]
    (tmp_path / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return write_config(
        tmp_path,
        f"""
models: [{{name: m, backend: openai, base_url: "{url}", model: org/m}}]
benchmarks: [{{name: qa, kind: jsonl, path: qa.jsonl}}]
eval: {{rollouts: 4, max_concurrent: 16{extra}}}
gate: {{margin: {MARGIN}}}
""",
    )


def _local(tmp_path: Path, config: Path, out: str, *extra: str) -> tuple[int, dict]:
    code = main(
        ["local", str(config), "--output", str(tmp_path / out), "--no-cache", *extra],
        environ={"CI": "1"},
    )
    return code, json.loads((tmp_path / out / "verdict.json").read_text())


def _metadata(out: Path) -> Path:
    (path,) = out.glob("evals/*/*/metadata.json")
    return path


@pytest.mark.slow
def test_a_pr_that_breaks_the_tail_of_the_public_order_does_not_pass(
    tmp_path: Path, scripted_server: Any
) -> None:
    # Before: PASS, exit 0, at Δ̂ = −15 pp (the bound clamped just above −δ). The adversary can
    # still compute the public order, but the gate no longer reads the items in it.
    base = scripted_server(_base)
    assert _local(tmp_path, _config(tmp_path, base.base_url), "base")[0] == 0
    head = scripted_server(_adversary(0.30))
    config = _config(tmp_path, head.base_url)
    code, verdict = _local(tmp_path, config, "head", "--baseline", str(tmp_path / "base"))
    (row,) = verdict["comparisons"][0]["metrics"]
    result = row["result"]
    assert result["delta"] < -0.10
    assert (verdict["status"], code) == ("FAIL", 1), (row["status"], result)
    assert result["lo"] <= result["delta"] <= result["hi"]
    # The run records the key its items were read in: a fresh one, drawn by the gate.
    meta = json.loads(_metadata(tmp_path / "head").read_text())
    assert re.fullmatch(r"[0-9a-f]{64}", meta["order_key"])
    base_meta = json.loads(_metadata(tmp_path / "base").read_text())
    assert base_meta["order_key"] != meta["order_key"]
    # `evalgate compare` reads the run back in the recorded order: the very same row.
    code = main(
        ["compare", str(tmp_path / "base"), str(tmp_path / "head"), "--output",
         str(tmp_path / "cmp")],
        environ={"CI": "1"},
    )  # fmt: skip
    again = json.loads((tmp_path / "cmp" / "verdict.json").read_text())
    assert code == 1 and again["comparisons"][0]["metrics"] == verdict["comparisons"][0]["metrics"]


# --- order-aware breaks at the margin: what the order buys ---------------------------------


def _tail_breaks(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """k = 4, the PR replays the base's rollouts and fails every rollout of the last items of
    the public order, as many as put the population Δ at −δ; (base, head) by item id."""
    p = 1.0 / (1.0 + np.exp(-(1.6 + 2.8 * rng.standard_normal(n))))
    base = (rng.random((n, 4)) < p[:, None]).mean(axis=1)
    broken = round(MARGIN * n / 0.70)  # E[p] ≈ 0.70: Δ = −δ on average
    doomed = {int(i[1:]) for i in stats.item_order([f"q{i:03d}" for i in range(n)], 0)[-broken:]}
    head = np.array([0.0 if i in doomed else base[i] for i in range(n)])
    return base, head


def _status(base: np.ndarray, head: np.ndarray, key: Any) -> str:
    """The status of the gate reading the items in the order of ``key``, as compare_runs does."""
    n = base.size
    ids = stats.item_order([f"q{i:03d}" for i in range(n)], key)
    at = [int(i[1:]) for i in ids]
    mc = compare_metric("accuracy", base[at], head[at], clusters=None, margin=MARGIN,
                        alpha=ALPHA, horizon=n, n_resamples=500, with_mde=False)  # fmt: skip
    return mc.status


def test_order_aware_breaks_at_the_margin_pass_at_most_alpha_with_the_gates_key() -> None:
    # The adversary breaks the tail of the order it can compute; the gate reads in the order of
    # a key drawn where the adversary cannot see it (here: bytes of the test's generator, which
    # the PR's data never saw). Read in the public order the same PRs PASS far above α.
    rng = np.random.default_rng(2035)
    runs, public, keyed = 200, 0, 0
    for _ in range(runs):
        base, head = _tail_breaks(rng, 200)
        public += _status(base, head, 0) == "PASS"
        keyed += _status(base, head, stats.OrderKey(rng.bytes(32))) == "PASS"
    assert public / runs > 0.25, public  # the attack is real on the public order
    assert keyed / runs <= ALPHA + 3 * (ALPHA * (1 - ALPHA) / runs) ** 0.5, keyed


# --- the key itself --------------------------------------------------------------------------


def test_a_drawn_key_orders_items_by_a_keyed_hash_and_round_trips() -> None:
    key = stats.OrderKey.draw()
    assert not key.public and re.fullmatch(r"[0-9a-f]{64}", key.record())
    assert stats.OrderKey.parse(key.record()) == key
    ids = [f"item-{i}" for i in range(60)]
    order = stats.item_order(ids, key)
    assert sorted(order) == sorted(ids) and order != stats.item_order(ids, 0)
    assert order != stats.item_order(ids, stats.OrderKey.draw())  # 1/60! to collide
    kept = [i for i in order if not i.endswith("7")]  # dropping items never reorders the rest
    assert stats.item_order(reversed(kept), key) == kept
    # The legacy public order is unchanged, bit for bit: old runs read as they always were.
    assert stats.item_order(ids, 3) == sorted(
        ids, key=lambda i: hashlib.sha256(f"3:{i}".encode()).digest()
    )
    assert stats.item_order(ids, stats.OrderKey.legacy(3)) == stats.item_order(ids, 3)


@pytest.mark.parametrize("text", ["", "00", "g" * 64, "A" * 64, 7])
def test_a_malformed_recorded_key_is_refused(text: Any) -> None:
    with pytest.raises(ValueError):
        stats.OrderKey.parse(text)


# --- sequential runs: the key is the exam's, not the candidate's seed ------------------------

N_SEQ = 400


def _seq_config(tmp_path: Path, url: str) -> Path:
    rows = [{"id": f"q{i:03d}", "prompt": f"Q{i}", "answer": f"A{i}"} for i in range(N_SEQ)]
    (tmp_path / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return write_config(
        tmp_path,
        f"""
models: [{{name: m, backend: openai, base_url: "{url}", model: org/m}}]
benchmarks: [{{name: qa, kind: jsonl, path: qa.jsonl}}]
eval: {{max_concurrent: 16}}
""",
    )


def _unchanged(body: dict[str, Any], n: int) -> str:
    i = int(body["messages"][-1]["content"].removeprefix("Q"))
    return "wrong" if i % 10 == 0 else f"A{i}"


def _first_look(server: Any, before: int) -> set[str]:
    """The items the first look asked for: the looks run one after the other, so the first
    N/4 requests of the run are the first look's."""
    asked = server.requests[before : before + N_SEQ // 4]
    return {f"q{int(b['messages'][-1]['content'][1:]):03d}" for b in asked}


def test_the_candidates_seed_does_not_choose_a_sequential_runs_order(
    tmp_path: Path, scripted_server: Any
) -> None:
    # Before: the order was sha256(f"{sampling.seed}:{id}"), so a PR could simulate the looks
    # for seeds 0–19 with the library and submit the one that PASSed (false PASS 0.17 at
    # n = 200). Now the first look's items are not the seed's, and the same seed twice gives
    # two orders: the key is the gate's, drawn when the run starts and recorded in the plan.
    server = scripted_server(_unchanged)
    config = _seq_config(tmp_path, server.base_url)
    assert _local(tmp_path, config, "base")[0] == 0
    ids = [f"q{i:03d}" for i in range(N_SEQ)]
    looks, keys = [], []
    for attempt, seed in enumerate((7, 7, 0)):
        before = len(server.requests)
        out = f"head{attempt}"
        code, _ = _local(tmp_path, config, out, "--baseline", str(tmp_path / "base"),
                         "--eval.sequential=true", f"--sampling.seed={seed}")  # fmt: skip
        assert code == 0
        first = _first_look(server, before)
        assert first != set(stats.item_order(ids, seed)[: N_SEQ // 4])
        looks.append(first)
        (cfg,) = (tmp_path / out).glob("evals/*/*/run_config.json")
        plan = json.loads(cfg.read_text())["sequential"]
        assert "seed" not in plan and re.fullmatch(r"[0-9a-f]{64}", plan["order_key"])
        assert json.loads(_metadata(tmp_path / out).read_text())["order_key"] == plan["order_key"]
        keys.append(plan["order_key"])
        # The first look's items are the first quarter of the recorded key's order.
        assert first == set(stats.item_order(ids, stats.OrderKey.parse(plan["order_key"]))[:100])
    assert looks[0] != looks[1] and len(set(keys)) == 3


# --- runs written before keys: read in the public order, and said so -------------------------


def test_a_run_without_a_recorded_key_is_read_in_the_legacy_order_and_says_so(
    tmp_path: Path, scripted_server: Any
) -> None:
    server = scripted_server(_unchanged)
    config = _seq_config(tmp_path, server.base_url)
    assert _local(tmp_path, config, "base")[0] == 0
    assert _local(tmp_path, config, "head", "--baseline", str(tmp_path / "base"))[0] == 0
    meta_path = _metadata(tmp_path / "head")
    meta = json.loads(meta_path.read_text())
    del meta["order_key"]  # as an older evalgate wrote it
    meta_path.write_text(json.dumps(meta))
    argv = ["compare", str(tmp_path / "base"), str(tmp_path / "head"), "--output"]
    assert main([*argv, str(tmp_path / "cmp")], environ={"CI": "1"}) == 0
    verdict = json.loads((tmp_path / "cmp" / "verdict.json").read_text())
    (row,) = verdict["comparisons"][0]["metrics"]
    assert "public order" in row["reason"] and "no order key" in row["reason"]
    assert "public order" in (tmp_path / "cmp" / "scorecard.md").read_text()
    # A key that is not one the gate wrote is refused in one line naming the file and field.
    meta["order_key"] = "not-a-key"
    meta_path.write_text(json.dumps(meta))
    assert main([*argv, str(tmp_path / "bad")], environ={"CI": "1"}) == 2


def test_a_fixed_runs_key_is_drawn_after_its_outputs_and_a_sequential_runs_before(
    tmp_path: Path, scripted_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # When the gate draws each key, counted in the model's requests: a fixed run's once every
    # output is in (nothing the model sent can depend on it), a sequential run's before the
    # first request (its looks run in it). Both end up in the run's metadata.json.
    server = scripted_server(_unchanged)
    config = _seq_config(tmp_path, server.base_url)
    seen: list[int] = []
    draw = stats.OrderKey.draw.__func__  # type: ignore[attr-defined]

    def counted(cls: Any) -> Any:
        seen.append(len(server.requests))
        return draw(cls)

    monkeypatch.setattr(stats.OrderKey, "draw", classmethod(counted))
    assert _local(tmp_path, config, "base")[0] == 0
    assert seen == [N_SEQ]  # after all 400 outputs
    args = ("--baseline", str(tmp_path / "base"), "--eval.sequential=true")
    assert _local(tmp_path, config, "head", *args)[0] == 0
    assert seen == [N_SEQ, N_SEQ]  # before the sequential run's first request
    assert len(server.requests) > N_SEQ


def test_older_runs_keep_the_order_they_ran_in(tmp_path: Path) -> None:
    # A sequential run written before keys recorded its seed (metadata and look plan): compare
    # reads it, and a resume goes on, in that seed's public order; a run with a key, in the key's.
    from evalgate.compare.paired import order_of
    from evalgate.run.manifest import recorded_looks_key as _recorded_looks_key
    from evalgate.run.rundir import LoadedRun, RunDir
    from evalgate.run.runfiles import RunConfig, RunMetadata

    named = {"model": {"name": "m"}, "benchmark": {"name": "qa"}}  # what every run records

    def loaded(config: dict[str, Any], metadata: dict[str, Any]) -> LoadedRun:
        return LoadedRun(
            tmp_path,
            RunConfig.model_validate({**named, **config}),
            None,  # type: ignore[arg-type]
            RunMetadata.model_validate(metadata),
        )

    seq = {"look": 2, "looks": 4, "items_total": 300, "seed": 7}
    old = loaded({"sequential": {"seed": 7}}, {"sequential": seq})
    assert order_of(old) == (stats.OrderKey.legacy(7), 300)
    plain = loaded({}, {})
    assert order_of(plain) == (stats.OrderKey.legacy(0), None)
    key = stats.OrderKey.draw()
    new = loaded({}, {"order_key": key.record()})
    assert order_of(new) == (key, None)
    (tmp_path / "run_config.json").write_text(json.dumps({**named, "sequential": {"seed": 7}}))
    assert _recorded_looks_key(RunDir(tmp_path)) == stats.OrderKey.legacy(7)
    plan = {**named, "sequential": {"order_key": key.record()}}
    (tmp_path / "run_config.json").write_text(json.dumps(plan))
    assert _recorded_looks_key(RunDir(tmp_path)) == key

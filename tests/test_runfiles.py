"""run_config.json and metadata.json as typed models (evalgate.run.runfiles): what evalgate writes
reads back into the models and writes again byte for byte, the loaded run keeps them, and a run
folder in the format an older evalgate wrote (before order keys, the recorded eval settings,
chat templates, costs, request counts...) still loads and compares, as runs and baselines kept
in result stores must."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from evalgate.errors import UsageError
from tests.conftest import answer_arith, write_config

EVALS = "benchmarks: [{name: a, kind: arith, size: 6}]\ngate: {margin: 0.05}\n"


def _local(tmp_path: Path, url: str, out: str, *extra: str) -> int:
    config = write_config(
        tmp_path,
        f"models: [{{name: m, backend: openai, base_url: '{url}', model: org/m}}]\n{EVALS}",
    )
    argv = ["local", str(config), "--output", str(tmp_path / out), *extra]
    return main(argv, environ={"CI": "1"})


@pytest.fixture
def two_runs(tmp_path: Path, scripted_server: Any) -> tuple[Path, Path]:
    """A baseline run and a run compared with it (its run_config.json records the baseline)."""
    url = scripted_server(answer_arith).base_url
    assert _local(tmp_path, url, "base") == 0
    assert _local(tmp_path, url, "head", "--baseline", str(tmp_path / "base")) == 0
    (base,) = (tmp_path / "base" / "evals").glob("*/*")
    (head,) = (tmp_path / "head" / "evals").glob("*/*")
    return base, head


def test_the_files_read_back_into_the_models_and_write_again_byte_for_byte(
    tmp_path: Path, two_runs: tuple[Path, Path]
) -> None:
    from evalgate.run.runfiles import (
        read_metadata,
        read_run_config,
        write_metadata,
        write_run_config,
    )

    for run in two_runs:
        copy = tmp_path / "copy" / run.name
        copy.mkdir(parents=True)
        write_run_config(copy, read_run_config(run))
        write_metadata(copy, read_metadata(run))
        for name in ("run_config.json", "metadata.json"):
            assert (copy / name).read_bytes() == (run / name).read_bytes(), name


def test_the_loaded_run_keeps_the_typed_files(two_runs: tuple[Path, Path]) -> None:
    from evalgate.run.rundir import load_run
    from evalgate.run.runfiles import RunConfig, RunMetadata

    base, head = two_runs
    run = load_run(head)
    assert isinstance(run.config, RunConfig) and isinstance(run.metadata, RunMetadata)
    assert (run.config.model.name, run.config.benchmark.name, run.config.rollouts) == ("m", "a", 1)
    assert run.config.baseline is not None and run.config.baseline.run_id == base.name
    assert run.config.baseline.relative_path is not None
    assert (head / run.config.baseline.relative_path).resolve() == base.resolve()
    assert run.metadata.complete and run.metadata.num_examples == 6
    assert run.metadata.order_key is not None and len(run.metadata.order_key) == 64


def _as_an_older_evalgate_wrote_it(run: Path) -> None:
    """Rewrite a run folder in the format of an evalgate from before order keys, recorded eval
    settings, suites, chat templates, costs and request counts: its keys only."""
    cfg = json.loads((run / "run_config.json").read_text())
    for key in ("chat_template", "suite", "evalgate_version", "endpoint", "budget", "baseline"):
        cfg.pop(key, None)
    del cfg["benchmark"]["eval"]
    for key in ("chat_template", "agent"):
        del cfg["fingerprint"]["subject"][key]
    cfg["sequential"] = {"metric": "accuracy", "looks": 4, "seed": 7}  # a look plan's old form
    (run / "run_config.json").write_text(json.dumps(cfg))
    meta = json.loads((run / "metadata.json").read_text())
    keep = ("benchmark", "model", "model_id", "num_examples", "rollouts_per_example",
            "time_ms", "avg_reward", "avg_metrics", "pass_at_k", "errors", "usage",
            "complete")  # fmt: skip
    meta = {k: meta[k] for k in keep}
    (run / "metadata.json").write_text(json.dumps(meta))


def test_a_run_in_an_older_format_still_loads_and_compares(
    tmp_path: Path, two_runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from evalgate import stats
    from evalgate.compare.paired import order_of
    from evalgate.run.rundir import load_run

    base, _ = two_runs
    old = tmp_path / "old" / "evals" / base.parent.name / base.name
    shutil.copytree(base, old)
    _as_an_older_evalgate_wrote_it(old)
    run = load_run(old)
    assert run.config.rollouts is None and run.rollouts == 1  # from its metadata
    assert run.metadata.order_key is None and run.metadata.sequential is None
    assert order_of(run) == (stats.OrderKey.legacy(7), None)  # its look plan's public order
    verdicts = []
    for baseline in (base.parent.parent.parent, tmp_path / "old"):  # as written, and older
        capsys.readouterr()
        code = main(["compare", str(baseline), str(tmp_path / "head"),
                     "--output", str(tmp_path / "cmp")])  # fmt: skip
        assert code != 2, capsys.readouterr().err
        saved = json.loads((tmp_path / "cmp" / "verdict.json").read_text())
        verdicts.append((code, saved["status"], saved["exit_code"]))
    assert verdicts[0] == verdicts[1]  # the same comparison of the same rollouts


def test_the_smallest_run_folder_evalgate_ever_wrote_loads(tmp_path: Path) -> None:
    """A run_config.json naming only its model and benchmark, a metadata.json saying it
    finished: every other field has its default."""
    from evalgate.run.rundir import load_run

    (tmp_path / "run_config.json").write_text(
        '{"model": {"name": "m"}, "benchmark": {"name": "b"}}'
    )
    (tmp_path / "results.jsonl").write_text('{"example_id": "q1", "reward": 1.0}\n')
    (tmp_path / "metadata.json").write_text('{"complete": true}')
    run = load_run(tmp_path)
    assert (run.model, run.benchmark, run.rollouts) == ("m", "b", 1)
    assert run.config.fingerprint.measurement is None and run.metadata.time_ms == 0.0


def test_the_trend_reads_stored_scores_from_the_typed_metadata(
    tmp_path: Path, two_runs: tuple[Path, Path]
) -> None:
    """The Action's trend chart and report.html's plot read each stored run's score from its
    RunMetadata (``avg_reward``, else its first metric); a stored run whose metadata.json is
    not one evalgate wrote is left off the chart, never a crash."""
    from types import SimpleNamespace

    from evalgate.action.trend import trend_section
    from evalgate.report.trend import trend_points
    from evalgate.store.base import RunKey
    from evalgate.store.local_dir import LocalDirStore

    verdict = SimpleNamespace(runs=[SimpleNamespace(model="m", benchmark="a")])

    base, _ = two_runs
    store = LocalDirStore(tmp_path / "store")
    for commit in ("a" * 40, "b" * 40, "c" * 40):
        store.save(RunKey(commit=commit, name="a--m"), base)
    chart = trend_section(trend_points(store, verdict))
    assert "line [1.000, 1.000, 1.000]" in chart
    (damaged,) = [s for s in store.history("a--m") if s.key.commit == "b" * 40]
    (damaged.path / "metadata.json").write_text('{"avg_reward": "high"}')
    assert "line [1.000, 1.000]" in trend_section(trend_points(store, verdict))


def test_run_config_is_the_document_of_its_sections_validated_apart(tmp_path: Path) -> None:
    """run_config.json is validated as one document (its sections' validators are not built
    apart from the file's): the same object, key order and bytes as validating each section
    on its own, with k = 2, an error budget, a gate, a budget and an override in it."""
    from evalgate.config.load import load_config
    from evalgate.run import manifest
    from evalgate.run.runfiles import BenchmarkEntry, Fingerprint, ModelEntry, RunConfig
    from evalgate.serve.base import Endpoint
    from evalgate.suites import build_suite

    path = write_config(
        tmp_path,
        """
models:
  - {name: m, backend: openai, base_url: "http://127.0.0.1:9/v1", model: org/m}
benchmarks:
  - name: arith
    size: 30
    system_prompt: Answer with a number.
    eval: {num_examples: 20, rollouts: 2, max_error_rate: 0.2}
gate: {margin: 0.04}
budget: {tokens: 100000}
""",
    )
    config = load_config(path, ["benchmarks.arith.sampling.temperature=0.5"])
    model, bench = config.models[0], config.benchmarks[0]
    suite = build_suite(bench)
    endpoint = Endpoint(base_url=model.base_url, model=model.model, model_id="org/m")

    class Server:
        chat_template = None

    got = manifest.run_config(config, model, bench, endpoint, suite, Server())  # type: ignore[arg-type]
    print_ = manifest.fingerprint(bench, model, "org/m", suite.items, variant=suite.variant)
    apart = RunConfig(
        fingerprint=Fingerprint.model_validate(print_),
        chat_template=None,
        suite=suite.name,
        evalgate_version=got.evalgate_version,
        config_path=str(config.path),
        model=ModelEntry.model_validate(model.model_dump(mode="json")),
        endpoint={"base_url": endpoint.base_url, "model": endpoint.model},
        model_id="org/m",
        benchmark=BenchmarkEntry.model_validate(bench.model_dump(mode="json")),
        gate=config.gate.model_dump(mode="json"),
        budget=config.budget.model_dump(mode="json"),
    )
    assert got == apart
    assert json.dumps(got.as_written()) == json.dumps(apart.as_written())
    assert got.benchmark.eval is not None and got.benchmark.eval.rollouts == 2
    assert got.fingerprint.dataset is not None and got.fingerprint.dataset.items == 20


def test_run_config_read_again_unchanged_is_not_validated_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's last stretch reads its run_config.json twice (the gate's error budget, then
    report.html): the second read of the same text returns the model the first validated; a
    file changed in between (same size, the same instant) is validated again."""
    from evalgate.run import runfiles

    validated: list[object] = []
    validate = runfiles.RunConfig.model_validate

    def counted(data: Any, *args: Any, **kwargs: Any) -> Any:
        validated.append(data)
        return validate(data, *args, **kwargs)

    monkeypatch.setattr(runfiles.RunConfig, "model_validate", counted)
    path = tmp_path / "run_config.json"
    path.write_text('{"model": {"name": "m"}, "benchmark": {"name": "b", "eval": {"rollouts": 2}}}')
    first = runfiles.read_run_config(tmp_path)
    assert runfiles.read_run_config(tmp_path) is first and len(validated) == 1
    path.write_text('{"model": {"name": "m"}, "benchmark": {"name": "b", "eval": {"rollouts": 3}}}')
    again = runfiles.read_run_config(tmp_path)
    assert len(validated) == 2 and again.rollouts == 3 and first.rollouts == 2
    path.write_text('{"model": {"name": "m"}, "benchmark": {"name": "b", "eval": {"rollouts": 0}}}')
    with pytest.raises(UsageError, match=r"run_config\.json"):  # refused again, not the held one
        runfiles.read_run_config(tmp_path)
    path.write_text("[1]")
    with pytest.raises(UsageError, match="not a JSON object"):
        runfiles.read_run_config(tmp_path)

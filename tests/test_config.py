"""evals.yaml: layering, overrides, schema, and the malformed-file corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalgate.cli import main
from evalgate.config.load import load_config
from evalgate.errors import ConfigError
from tests.conftest import ROOT, write_config

MALFORMED = sorted((Path(__file__).parent / "data" / "malformed").glob("*.yaml"))


def test_corpus_is_large_enough() -> None:
    assert len(MALFORMED) >= 20


@pytest.mark.parametrize("path", MALFORMED, ids=lambda p: p.stem)
def test_malformed_file_gives_one_line_error(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = path.read_text(encoding="utf-8").splitlines()[0].removeprefix("# expect: ")
    code = main(["validate", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"evalgate: error: {path}"), lines[0]
    assert expected in lines[0]


def test_example_validates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(ROOT / "examples/quickstart/evals.yaml")]) == 0
    assert "benchmark capitals (jsonl)" in capsys.readouterr().out


def test_layers_registry_then_globals_then_entry_then_cli(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        "benchmarks:\n"
        "  - name: arith\n"
        "    sampling: {max_tokens: 9}\n"
        "sampling: {temperature: 0.3, max_tokens: 99}\n"
        "eval: {rollouts: 2}\n",
    )
    (arith,) = load_config(path).benchmarks
    assert arith.eval.num_examples == 50  # from benchmarks/arith.yaml
    assert arith.system_prompt.startswith("You are a calculator")  # registry
    assert arith.sampling.temperature == 0.3  # evals.yaml global beats the registry
    assert arith.sampling.max_tokens == 9  # the entry beats the global
    assert arith.eval.rollouts == 2
    (arith,) = load_config(
        path, ["sampling.max_tokens=5", "benchmarks.arith.eval.num_examples=3"]
    ).benchmarks
    assert arith.sampling.max_tokens == 5  # the command line beats everything
    assert arith.eval.num_examples == 3
    assert arith.sampling.temperature == 0.3  # untouched layers survive


def test_user_benchmark_dir_shadows_builtin(tmp_path: Path) -> None:
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "arith.yaml").write_text("kind: arith\nsize: 7\n")
    path = write_config(tmp_path, "benchmarks: [arith]\n")
    (arith,) = load_config(path).benchmarks
    assert arith.size == 7


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "sampling.temprature=1",
            "--sampling.temprature: unknown field; did you mean 'temperature'?; valid fields",
        ),
        ("eval.num_examples=many", "eval.num_examples: must be a valid integer"),
        ("benchmarks.nope.eval.rollouts=2", "--benchmarks.nope: no such benchmark (have: arith)"),
        ("benchmarks.arith.evl.rollouts=2", "--benchmarks.arith.evl: unknown field; did you mean"),
        ("models.smollm2.n_ctx=9", "models[0].n_ctx: must be greater than or equal to 256"),
        ("nodots", "overrides look like --section.field=value"),
    ],
)
def test_bad_override(tmp_path: Path, override: str, message: str) -> None:
    path = write_config(tmp_path, "benchmarks: [arith]\n")
    with pytest.raises(ConfigError, match="command line") as info:
        load_config(path, [override])
    assert message in str(info.value)


def test_cli_override_forms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, "benchmarks: [arith]\n")
    assert (
        main(["validate", str(path), "--eval.num_examples", "4", "--sampling.temperature=0.7"]) == 0
    )
    assert "4 items × 1 rollouts, temperature 0.7" in capsys.readouterr().out
    assert main(["validate", str(path), "--eval.num_examples"]) == 2
    assert "needs a value" in capsys.readouterr().err


def test_dataset_path_is_relative_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "evals.yaml"
    path.write_text("benchmarks:\n  - {name: mine, kind: jsonl, path: data/x.jsonl}\n")
    (bench,) = load_config(path).benchmarks
    assert Path(bench.path) == (tmp_path / "sub" / "data" / "x.jsonl").resolve()


def test_schema_is_json_schema_with_descriptions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "evalgate evals.yaml"
    assert schema["additionalProperties"] is False
    sampling = schema["$defs"]["Sampling"]["properties"]["temperature"]
    assert "description" in sampling and sampling["maximum"] == 2.0


def test_schema_file_in_repo_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    """evals.schema.json (for editors) must match `evalgate schema`; regenerate if this fails."""
    main(["schema"])
    assert json.loads((ROOT / "evals.schema.json").read_text()) == json.loads(
        capsys.readouterr().out
    )


def test_config_is_frozen(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, "benchmarks: [arith]\n"))
    with pytest.raises(Exception, match="frozen"):
        config.benchmarks[0].sampling.temperature = 1.0  # type: ignore[misc]

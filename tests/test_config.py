"""evals.yaml: layering, overrides, schema, and the malformed-file corpus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.cli import main
from evalgate.config.load import load_config
from evalgate.errors import ConfigError
from tests.conftest import ROOT, write_config

MALFORMED = sorted((Path(__file__).parent / "data" / "malformed").glob("*.yaml"))
VALID = sorted((Path(__file__).parent / "data" / "valid").glob("*.yaml"))


def _header(path: Path) -> dict[str, str]:
    """``# expect: …`` (a substring of the error), ``# schema: n/a (why)``, ``# secret: …``."""
    out = {}
    for line in path.read_bytes().decode("utf-8", "replace").splitlines():
        if not line.startswith("# ") or ": " not in line:
            break
        key, _, value = line[2:].partition(": ")
        out[key] = value
    return out


def test_corpus_is_large_enough() -> None:
    assert len(MALFORMED) >= 60
    assert len(VALID) >= 3


@pytest.mark.parametrize("path", MALFORMED, ids=lambda p: p.stem)
def test_malformed_file_gives_one_line_error(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header = _header(path)
    code = main(["validate", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"evalgate: error: {path}"), lines[0]
    assert header["expect"] in lines[0]
    assert "should match pattern" not in lines[0]  # a raw regular expression helps nobody
    assert len(lines[0]) < 1000, "a long value is shortened, not echoed whole"
    if "secret" in header:
        assert header["secret"] not in err


def test_every_spec_pattern_is_said_in_words() -> None:
    """A field's regular expression is explained in words (the corpus catches one field; this
    catches the next field someone adds with a pattern)."""
    from evalgate.config._wording import PATTERNS as _PATTERNS

    schema = json.loads((ROOT / "evals.schema.json").read_text(encoding="utf-8"))
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                found.add(node["pattern"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    assert found and found <= set(_PATTERNS), sorted(found - set(_PATTERNS))


def _schema_validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "evals.schema.json").read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def _beyond_schema(path: Path) -> bool:
    return _header(path).get("schema", "").startswith("n/a")


@pytest.mark.parametrize(
    "path", [p for p in MALFORMED if not _beyond_schema(p)], ids=lambda p: p.stem
)
def test_schema_rejects_what_validate_rejects(path: Path) -> None:
    """An editor using evals.schema.json flags every mistake a JSON Schema can express; the
    corpus marks the others (`# schema: n/a (why)`: YAML syntax, files, the registry…)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    errors = list(_schema_validator().iter_errors(data))
    assert errors, f"{path.name}: the schema accepts what validate rejects"


@pytest.mark.parametrize("path", [p for p in MALFORMED if _beyond_schema(p)], ids=lambda p: p.stem)
def test_cases_marked_beyond_the_schema_are(path: Path) -> None:
    """`# schema: n/a` is a claim, checked: the file is not YAML a schema could read, or the
    schema accepts it (only validate's own checks catch it). A case the schema starts to catch
    loses its mark, so the test above covers it."""
    try:
        data = yaml.safe_load(path.read_bytes().decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError, ValueError, RecursionError):
        return  # not readable as YAML at all: nothing for an editor's schema to check
    errors = list(_schema_validator().iter_errors(data))
    assert not errors, f"{path.name}: the schema catches it; drop its `# schema: n/a` mark"


def test_schema_covers_most_of_the_corpus() -> None:
    expressible = [p for p in MALFORMED if not _header(p).get("schema", "").startswith("n/a")]
    assert len(expressible) >= 35


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_valid_edge_cases_are_accepted(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err
    data = yaml.safe_load(path.read_text(encoding="utf-8-sig"))
    assert not list(_schema_validator().iter_errors(data))


@pytest.mark.parametrize(
    ("name", "make", "expect"),
    [
        (
            "huge.yaml",
            lambda p: p.write_text("benchmarks: [arith]\n" + "# padding\n" * 5_500_000),
            "at most 2 MB is read",
        ),
        ("loop.yaml", lambda p: p.symlink_to(p), "cannot read file"),
        ("dir.yaml", lambda p: p.mkdir(), "is a directory"),
        ("absent.yaml", lambda p: None, "file not found"),
    ],
)
def test_unreadable_config_is_one_line_and_quick(
    tmp_path: Path, name: str, make: Any, expect: str
) -> None:
    """In a subprocess, with a generous timeout: a hang (alias bomb, 53 MB file) fails here."""
    path = tmp_path / name
    make(path)
    _assert_quick_one_line(path, expect)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le"])
def test_utf16_file_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], encoding: str
) -> None:
    """Notepad's "Unicode" is UTF-16: say so, not "byte 0xff" (with a BOM or without)."""
    path = tmp_path / "evals.yaml"
    path.write_bytes("benchmarks: [arith]\n".encode(encoding))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"evalgate: error: {path}:1: the file is UTF-16; save it as UTF-8"


def test_alias_bomb_does_not_hang() -> None:
    _assert_quick_one_line(
        Path(__file__).parent / "data" / "malformed" / "38_alias_bomb.yaml", "aliases"
    )


def _assert_quick_one_line(path: Path, expect: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "evalgate", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=120,  # not a timing assertion: a hang would otherwise block the suite
        env=env,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expect in lines[0], proc.stderr
    assert lines[0].startswith(f"evalgate: error: {path}")


def test_example_validates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(ROOT / "examples/quickstart/evals.yaml")]) == 0
    assert "benchmark capitals (jsonl)" in capsys.readouterr().out


def test_the_examples_own_commands_are_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    """The commands the quickstart file's header shows (its overrides included) validate: the
    third one's template must read an item field (one that reads none is refused)."""
    import shlex

    path = ROOT / "examples/quickstart/evals.yaml"
    header = [ln.removeprefix("#").strip() for ln in path.read_text().splitlines()]
    joined = " ".join(ln.split("  # ")[0].removesuffix("\\").strip() for ln in header[1:8])
    commands = [c for c in joined.split("python -m evalgate local ")[1:]]
    assert len(commands) == 3
    for command in commands:
        argv = shlex.split(command)
        options = [a for a in argv[1:] if a.startswith("--benchmarks.")]
        assert main(["validate", str(path), *options]) == 0, command
    capsys.readouterr()


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
        ("sampling.stop.0=x", "--sampling.stop.0: set the whole value: --sampling.stop=VALUE"),
        ("benchmarks.arith.size=0", "command line: benchmarks.arith.size: must be greater"),
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


def test_validate_warns_when_the_api_key_variable_is_unset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`local` stops on a missing key before its first request; validate says so (a warning:
    it also runs where a run's secrets are absent by design)."""
    path = write_config(
        tmp_path,
        "models:\n"
        "  - {name: m, backend: openai, base_url: 'http://127.0.0.1:9/v1', "
        "api_key_env: EVALGATE_TEST_KEY}\n"
        "benchmarks: [arith]\n",
    )
    monkeypatch.delenv("EVALGATE_TEST_KEY", raising=False)
    assert main(["validate", str(path)]) == 0
    assert "warning: model m: EVALGATE_TEST_KEY (api_key_env) is not set here" in (
        capsys.readouterr().out
    )
    monkeypatch.setenv("EVALGATE_TEST_KEY", "k")
    assert main(["validate", str(path)]) == 0
    assert "warning" not in capsys.readouterr().out


def test_validate_reads_the_environment_it_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`main(environ=...)` is the environment a command sees: validate checks the key there,
    not in this process's os.environ (the two differ in the Action and in embedding callers)."""
    path = write_config(
        tmp_path,
        "models:\n"
        "  - {name: m, backend: openai, base_url: 'http://127.0.0.1:9/v1', "
        "api_key_env: EVALGATE_TEST_KEY}\n"
        "benchmarks: [arith]\n",
    )
    monkeypatch.delenv("EVALGATE_TEST_KEY", raising=False)
    assert main(["validate", str(path)], environ={"EVALGATE_TEST_KEY": "k"}) == 0
    assert "warning" not in capsys.readouterr().out
    monkeypatch.setenv("EVALGATE_TEST_KEY", "k")
    assert main(["validate", str(path)], environ={}) == 0
    assert "EVALGATE_TEST_KEY (api_key_env) is not set here" in capsys.readouterr().out


def test_validate_warns_when_publishing_has_no_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A push without HF_TOKEN fails only after the whole run; validate says so up front."""
    path = write_config(tmp_path, "benchmarks: [arith]\npublish: {hf_hub: {repo: my-org/runs}}\n")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    assert main(["validate", str(path)]) == 0
    assert "warning: publish.hf_hub: HF_TOKEN is not set here" in capsys.readouterr().out


def test_override_reaches_a_benchmark_whose_name_has_dots(tmp_path: Path) -> None:
    """Names may contain dots (`my.bench`); the longest known name wins over the first key."""
    (tmp_path / "d.jsonl").write_text('{"id": "a", "prompt": "x", "answer": "1"}\n' * 1)
    path = write_config(tmp_path, "benchmarks:\n  - {name: my.bench, kind: jsonl, path: d.jsonl}\n")
    (bench,) = load_config(path, ["benchmarks.my.bench.sampling.max_tokens=7"]).benchmarks
    assert bench.sampling.max_tokens == 7


def test_validate_reads_each_dataset_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The estimate reuses the suites the checks built (a large dataset was read twice)."""
    from evalgate.suites import datasets

    reads: list[str] = []
    real = datasets.file_items
    monkeypatch.setattr(datasets, "file_items", lambda spec: reads.append(spec.name) or real(spec))
    (tmp_path / "d.jsonl").write_text('{"id": "a", "prompt": "x", "answer": "1"}\n')
    path = write_config(tmp_path, "benchmarks:\n  - {name: mine, kind: jsonl, path: d.jsonl}\n")
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err
    assert reads == ["mine"]


def test_dataset_path_expands_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`~/data.jsonl` is the home folder's file, as in a shell (was `<config dir>/~/data.jsonl`)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path = write_config(tmp_path, "benchmarks:\n  - {name: mine, kind: jsonl, path: ~/x.jsonl}\n")
    (bench,) = load_config(path).benchmarks
    assert Path(bench.path) == (tmp_path / "home" / "x.jsonl").resolve()

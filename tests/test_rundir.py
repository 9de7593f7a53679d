"""The run directory read back: one loader, one-line errors (file:line, field), exit 2, before
any eval runs; and nothing that cannot be compared passes quietly.

Every case damages a real run written by `evalgate local` against a scripted server, then feeds
it to the commands that read run directories (`local --baseline`, `compare`, `runs`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from tests.conftest import answer_arith, write_config

TWO = "benchmarks: [{name: a, kind: arith, size: 4}, {name: b, kind: arith, size: 4}]\n"


def _local(tmp_path: Path, url: str, out: str, *extra: str, model: str = "m",
           benchmarks: str = TWO, gate: str = "margin: 0.05") -> int:  # fmt: skip
    config = write_config(
        tmp_path,
        f"models: [{{name: {model}, backend: openai, base_url: '{url}', model: org/m}}]\n"
        f"{benchmarks}gate: {{{gate}}}\n",
    )
    return main(["local", str(config), "--output", str(tmp_path / out), *extra],
                environ={"CI": "1"})  # fmt: skip


@pytest.fixture
def runs(tmp_path: Path, scripted_server: Any) -> Callable[..., int]:
    """A baseline output root `base` (benchmarks a and b); returns a `local` runner."""
    url = scripted_server(answer_arith).base_url
    assert _local(tmp_path, url, "base") == 0

    def run(out: str, *extra: str, **kw: Any) -> int:
        return _local(tmp_path, url, out, *extra, **kw)

    return run


def _run_dir(root: Path, bench: str) -> Path:
    (found,) = (root / "evals").glob(f"{bench}--*/*")
    return found


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def _drop_key(run: Path) -> str:
    lines = _lines(run / "results.jsonl")
    rec = json.loads(lines[1])
    del rec["example_id"]
    lines[1] = json.dumps(rec) + "\n"
    (run / "results.jsonl").write_text("".join(lines))
    return "results.jsonl:2: example_id"


def _not_object(run: Path) -> str:
    lines = _lines(run / "results.jsonl")
    lines[1] = "[1, 2]\n"
    (run / "results.jsonl").write_text("".join(lines))
    return "results.jsonl:2"


def _torn(run: Path) -> str:
    lines = _lines(run / "results.jsonl")
    lines[-1] = lines[-1][: len(lines[-1]) // 2]
    (run / "results.jsonl").write_text("".join(lines))
    return f"results.jsonl:{len(lines)}"


def _not_utf8(run: Path) -> str:
    lines = (run / "results.jsonl").read_bytes().split(b"\n")
    lines[1] = lines[1][:10] + b"\xff\xfe" + lines[1][10:]
    (run / "results.jsonl").write_bytes(b"\n".join(lines))
    return "results.jsonl:2: not UTF-8"


def _no_metadata(run: Path) -> str:
    (run / "metadata.json").unlink()
    return "metadata.json"


def _duplicate(run: Path) -> str:
    lines = _lines(run / "results.jsonl")
    (run / "results.jsonl").write_text("".join([*lines, lines[0]]))
    return f"results.jsonl:{len(lines) + 1}"


def _two_contents(run: Path) -> str:
    """Two items under one id (a second rollout of item 1 with item 2's content)."""
    lines = _lines(run / "results.jsonl")
    first, second = json.loads(lines[0]), json.loads(lines[1])
    second.update(example_id=first["example_id"], rollout=1)
    lines[1] = json.dumps(second) + "\n"
    (run / "results.jsonl").write_text("".join(lines))
    return "results.jsonl:2: item_hash"


def _duplicate_high_rollout(run: Path) -> str:
    """Rollouts from 64 on are tracked apart from the bit masks (run.rundir._Seen): a duplicate
    there is caught too."""
    lines = _lines(run / "results.jsonl")
    rec = json.loads(lines[0])
    rec["rollout"] = 70
    extra = json.dumps(rec) + "\n"
    (run / "results.jsonl").write_text("".join([*lines, extra, extra]))
    cfg = json.loads((run / "run_config.json").read_text())
    cfg["benchmark"]["eval"]["rollouts"] = 71  # else rollout 70 is out of range first
    (run / "run_config.json").write_text(json.dumps(cfg))
    return f"results.jsonl:{len(lines) + 2}: duplicate record"


def _bad_config(run: Path) -> str:
    (run / "run_config.json").write_text("[1, 2]")
    return "run_config.json"


def _no_model(run: Path) -> str:
    cfg = json.loads((run / "run_config.json").read_text())
    del cfg["model"]
    (run / "run_config.json").write_text(json.dumps(cfg))
    return "run_config.json: model"


def _field(name: str, value: Any, where: str | None = None) -> Callable[[Path], str]:
    """A damage: line 2's ``name`` set to ``value`` (evalgate never writes it so); the error
    must name the file, the line and ``where`` (default: the field)."""

    def damage(run: Path) -> str:
        lines = _lines(run / "results.jsonl")
        rec = json.loads(lines[1])
        rec[name] = value
        lines[1] = json.dumps(rec) + "\n"
        (run / "results.jsonl").write_text("".join(lines))
        return f"results.jsonl:2: {where or name}"

    return damage


def _no_run_config(run: Path) -> str:
    """The run folder lost its run_config.json (a partial copy, a hand edit): it was left out
    of the baseline silently, so a PR that FAILs against it got INCONCLUSIVE."""
    (run / "run_config.json").unlink()
    return f"{run.name}/run_config.json"


def _json_field(name: str, path: str, value: Any) -> Callable[[Path], str]:
    """A damage: the run file ``name``'s field at ``path`` (dotted) set to ``value``, which
    evalgate never writes; the error must name the file and the field. These fields were read
    with ``.get()`` chains that let a damaged value through (or crash deep in the comparison)."""

    def damage(run: Path) -> str:
        data = json.loads((run / name).read_text())
        *parents, last = path.split(".")
        at = data
        for key in parents:  # a section the run left null (no looks) is made
            if not isinstance(at.get(key), dict):
                at[key] = {}
            at = at[key]
        at[last] = value
        (run / name).write_text(json.dumps(data))
        return f"{name}: {path}"

    return damage


DAMAGES = {
    "recorded k a string": _json_field("run_config.json", "benchmark.eval.rollouts", "2"),
    "measurement not an object": _json_field("run_config.json", "fingerprint.measurement", "x"),
    "look plan's order key": _json_field("run_config.json", "sequential.order_key", "zz"),
    "looks record's look": _json_field("metadata.json", "sequential.look", "two"),
    "reward stored as a string": _field("reward", "1.0"),
    "metric stored as a string": _field("metrics", {"accuracy": "1"}, "metrics.accuracy"),
    "metrics null": _field("metrics", None),
    "rollout past 32 bits": _field("rollout", 2**32),
    "rollout past the run's k": _field("rollout", 3),
    "judge not an object": _field("judge", ["PASS"]),
    "cost_usd not a number": _field("cost_usd", "abc"),
    "cost_usd negative": _field("cost_usd", -1.0),
    "cost_usd infinite": _field("cost_usd", float("inf")),
    "token count infinite": _field("usage", {"prompt_tokens": float("inf")}, "usage.prompt_tokens"),
    "token count NaN": _field("usage", {"prompt_tokens": float("nan")}, "usage.prompt_tokens"),
    "token count past 64 bits": _field("usage", {"prompt_tokens": 2**70}, "usage.prompt_tokens"),
    "token count negative": _field("usage", {"completion_tokens": -5}, "usage.completion_tokens"),
    "recorded k past evals.yaml's bound": _json_field(
        "run_config.json", "benchmark.eval.rollouts", 10**12
    ),
    "error budget a string": _json_field("run_config.json", "benchmark.eval.max_error_rate", "0.1"),
    "error budget above 1": _json_field("run_config.json", "benchmark.eval.max_error_rate", 2.0),
    "group an object": _field("group", {"a": 1}),
    "run_config.json lost": _no_run_config,
    "record without example_id": _drop_key,
    "record not an object": _not_object,
    "cut off mid-line": _torn,
    "not UTF-8": _not_utf8,
    "no metadata.json": _no_metadata,
    "duplicate record": _duplicate,
    "duplicate record at rollout 70": _duplicate_high_rollout,
    "one id, two contents": _two_contents,
    "run_config not an object": _bad_config,
    "run_config without model": _no_model,
}


def _one_line(err: str, *needles: str) -> None:
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("evalgate: error:") and "internal error" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_baseline_is_refused_in_one_line_before_the_eval(
    tmp_path: Path, runs: Callable[..., int], capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    where = DAMAGES[damage](_run_dir(tmp_path / "base", "b"))
    capsys.readouterr()
    assert runs("head", "--baseline", str(tmp_path / "base")) == 2
    _one_line(capsys.readouterr().err, where)
    assert not (tmp_path / "head" / "evals").exists()  # refused before any request


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("side", ["base", "head"])
def test_compare_refuses_a_damaged_run_on_either_side_in_one_line(
    tmp_path: Path,
    runs: Callable[..., int],
    capsys: pytest.CaptureFixture[str],
    damage: str,
    side: str,
) -> None:
    """A damaged head run is never left out quietly (it was: a corrupt run_config.json)."""
    assert runs("head") == 0
    where = DAMAGES[damage](_run_dir(tmp_path / side, "b"))
    capsys.readouterr()
    code = main(["compare", str(tmp_path / "base"), str(tmp_path / "head"),
                 "--output", str(tmp_path / "cmp")])  # fmt: skip
    assert code == 2
    _one_line(capsys.readouterr().err, where)


@pytest.mark.parametrize(
    ("gate", "field"),
    [({"margin": "abc"}, "gate.margin"), ({"margin": 0.05, "from_the_future": 1}, "gate.from")],
)
def test_a_recorded_gate_compare_cannot_read_is_one_line_exit_2(
    tmp_path: Path,
    runs: Callable[..., int],
    capsys: pytest.CaptureFixture[str],
    gate: dict[str, Any],
    field: str,
) -> None:
    """The baseline's recorded policy, written by another version or edited by hand."""
    assert runs("head") == 0
    for bench in "ab":
        path = _run_dir(tmp_path / "base", bench) / "run_config.json"
        cfg = json.loads(path.read_text())
        cfg["gate"] = gate
        path.write_text(json.dumps(cfg))
    capsys.readouterr()
    code = main(["compare", str(tmp_path / "base"), str(tmp_path / "head"),
                 "--output", str(tmp_path / "cmp")])  # fmt: skip
    assert code == 2
    _one_line(capsys.readouterr().err, "run_config.json", field, "--config")


def test_compare_fails_a_pr_run_that_lacks_a_gated_benchmark(
    tmp_path: Path, runs: Callable[..., int], capsys: pytest.CaptureFixture[str]
) -> None:
    """The PR run's folder of benchmark b was deleted: FAIL, named in the scorecard's first lines
    (it said PASS, never mentioning b)."""
    import shutil

    assert runs("head") == 0
    shutil.rmtree(_run_dir(tmp_path / "head", "b").parent)
    code = main(["compare", str(tmp_path / "base"), str(tmp_path / "head"),
                 "--output", str(tmp_path / "cmp")])  # fmt: skip
    verdict = json.loads((tmp_path / "cmp" / "verdict.json").read_text())
    assert (verdict["status"], code) == ("FAIL", 1)
    lines = (tmp_path / "cmp" / "scorecard.md").read_text().splitlines()
    first = next(line for line in lines if line.startswith("- "))  # before a's INCONCLUSIVE
    assert first.startswith("- m / b") and "not in the PR run" in first, lines[:8]


def test_compare_fails_a_pr_run_that_lacks_a_benchmark_the_base_thresholds(
    tmp_path: Path, scripted_server: Any
) -> None:
    """No baseline run of b either: the base's recorded gate still has a threshold on it."""
    import shutil

    url = scripted_server(answer_arith).base_url
    gate = "margin: 0.05, thresholds: {b: {accuracy: 0.5}}"
    for out in ("base", "head"):
        assert _local(tmp_path, url, out, gate=gate) == 0
        shutil.rmtree(_run_dir(tmp_path / out, "b").parent)
    code = main(["compare", str(tmp_path / "base"), str(tmp_path / "head"),
                 "--output", str(tmp_path / "cmp")])  # fmt: skip
    verdict = json.loads((tmp_path / "cmp" / "verdict.json").read_text())
    assert (verdict["status"], code) == ("FAIL", 1)
    assert verdict["reasons"][0].startswith("m / b") and "gate.thresholds" in verdict["reasons"][0]


def test_a_baseline_that_matches_no_model_and_benchmark_is_refused_before_the_eval(
    tmp_path: Path, runs: Callable[..., int], capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert runs("head", "--baseline", str(tmp_path / "base"), model="other") == 2
    _one_line(capsys.readouterr().err, "--baseline", "m/a", "other/a")
    assert not (tmp_path / "head" / "evals").exists()


def test_runs_lists_a_run_whose_config_is_unreadable_with_the_reason(
    tmp_path: Path, runs: Callable[..., int], capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _run_dir(tmp_path / "base", "b")
    (bad / "run_config.json").write_text('{"model": ')
    capsys.readouterr()
    assert main(["runs", "--output", str(tmp_path / "base")]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert len(lines) == 2
    (line,) = [line for line in lines if "unreadable" in line]
    assert line.split()[0] == bad.name and "run_config.json" in line


def test_one_loader_owns_the_layout() -> None:
    """The run directory's and the output root's file names are spelled in one module
    (evalgate.run.layout): everything else imports them from it. Read from the syntax tree, so
    a name in an f-string, a path join or a tuple is found as surely as a plain literal; words
    about a file in a message or a docstring ("… in run_config.json") are not a spelling of the
    layout."""
    import ast

    from evalgate.run import layout, rundir

    names = {
        layout.RUN_CONFIG, layout.RESULTS, layout.METADATA, layout.SCORECARD, layout.VERDICT,
        layout.JUNIT, layout.REPORT_HTML,
    }  # fmt: skip
    assert not set(rundir.__all__) & set(layout.__all__)  # imported from layout, never rundir
    package = Path(__file__).resolve().parent.parent / "evalgate"
    spelled = []
    for path in package.rglob("*.py"):
        if path == Path(layout.__file__).resolve():
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            value = node.value.strip("/")
            if value in names or value.startswith(f"{layout.EVALS}/"):
                spelled.append(f"{path.relative_to(package)}:{node.lineno}: {node.value!r}")
    assert spelled == []


def test_one_module_reads_and_writes_the_run_files() -> None:
    """run_config.json and metadata.json are read and written by evalgate.run.runfiles alone, as
    its typed models (RunConfig, RunMetadata, kept on the loaded run): no other module parses
    them into dicts read with ``.get()`` chains (the trend, `runs` and the report's agent check
    did). Read from the syntax tree: a call that reads or writes a path naming either file, or
    any use of the raw JSON readers, outside the module."""
    import ast

    from evalgate.run import layout, runfiles

    files = {"RUN_CONFIG", "METADATA"}
    raw = {"read_json_object", "read_object"}
    io = {"read_text", "read_bytes", "write_text", "write_bytes", "open", "load", "loads",
          "write_json", *raw}  # fmt: skip
    owners = {Path(runfiles.__file__).resolve(), Path(layout.__file__).resolve()}

    def name(node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return node.id
        return node.attr if isinstance(node, ast.Attribute) else None

    package = Path(__file__).resolve().parent.parent / "evalgate"
    found = []
    for path in package.rglob("*.py"):
        if path.resolve() in owners:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.relative_to(package)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.alias) and node.name in raw:
                found.append(f"{where}: imports {node.name}")
            if isinstance(node, ast.Call) and name(node.func) in io:
                named = {name(n) for n in ast.walk(node)} & files
                if named:
                    found.append(f"{where}: {name(node.func)}(… {', '.join(sorted(named))} …)")
    assert found == []


@pytest.mark.parametrize("gate", [{"margin": "abc"}, {"margin": 0.05, "from_the_future": 1}])
def test_resume_of_a_run_whose_recorded_gate_cannot_be_read_is_one_line_exit_2(
    tmp_path: Path,
    runs: Callable[..., int],
    capsys: pytest.CaptureFixture[str],
    gate: dict[str, Any],
) -> None:
    run = _run_dir(tmp_path / "base", "a")
    cfg = json.loads((run / "run_config.json").read_text())
    cfg["gate"] = gate
    (run / "run_config.json").write_text(json.dumps(cfg))
    capsys.readouterr()
    code = main(["resume", str(run), "--output", str(tmp_path / "base")], environ={"CI": "1"})
    assert code == 2
    _one_line(capsys.readouterr().err, "run_config.json", "gate.")


@pytest.mark.parametrize("damage", ["cut off mid-line", "duplicate record", "no metadata.json"])
def test_the_fix_the_error_names_works(
    tmp_path: Path, runs: Callable[..., int], capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    """`evalgate resume RUN`, as the one line says, makes the baseline usable again."""
    run = _run_dir(tmp_path / "base", "b")
    DAMAGES[damage](run)
    capsys.readouterr()
    assert runs("head", "--baseline", str(tmp_path / "base")) == 2
    assert f"evalgate resume {run.name}" in capsys.readouterr().err
    assert main(["resume", run.name, "--output", str(tmp_path / "base")], environ={"CI": "1"}) == 0
    assert runs("head", "--baseline", str(tmp_path / "base")) == 0


def _all_errored(journal: Path) -> None:
    records = [json.loads(line) for line in _lines(journal)]
    for rec in records:
        rec.update(error="HTTP 500: server error", reward=None, metrics={})
    journal.write_text("".join(json.dumps(r) + "\n" for r in records))


def _emptied(journal: Path) -> None:
    """A run stopped before its first record (a legal journal: `resume` would finish it)."""
    journal.write_text("")


@pytest.mark.parametrize("emptied", [_all_errored, _emptied])
def test_a_baseline_with_nothing_to_pair_is_never_no_gate(
    tmp_path: Path,
    runs: Callable[..., int],
    capsys: pytest.CaptureFixture[str],
    emptied: Callable[[Path], None],
) -> None:
    """A baseline was given but none of its rollouts can be paired (every one errored, or none
    recorded: that was exit 4): the verdict must not say "no gate configured … compare with a
    baseline" and exit 0."""
    for bench in ("a", "b"):
        emptied(_run_dir(tmp_path / "base", bench) / "results.jsonl")
    capsys.readouterr()
    code = runs("head", "--baseline", str(tmp_path / "base"))
    out = capsys.readouterr().out
    assert "no gate configured" not in out
    assert code == 1, out

"""`evalgate runs` and `evalgate show` over a real output tree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalgate.cli import main
from tests.conftest import answer_arith, write_config


def _two_runs(tmp_path: Path, url: str) -> Path:
    config = write_config(
        tmp_path,
        f"models: [{{name: m, backend: openai, base_url: '{url}', model: org/m}}]\n"
        "benchmarks: [{name: arith, eval: {num_examples: 3}}]\n",
    )
    out = tmp_path / "out"
    for _ in range(2):
        assert main(["local", str(config), "--output", str(out)], environ={"CI": "1"}) == 0
    return out


def test_runs_lists_newest_first_and_show_details(
    tmp_path: Path, scripted_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _two_runs(tmp_path, scripted_server(answer_arith).base_url)
    capsys.readouterr()
    assert main(["runs", "--output", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    ids = sorted(p.name for p in (out / "evals").glob("*/*"))
    assert [line.split()[0] for line in lines[1:]] == ids[::-1]
    assert all("100.0%" in line and "complete" in line for line in lines[1:])
    assert main(["show", ids[0], "--output", str(out)]) == 0
    text = capsys.readouterr().out
    assert "benchmark  arith" in text and '"accuracy": 1.0' in text


def test_show_unknown_run_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", "nope", "--output", str(tmp_path)]) == 2
    assert "no run 'nope'" in capsys.readouterr().err


def test_run_ids_sort_by_creation_time_within_a_second() -> None:
    """Baselines ("newest wins") and listings order runs by id: two runs started within one
    second must still sort in the order they were created."""
    import time

    from evalgate.run.layout import new_run_id

    ids = []
    for _ in range(5):
        ids.append(new_run_id())
        time.sleep(0.002)  # distinct milliseconds, as two runs always are
    assert ids == sorted(ids)
    assert len(ids[0]) == len("20261124-073627-123abc")


@pytest.mark.parametrize("damage", ["metadata", "run_config"])
def test_a_damaged_run_is_listed_or_refused_in_one_line_never_a_crash(
    tmp_path: Path, scripted_server: Any, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    """A run killed while writing a file, or edited by hand: `runs` lists the rest, `show` and
    `resume` say what is wrong in one line (exit 2), nothing exits 4."""
    out = _two_runs(tmp_path, scripted_server(answer_arith).base_url)
    older, newer = sorted((out / "evals").glob("*/*"))
    if damage == "metadata":
        (newer / "metadata.json").write_text('{"complete": tr')
    else:
        (newer / "run_config.json").write_text("[1, 2]")
    capsys.readouterr()
    assert main(["runs", "--output", str(out)]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert older.name in listed
    assert newer.name in listed  # a damaged run is listed (with the reason), never left out
    for argv in (["show", newer.name], ["resume", newer.name]):
        code = main([*argv, "--output", str(out)], environ={"CI": "1"})
        err = capsys.readouterr().err
        assert code in (0, 2) and "internal error" not in err, (argv, err)
        if code == 2:
            assert len(err.strip().splitlines()) == 1 and newer.name in err

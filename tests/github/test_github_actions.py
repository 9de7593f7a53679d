"""Workflow commands: escaping, GITHUB_OUTPUT's delimiter form, the step summary's size cap."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from evalgate.publish import actions
from evalgate.publish.actions import (
    ActionsEnv,
    annotation,
    append_summary,
    escape_data,
    escape_property,
    group,
    mask,
    set_outputs,
)


def parse_output_file(text: str) -> dict[str, str]:
    """Read GITHUB_OUTPUT as the runner does: ``name=value`` lines and ``name<<DELIM`` blocks."""
    result: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line:
            i += 1
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            end = lines.index(delim, i + 1)  # ValueError: the block never ends
            result[name] = "\n".join(lines[i + 1 : end])
            i = end + 1
        else:
            name, value = line.split("=", 1)
            result[name] = value
            i += 1
    return result


def unescape_data(text: str) -> str:
    return text.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def unescape_property(text: str) -> str:
    return unescape_data(text.replace("%3A", ":").replace("%2C", ","))


def test_escaping_matches_actions_toolkit() -> None:
    assert escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    # % first: an input that looks escaped already must not be double-decoded by the runner.
    assert escape_data("%0A") == "%250A" and unescape_data(escape_data("%0A")) == "%0A"


def test_annotation_formats() -> None:
    assert annotation("error", "boom") == "::error::boom"
    line = annotation(
        "warning",
        "score fell\n2 points",
        file="evals/capitals, EU.yaml",
        line=12,
        title="gate: capitals",
    )
    assert line == (
        "::warning file=evals/capitals%2C EU.yaml,line=12,title=gate%3A capitals"
        "::score fell%0A2 points"
    )
    assert "\n" not in line
    head, message = line[2:].split("::", 1)
    props = dict(p.split("=", 1) for p in head.split(" ", 1)[1].split(","))
    assert unescape_property(props["file"]) == "evals/capitals, EU.yaml"
    assert unescape_property(props["title"]) == "gate: capitals"
    assert unescape_data(message) == "score fell\n2 points"
    assert annotation("notice", "n", title="t") == "::notice title=t::n"
    with pytest.raises(ValueError):
        annotation("info", "nope")


def test_mask_and_group() -> None:
    assert mask("s3cr3t") == "::add-mask::s3cr3t"
    assert mask("") == ""
    pem = "-----BEGIN KEY-----\nabcd1234\n}\n-----END KEY-----"
    commands = mask(pem).split("\n")
    assert commands[0] == "::add-mask::" + escape_data(pem)
    assert "::add-mask::abcd1234" in commands and "::add-mask::}" not in commands
    out = io.StringIO()
    with group("Run: capitals\n(2 of 3)", stream=out):
        print("inside", file=out)
    assert out.getvalue() == "::group::Run: capitals%0A(2 of 3)\ninside\n::endgroup::\n"


def test_group_closes_on_error() -> None:
    out = io.StringIO()
    with pytest.raises(RuntimeError), group("g", stream=out):
        raise RuntimeError
    assert out.getvalue().endswith("::endgroup::\n")


def test_set_outputs_roundtrip_through_the_runners_format(tmp_path: Path) -> None:
    path = tmp_path / "output"
    path.write_text("earlier=1\n", encoding="utf-8")  # another step's line stays untouched
    values = {
        "verdict": "fail",
        "passed": False,
        "exit-code": 1,
        "scorecard": "## ❌ FAIL\n\n| a | b |\nline with EOF and name<<X\n",
        "empty": "",
        "none": None,
    }
    set_outputs(path, values)
    parsed = parse_output_file(path.read_text(encoding="utf-8"))
    assert parsed == {
        "earlier": "1",
        "verdict": "fail",
        "passed": "false",
        "exit-code": "1",
        "scorecard": values["scorecard"],
        "empty": "",
        "none": "",
    }


def test_delimiter_never_occurs_in_the_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens = iter(["aaaa", "aaaa", "bbbb"])
    monkeypatch.setattr(actions.secrets, "token_hex", lambda n: next(tokens))
    hostile = "x\nEVALGATE_EOF_aaaa\nverdict<<EVIL\npass\nEVIL"
    path = tmp_path / "output"
    set_outputs(path, {"log": hostile})
    text = path.read_text(encoding="utf-8")
    assert text == f"log<<EVALGATE_EOF_bbbb\n{hostile}\nEVALGATE_EOF_bbbb\n"
    assert parse_output_file(text) == {"log": hostile}  # no smuggled "verdict" output


def test_real_delimiters_are_random(tmp_path: Path) -> None:
    path = tmp_path / "output"
    set_outputs(path, {"a": "1", "b": "2"})
    heads = [ln for ln in path.read_text(encoding="utf-8").splitlines() if "<<" in ln]
    assert len({h.split("<<")[1] for h in heads}) == 2


@pytest.mark.parametrize("name", ["", "a\nb", "a<<b", "a=b"])
def test_bad_output_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError):
        set_outputs(tmp_path / "output", {name: "v"})
    assert not (tmp_path / "output").exists()


def test_summary_appends_whole_text_under_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    assert append_summary(path, "## one") is False
    assert append_summary(path, "## two\n") is False
    assert path.read_text(encoding="utf-8") == "## one\n## two\n"


def test_summary_over_the_limit_is_cut_at_a_line_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    path.write_bytes(b"x" * 100 + b"\n")  # an earlier write of the same step counts too
    text = "## scorecard\n```\n" + "".join(f"row {i} ✅ é\n" for i in range(200))
    limit = 1500
    assert append_summary(
        path, text, artifact_hint="the `evalgate-report` artifact", limit_bytes=limit
    )
    data = path.read_bytes()
    assert len(data) <= limit
    written = data.decode("utf-8")  # never cut inside a UTF-8 sequence
    assert written.count("```") == 2  # the code fence was closed before the note
    assert "Summary truncated" in written and "`evalgate-report` artifact" in written
    body = written[101:].split("```\n\n>")[0]
    assert all(ln.startswith(("row", "## scorecard", "```")) for ln in body.splitlines())


def test_summary_real_limit_is_one_mebibyte(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    big = "| item | ✅ |\n" * 100_000  # about 1.5 MB
    assert append_summary(path, big) is True
    assert actions.SUMMARY_LIMIT_BYTES == 1024 * 1024
    assert path.stat().st_size <= 1024 * 1024


def test_summary_file_already_full_gets_nothing_more(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    path.write_bytes(b"x" * 1000)
    assert append_summary(path, "more", limit_bytes=1000) is True
    assert path.read_bytes() == b"x" * 1000  # over the cap GitHub would drop the whole summary


def test_summary_single_huge_line_is_cut_on_a_character_boundary(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    assert append_summary(path, "é" * 2000, limit_bytes=1000)
    assert len(path.read_bytes()) <= 1000
    path.read_bytes().decode("utf-8")


def test_actions_env_reads_only_what_it_is_given(tmp_path: Path) -> None:
    env = ActionsEnv.from_environ(
        {
            "GITHUB_ACTIONS": "true",
            "GITHUB_OUTPUT": str(tmp_path / "out"),
            "GITHUB_STEP_SUMMARY": str(tmp_path / "sum"),
            "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
            "GITHUB_EVENT_NAME": "pull_request",
            "GITHUB_REPOSITORY": "octo-org/evals-demo",
            "GITHUB_WORKFLOW": "evals",
            "GITHUB_RUN_ID": "9",
            "GITHUB_API_URL": "https://ghe.example.com/api/v3/",
        }
    )
    assert env.in_actions and env.output_path == tmp_path / "out"
    assert env.api_url == "https://ghe.example.com/api/v3"
    assert env.run_url == "https://github.com/octo-org/evals-demo/actions/runs/9"
    local = ActionsEnv.from_environ({})
    assert not local.in_actions and local.output_path is None and local.run_url is None
    assert local.api_url == "https://api.github.com"

"""Characters that cannot be seen are shown by their escape in every message a person reads:
a zero-width space inside a URL would otherwise print as a URL that looks right and is not."""

from __future__ import annotations

import io
import socket
from pathlib import Path

import pytest

from evalgate.cli import main
from evalgate.errors import ConfigError
from evalgate.report import code_span, escape_text
from tests.conftest import write_config

ZWSP, RLO = "\u200b", "\u202e"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_zero_width_space_in_a_url_is_shown_in_the_log_the_scorecard_and_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1{ZWSP}"
    config = write_config(
        tmp_path,
        f'models: [{{name: m, backend: openai, base_url: "{url}", model: org/m}}]\n'
        "benchmarks: [{name: a, kind: arith, size: 3}]\n",
    )
    log = io.StringIO()
    assert main(["local", str(config), "--output", str(tmp_path / "o")], out=log) == 3
    err = capsys.readouterr().err
    shown = url.replace(ZWSP, "\\u200b")
    assert f"cannot reach {shown} (" in log.getvalue()
    assert ZWSP not in log.getvalue() + err  # none hidden anywhere in what was printed
    card = (tmp_path / "o" / "scorecard.md").read_text()
    assert f"/v1{ZWSP}" not in card and "/v1\\\\u200b (" in card  # `\u200b` once rendered


def test_error_messages_show_invisible_and_bidi_characters() -> None:
    exc = ConfigError(f"evals.yaml:3: base_url: http://h{ZWSP}/v1, label a{RLO}b", hint=f"x{ZWSP}")
    assert str(exc) == "evals.yaml:3: base_url: http://h\\u200b/v1, label a\\u202eb (x\\u200b)"
    assert "\n" in ConfigError("one\ntwo").message  # a line per mistake stays a line


def test_the_scorecards_text_and_code_show_them_too() -> None:
    assert "\\\\u202e" in escape_text(f"label{RLO}x")  # Markdown-escaped backslash
    assert code_span(f"http://h{ZWSP}/v1") == "`http://h\\u200b/v1`"
    assert code_span("⚠️ ✅") == "`⚠️ ✅`"  # emoji and their variation selectors are left alone

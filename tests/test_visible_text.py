"""Characters that cannot be seen are shown by their escape in every message a person reads:
a zero-width space inside a URL would otherwise print as a URL that looks right and is not."""

from __future__ import annotations

import io
import socket
from pathlib import Path
from typing import Any

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


def test_a_zero_width_space_in_a_url_is_refused_at_load_and_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1{ZWSP}"
    config = write_config(
        tmp_path,
        f'models: [{{name: m, backend: openai, base_url: "{url}", model: org/m}}]\n'
        "benchmarks: [{name: a, kind: arith, size: 3}]\n",
    )
    assert main(["local", str(config), "--output", str(tmp_path / "o")], out=io.StringIO()) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"{config}:1: models[0].base_url: the URL contains an invisible character" in line
    assert "(\\u200b, character " in line and ZWSP not in line


def test_a_zero_width_space_in_a_url_a_server_sends_is_shown_in_the_log_and_scorecard(
    tmp_path: Path, scripted_server: Any
) -> None:
    docs = f"https://docs.example/limits{ZWSP}"
    error = f'{{"error": {{"message": "rate limit, see {docs}"}}}}'
    server = scripted_server(lambda body, n: (400, error, {"Content-Type": "application/json"}))
    config = write_config(
        tmp_path,
        f'models: [{{name: m, backend: openai, base_url: "{server.base_url}", model: org/m}}]\n'
        "benchmarks: [{name: a, kind: arith, size: 3, eval: {max_retries: 0}}]\n",
    )
    log = io.StringIO()
    assert main(["local", str(config), "--output", str(tmp_path / "o")], out=log) == 3
    assert "see https://docs.example/limits\\u200b" in log.getvalue()
    assert ZWSP not in log.getvalue()  # none hidden in the log (GitHub's linking needs none)
    card = (tmp_path / "o" / "scorecard.md").read_text()
    assert f"limits{ZWSP}" not in card and "limits\\\\u200b" in card  # `\u200b` rendered


def test_error_messages_show_invisible_and_bidi_characters() -> None:
    exc = ConfigError(f"evals.yaml:3: base_url: http://h{ZWSP}/v1, label a{RLO}b", hint=f"x{ZWSP}")
    assert str(exc) == "evals.yaml:3: base_url: http://h\\u200b/v1, label a\\u202eb (x\\u200b)"
    assert "\n" in ConfigError("one\ntwo").message  # a line per mistake stays a line


def test_the_scorecards_text_and_code_show_them_too() -> None:
    assert "\\\\u202e" in escape_text(f"label{RLO}x")  # Markdown-escaped backslash
    assert code_span(f"http://h{ZWSP}/v1") == "`http://h\\u200b/v1`"
    assert code_span("⚠️ ✅") == "`⚠️ ✅`"  # emoji and their variation selectors are left alone

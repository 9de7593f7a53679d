"""`evalgate local` on a terminal shows the scorecard rendered for reading (tables drawn, no raw
HTML tags or entities); in a CI log, a pipe or a file it stays the Markdown GitHub renders."""

from __future__ import annotations

import io
import re
from pathlib import Path

from evalgate.cli import main
from tests.conftest import answer_arith, write_config


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _config(tmp_path: Path, base_url: str) -> Path:
    return write_config(
        tmp_path,
        f"models: [{{name: m, backend: openai, base_url: '{base_url}', model: org/m}}]\n"
        "benchmarks: [{name: a, kind: arith, size: 5, eval: {cache: false}}]\n"
        "gate: {thresholds: {a: {accuracy: 0.1}}}\n",
    )


def test_a_terminal_gets_the_scorecard_rendered(scripted_server, tmp_path: Path) -> None:
    server = scripted_server(answer_arith)
    config = _config(tmp_path, server.base_url)
    tty = Terminal()
    assert main(["local", str(config), "--output", str(tmp_path / "o")], out=tty) in (0, 1)
    shown = _ANSI.sub("", tty.getvalue())
    card = (tmp_path / "o" / "scorecard.md").read_text()
    assert "<details>" in card and "<sub>" in card  # the file keeps GitHub's Markdown
    for raw in ("<details>", "<summary>", "</summary>", "<sub>", "&amp;", "|---|"):
        assert raw not in shown, raw
    assert "Runs" in shown and "accuracy" in shown
    assert any(ch in shown for ch in "┃│━─")  # a drawn table


def test_a_log_or_pipe_gets_the_markdown_without_html_escapes(
    scripted_server, tmp_path: Path
) -> None:
    """A CI log is read as plain text: the tables stay, but no `&gt;` / `&amp;`, no tags, no
    backslash escapes and no zero-width spaces (scorecard.md keeps them all for GitHub)."""
    error = '{"error": {"message": "top_p must be <= 1 & > 0, ask @ops *now* or _later_"}}'
    server = scripted_server(lambda body, n: (400, error, {"Content-Type": "application/json"}))
    config = _config(tmp_path, server.base_url)
    log = io.StringIO()
    assert main(["local", str(config), "--output", str(tmp_path / "o")], out=log) == 3
    card = (tmp_path / "o" / "scorecard.md").read_text()
    shown = log.getvalue()
    for escaped in ("&gt;", "&lt;", "&amp;", "\\*", "\\_", "<details>", "<sub>", "\u200b"):
        assert escaped in card, escaped  # GitHub needs them there
        assert escaped not in shown, escaped
    assert "(100.0% > max_error_rate 5.0%)" in shown
    assert "top_p must be <= 1 & > 0, ask @ops *now* or _later_" in shown
    assert "| model | benchmark | metric |" in shown and "|---|" in shown  # still Markdown
    assert "\n**Runs**\n" in shown


def test_entities_and_tags_in_reasons_are_decoded_for_a_terminal() -> None:
    from evalgate.report.terminal import print_scorecard

    markdown = (
        "## evalgate: ERROR\n\n- m / a / -: install it: python -m pip install "
        "'evalgate-action[embedded]' &amp;&amp; python -m pip install x\n\n"
        "<details><summary>Runs</summary>\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n</details>\n\n"
        "<sub>evalgate 0.1 · policy</sub>\n"
    )
    tty = Terminal()
    print_scorecard(markdown, tty)
    shown = _ANSI.sub("", tty.getvalue())
    assert "&&" in shown and "&amp;" not in shown
    assert "<" not in shown and "Runs" in shown and "evalgate 0.1" in shown

"""The scorecard renders every string from the PR or the model inert (it is posted as a comment).

End to end through `evalgate local --baseline`: item ids, prompts and completions that try to break
out of their table cell or code span, raw HTML, mentions, references and links. (Model and
benchmark names are restricted to ``[A-Za-z0-9._-]`` by the config schema.) The Markdown is
checked with markdown-it (CommonMark + GFM tables, as GitHub parses it): no HTML node, no link,
no image, and every table row keeps its cells.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

from evalgate.cli import main
from evalgate.report import code_span, escape_text
from tests.conftest import write_config

HOSTILE_IDS = ["q`|<img src=x>", "<b>@org/team</b>", "#1 [x](https://e.example)", "plain"]


def _completion(prompt: str, regress: bool) -> str:
    if regress:
        return "``` | </td><img src=https://t.example/p.png> @org/team #12 `x` ![i](https://e)"
    return f"A:{prompt}"


def _tokens(markdown: str) -> list[Any]:
    md = MarkdownIt("commonmark").enable("table")
    out = []
    for tok in md.parse(markdown):
        out.append(tok)
        out.extend(tok.children or [])
    return out


def test_hostile_strings_render_inert(tmp_path: Path, scripted_server: Any) -> None:
    rows = [{"id": i, "prompt": f"P{n}", "answer": f"A:P{n}"} for n, i in enumerate(HOSTILE_IDS)]
    (tmp_path / "qa.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")

    def script(body: dict[str, Any], n: int) -> str:
        system = body["messages"][0]["content"]
        return _completion(body["messages"][-1]["content"], "regress" in system)

    url = scripted_server(script).base_url
    evals = """
models:
  - {{name: m, backend: openai, base_url: "{url}", model: org/m}}
benchmarks:
  - {{name: qa, kind: jsonl, path: qa.jsonl, system_prompt: "{system}"}}
"""
    base = write_config(tmp_path, evals.format(url=url, system="Answer."))
    assert main(["local", str(base), "--output", str(tmp_path / "base"), "--no-cache"]) == 0
    head = write_config(tmp_path, evals.format(url=url, system="Please regress."))
    code = main(["local", str(head), "--output", str(tmp_path / "head"), "--no-cache",
                 "--baseline", str(tmp_path / "base")])  # fmt: skip
    assert code in (1, 0)
    markdown = (tmp_path / "head" / "scorecard.md").read_text()
    assert "Flipped items" in markdown

    tokens = _tokens(markdown)
    kinds = {t.type for t in tokens}
    assert not kinds & {"link_open", "image"}, kinds
    inline_html = {t.content for t in tokens if t.type == "html_inline"}
    assert inline_html <= {"<sub>", "</sub>"}, inline_html  # only the template's own tags
    html_blocks = [t.content.strip() for t in tokens if t.type == "html_block"]
    assert all(b.startswith(("<details>", "</details>", "<sub>")) for b in html_blocks), html_blocks
    # Every row of every table has as many cells as its header.
    rows = [t for t in tokens if t.type == "tr_open"]
    assert rows
    flip_table = markdown.split("Flipped items")[1]
    for line in flip_table.splitlines():
        if line.startswith("| ") and "→" in line:
            cells = _tokens(f"| a | b | c | d | e |\n|---|---|---|---|---|\n{line}\n")
            assert sum(t.type == "td_open" for t in cells) == 5, line
    # Outside code (where GitHub acts on them) mentions and references are broken; in code spans
    # they are inert already and shown verbatim.
    text = " ".join(t.content for t in tokens if t.type == "text")
    assert "@org/team" not in text and "#1" not in text and "https://" not in text
    code = [t.content for t in tokens if t.type == "code_inline"]
    assert any("@org/team #12" in c for c in code)


def test_a_code_span_cannot_be_closed_by_its_content() -> None:
    for text in ["`", "a ``` b", "``x``", "| `|` |", "<!-- evalgate:sticky:k -->"]:
        span = str(code_span(text))
        (tok,) = [t for t in _tokens(f"x {span} y") if t.type == "code_inline"]
        assert tok.content.replace("\\|", "|").replace("\u200b", "") == " ".join(text.split())
        assert "<!--" not in span


def test_escaped_text_has_no_markup() -> None:
    text = "**b** _i_ `c` <i>h</i> [l](https://x) @team #3 | www.x.example"
    kinds = {t.type for t in _tokens(str(escape_text(text)))}
    assert kinds <= {"paragraph_open", "inline", "text", "paragraph_close", "softbreak"}, kinds


def test_only_a_plain_http_url_becomes_the_report_link() -> None:
    from evalgate.report import _link_target

    assert _link_target("https://github.example/acme/app/actions/runs/77#artifacts")
    for hostile in (
        "javascript:alert(1)",
        "https://x.example/r.html) [click](https://evil.example",
        "https://x.example/<img src=x>",
        "https://x.example/a b",
    ):
        assert _link_target(hostile) is None, hostile


# The escapes as they were written before their patterns were compiled lazily and tried only on
# text holding their characters: every pattern tried on every text.
_REFERENCE_MENTION = re.compile(r"(?<![A-Za-z0-9_])@(?=[A-Za-z0-9])")
_REFERENCE_REF = re.compile(r"#(?=\d)")
_REFERENCE_URL = re.compile(r"(?i)(?<=[a-z0-9])://|\bwww\.")
_REFERENCE_MARKDOWN = re.compile(r"([\\`*~|])|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|\](?=\()")


def _reference_neutralise(text: str) -> str:
    zwsp = "\u200b"
    text = _REFERENCE_MENTION.sub("@" + zwsp, text)
    text = _REFERENCE_REF.sub("#" + zwsp, text)
    text = _REFERENCE_URL.sub(lambda m: m.group(0)[:-1] + zwsp + m.group(0)[-1], text)
    return text.replace("<!--", "<" + zwsp + "!--")


def _reference_escape(value: str) -> str:
    from evalgate._text import visible

    text = " ".join(visible(value).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _REFERENCE_MARKDOWN.sub(lambda m: "\\" + m.group(0), _reference_neutralise(text))


def _reference_code_span(value: str) -> str:
    from evalgate._text import visible

    text = " ".join(visible(value).split())
    if not text:
        return "∅"
    fence = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    text = text.replace("<!--", "<\u200b!--").replace("|", "\\|")
    return f"{fence}{pad}{text}{pad}{fence}"


_PIECES = ["@", "#", "1", "a", "A", "_", "://", "www.", "WwW.", "http", "*", "`", "``", "~", "|",
           "]", "(", "\\", "<!--", "&", "<", ">", " ", "\t", "\n", "é", "\u200b", "\u202e", "x_y",
           "pass@2", "org/repo#12", "K"]  # fmt: skip


def test_escapes_tried_only_where_their_characters_are_give_the_same_text() -> None:
    import random

    from evalgate.report._escape import code_span, escape_text, neutralise

    rng = random.Random(36)
    texts = ["", "plain", "max_error_rate", "no gate configured — set gate.thresholds (--x)"]
    texts += ["".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 12))) for _ in range(3000)]
    for text in texts:
        assert str(escape_text(text)) == _reference_escape(text), repr(text)
        assert neutralise(text) == _reference_neutralise(text), repr(text)
        assert str(code_span(text)) == _reference_code_span(text), repr(text)

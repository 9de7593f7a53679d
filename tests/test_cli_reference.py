"""The README's command table is the parser's: a flag added to the CLI shows up in the docs."""

from __future__ import annotations

from pathlib import Path

from evalgate.commands.reference import BEGIN, END, command_table

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_command_table_matches_the_parser() -> None:
    text = README.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, "README lost its generated command table markers"
    shown = text[text.index(BEGIN) : text.index(END) + len(END)]
    assert shown == command_table(), (
        "README's command table is stale: paste `python -m evalgate.commands.reference` into it"
    )


def test_every_flag_of_every_command_is_in_the_table() -> None:
    import argparse

    from evalgate.cli import _parser

    parser = _parser()
    (subs,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    table = command_table()
    for name, sub in subs.choices.items():
        row = next(
            line
            for line in table.splitlines()
            if line.startswith((f"| `evalgate {name} ", f"| `evalgate {name}`"))
        )
        for action in sub._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help":
                    assert flag in row, f"{name}: {flag} missing from the command table"


def test_configuration_reference_matches_the_schema() -> None:
    from evalgate.commands.reference import config_reference

    page = README.parent / "docs" / "reference" / "configuration.md"
    assert page.read_text(encoding="utf-8") == config_reference(), (
        "docs/reference/configuration.md is stale: "
        "python -m evalgate.commands.reference --config > docs/reference/configuration.md"
    )

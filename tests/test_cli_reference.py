"""The docs' generated pages are the code's: a flag added to the CLI, a field added to the
schema, show up in the docs."""

from __future__ import annotations

from pathlib import Path

from evalgate.commands.reference import BEGIN, END, command_table

ROOT = Path(__file__).resolve().parent.parent
CLI_PAGE = ROOT / "docs" / "reference" / "cli.md"


def test_command_table_matches_the_parser() -> None:
    text = CLI_PAGE.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, "docs/reference/cli.md lost its generated table markers"
    shown = text[text.index(BEGIN) : text.index(END) + len(END)]
    assert shown == command_table(), (
        "docs/reference/cli.md's command table is stale: "
        "paste `python -m evalgate.commands.reference` into it"
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

    page = ROOT / "docs" / "reference" / "configuration.md"
    assert page.read_text(encoding="utf-8") == config_reference(), (
        "docs/reference/configuration.md is stale: "
        "python -m evalgate.commands.reference --config > docs/reference/configuration.md"
    )


def test_the_docs_front_page_is_the_readme() -> None:
    """docs/index.md is README.md with its links made relative to docs/ (one text, two places)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert index == readme.replace("](docs/", "]("), (
        'docs/index.md is stale: python -c "import pathlib; p = pathlib.Path; '
        "p('docs/index.md').write_text(p('README.md').read_text().replace('](docs/', ']('))\""
    )


def test_a_command_parses_and_helps_alike_with_only_its_own_parser() -> None:
    """A command line naming a command builds that command's parser only (start-up, issue #36):
    its help, its defaults and its errors' wording are the whole parser's."""
    import argparse

    from evalgate.cli import _parser
    from evalgate.errors import UsageError

    def command(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
        (subs,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        found: argparse.ArgumentParser = subs.choices[name]
        return found

    def parsed(parser: argparse.ArgumentParser, argv: list[str]) -> object:
        try:
            return parser.parse_known_args(argv)
        except UsageError as exc:  # a required argument missing: the same words
            return str(exc)

    full = _parser()
    (subs,) = (a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    for name in subs.choices:
        alone = _parser(name)
        assert command(alone, name).format_help() == command(full, name).format_help(), name
        for argv in ([name], [name, "x", "--nope"]):
            assert parsed(alone, argv) == parsed(full, argv), argv

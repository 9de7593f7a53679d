"""The seams between modules stay narrow: the pipeline's functions take keyword arguments past
the first few (a swapped ``environ``/``log`` is a type error, not a silent mix-up)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "evalgate"
MAX_POSITIONAL = 4


def _positional(path: Path) -> dict[str, int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name: len(node.args.posonlyargs) + len(node.args.args)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def test_pipeline_functions_take_few_positional_arguments() -> None:
    wide = {
        name: n for name, n in _positional(PACKAGE / "pipeline.py").items() if n > MAX_POSITIONAL
    }
    assert wide == {}, "past the first few, arguments are keyword-only (or one typed request)"


def _evalgate_imports(path: Path) -> set[str]:
    """Every evalgate module ``path`` imports, at module level or inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("evalgate"):
            found.add(node.module or "")
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("evalgate")}
    return found


def test_cli_only_parses_and_dispatches() -> None:
    """No command's body in cli.py: it reaches no stage (config, pipeline, suites…), only the
    error type; each command's module is named in its dispatch table."""
    assert _evalgate_imports(PACKAGE / "cli.py") <= {"evalgate", "evalgate.errors"}


def test_every_command_has_a_handler_that_takes_the_dispatch_arguments() -> None:
    import argparse
    import importlib
    import inspect

    from evalgate.cli import COMMANDS, _parser

    (sub,) = (a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(COMMANDS)
    for name, command in COMMANDS.items():
        module = importlib.import_module(f"evalgate.commands.{command.module}")
        handler = getattr(module, command.handler)
        assert handler.__name__ in module.__all__, name
        params = list(inspect.signature(handler).parameters)
        assert params == ["args", "overrides", "environ", "out"], name

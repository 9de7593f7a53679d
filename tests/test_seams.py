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

"""Infrastructure errors keep their cause: the one user-facing line says what to do, and
``__cause__`` (shown with ``EVALGATE_TRACEBACK=1``, kept in crash logs) says what failed
underneath: the OSError, the failed request, git's error. ``from None`` is for user mistakes
whose message already says everything (a YAML syntax error, a template's undefined name)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from evalgate.cli import main
from evalgate.config.load import load_config
from evalgate.errors import ConfigError

PACKAGE = Path(__file__).resolve().parent.parent / "evalgate"

# What a handler catches that says "the machine, the network or a dependency failed".
_INFRA = {
    "OSError", "PermissionError", "IsADirectoryError", "ConnectionError", "BrokenPipeError",
    "ImportError", "ModuleNotFoundError", "Exception", "BaseException", "CalledProcessError",
    "SubprocessError", "TransportError", "HTTPError", "HfHubHTTPError", "GitFailed",
    "GitHubError", "InfraError", "SandboxError", "SandboxFileError", "NotReady", "RequestFailed",
}  # fmt: skip
# (module, function): where such a handler still drops the cause, and why that is right.
_DROPS_CAUSE = {
    # O_NOFOLLOW's ELOOP: the message says "is a symlink", the errno adds nothing.
    ("evalgate/publish/artifact.py", "read_artifact_text"),
    # the worker's exit status is the report; its message was printed on the line before.
    ("evalgate/suites/_inspect_runner.py", "main"),
    # the environment's own module is not installed: the message names it and the fix.
    ("evalgate/suites/_vf_runner.py", "_pick_api"),
    # a template computing with the data: any error is the template's, named in the message.
    ("evalgate/_templating.py", "_render"),
}


def _caught(node: ast.expr | None) -> set[str]:
    if node is None:
        return {"BaseException"}
    if isinstance(node, ast.Tuple):
        return set().union(*(_caught(e) for e in node.elts))
    if isinstance(node, ast.Attribute):
        return {node.attr}
    return {node.id} if isinstance(node, ast.Name) else set()


def _drops(path: Path) -> set[tuple[str, str, int]]:
    """(function, line) of each ``raise … from None`` in a handler that catches an infra error."""
    found = set()
    for func in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for handler in ast.walk(func):
            if not isinstance(handler, ast.ExceptHandler) or not _caught(handler.type) & _INFRA:
                continue
            for node in ast.walk(handler):
                cause = getattr(node, "cause", None)
                if isinstance(cause, ast.Constant) and cause.value is None:
                    found.add((func.name, node.lineno))
    return found


def test_infrastructure_errors_are_translated_with_their_cause() -> None:
    root = PACKAGE.parent
    wrong = [
        f"{path.relative_to(root)}:{line} ({name})"
        for path in sorted(PACKAGE.rglob("*.py"))
        for name, line in sorted(_drops(path), key=lambda d: d[1])
        if (str(path.relative_to(root)), name) not in _DROPS_CAUSE
    ]
    assert wrong == [], "raise … from exc: the cause is what a bug report needs"


def _unreadable(tmp_path: Path) -> Path:
    """A path the OS refuses to read (ENOTDIR: a parent is a file), even for root, as it would
    refuse a permission or an I/O error."""
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    return tmp_path / "a-file" / "evals.yaml"


def test_an_unreadable_config_keeps_the_oserror_as_its_cause(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read file") as caught:
        load_config(_unreadable(tmp_path))
    assert isinstance(caught.value.__cause__, NotADirectoryError)


def test_the_user_sees_one_line_and_the_cause_only_when_asked(tmp_path: Path, capsys) -> None:
    config = _unreadable(tmp_path)
    assert main(["validate", str(config)], environ={}) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("evalgate: error: ") and "Traceback" not in err
    assert main(["validate", str(config)], environ={"EVALGATE_TRACEBACK": "1"}) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[0].startswith("evalgate: error: ")
    assert "NotADirectoryError" in err and "direct cause" in err

"""The Action's inputs, read as the runner passes them: ``INPUT_<NAME>`` environment variables.

GitHub upper-cases input names and keeps underscores (``github_token`` → ``INPUT_GITHUB_TOKEN``);
an input left empty in the workflow arrives as an empty string, so defaults are applied here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from evalgate.errors import UsageError

__all__ = ["ActionInputs"]

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off", ""}


def _bool(name: str, value: str) -> bool:
    low = value.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise UsageError(f"input {name}: expected true or false, got {value!r}")


@dataclass(frozen=True)
class ActionInputs:
    config: str
    github_token: str
    comment: bool
    comment_key: str
    comment_author: str  # the login whose sticky comment is adopted (the token's identity)
    overrides: tuple[str, ...]
    mode: str
    working_directory: str
    results_store: str
    baseline: str
    output_dir: str
    results_dir: str

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> ActionInputs:
        def get(name: str, default: str = "") -> str:
            value = environ.get(f"INPUT_{name.upper()}", "")
            return value.strip() if value.strip() else default

        mode = get("mode", "run")
        if mode not in ("run", "publish"):
            raise UsageError(f"input mode: expected run or publish, got {mode!r}")
        baseline = get("baseline")  # empty: evals.yaml's baseline.mode (from the base branch)
        if baseline not in ("", "auto", "stored", "rerun", "none"):
            raise UsageError(
                f"input baseline: expected auto, stored, rerun or none, got {baseline!r}"
            )
        overrides = tuple(
            line.strip().removeprefix("--")
            for line in get("overrides").splitlines()
            if line.strip() and not line.strip().startswith("#")
        )
        return cls(
            config=get("config", "evals.yaml"),
            github_token=get("github_token"),
            comment=_bool("comment", get("comment", "true")),
            comment_key=get("comment_key"),
            comment_author=get("comment_author", "github-actions[bot]"),
            overrides=overrides,
            mode=mode,
            working_directory=get("working_directory", "."),
            results_store=get("results_store"),  # empty: evals.yaml's baseline.store
            baseline=baseline,
            output_dir=get("output_dir", "evalgate-outputs"),
            results_dir=get("results_dir", "evalgate-outputs"),
        )

"""GitHub Actions workflow commands, as GitHub documents them.

Every function takes its file path or stream explicitly; nothing here reads ``os.environ``. The
Action's entry point reads the environment once (:meth:`ActionsEnv.from_environ`) and passes
paths down, so tests need no monkeypatching and a local run never writes into a runner's files.

Reference: "Workflow commands for GitHub Actions" (docs.github.com), and the escaping rules of
``@actions/core`` (``command.ts``), which the runner undoes when it parses a command.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

__all__ = [
    "SUMMARY_LIMIT_BYTES",
    "ActionsEnv",
    "annotation",
    "append_summary",
    "escape_data",
    "escape_property",
    "group",
    "mask",
    "set_outputs",
]

# GitHub rejects a step summary over 1 MiB (the whole file of one step, not one write).
SUMMARY_LIMIT_BYTES = 1024 * 1024

_LEVELS = ("error", "warning", "notice")


@dataclass(frozen=True)
class ActionsEnv:
    """The parts of a runner's environment evalgate uses; all ``None`` outside Actions."""

    in_actions: bool
    output_path: Path | None  # GITHUB_OUTPUT
    summary_path: Path | None  # GITHUB_STEP_SUMMARY
    event_path: Path | None  # GITHUB_EVENT_PATH: the webhook payload that triggered the run
    event_name: str | None  # GITHUB_EVENT_NAME: "pull_request", "push", ...
    repository: str | None  # GITHUB_REPOSITORY: "owner/name"
    workflow: str | None  # GITHUB_WORKFLOW: the workflow's name (part of the sticky key)
    run_id: str | None
    server_url: str  # GITHUB_SERVER_URL: differs on GitHub Enterprise Server
    api_url: str  # GITHUB_API_URL: likewise

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> ActionsEnv:
        def path(name: str) -> Path | None:
            value = environ.get(name)
            return Path(value) if value else None

        return cls(
            in_actions=environ.get("GITHUB_ACTIONS") == "true",
            output_path=path("GITHUB_OUTPUT"),
            summary_path=path("GITHUB_STEP_SUMMARY"),
            event_path=path("GITHUB_EVENT_PATH"),
            event_name=environ.get("GITHUB_EVENT_NAME") or None,
            repository=environ.get("GITHUB_REPOSITORY") or None,
            workflow=environ.get("GITHUB_WORKFLOW") or None,
            run_id=environ.get("GITHUB_RUN_ID") or None,
            server_url=(environ.get("GITHUB_SERVER_URL") or "https://github.com").rstrip("/"),
            api_url=(environ.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/"),
        )

    @property
    def run_url(self) -> str | None:
        """The run's page, where its artifacts are listed; ``None`` outside Actions."""
        if not (self.repository and self.run_id):
            return None
        return f"{self.server_url}/{self.repository}/actions/runs/{self.run_id}"


def escape_data(text: str) -> str:
    """Escape a command's message: the runner reads one command per line."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a property value: also ``:`` and ``,``, which delimit properties."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(
    level: str,
    message: str,
    *,
    file: str | None = None,
    line: int | None = None,
    title: str | None = None,
) -> str:
    """Return an ``::error``/``::warning``/``::notice`` command line (without newline)."""
    if level not in _LEVELS:
        raise ValueError(f"annotation level must be one of {', '.join(_LEVELS)}; got {level!r}")
    props: list[str] = []
    if file is not None:
        props.append(f"file={escape_property(file)}")
    if line is not None:
        props.append(f"line={int(line)}")
    if title is not None:
        props.append(f"title={escape_property(title)}")
    head = f"::{level} {','.join(props)}" if props else f"::{level}"
    return f"{head}::{escape_data(message)}"


def mask(value: str) -> str:
    """Return the ``::add-mask::`` command(s) that hide ``value`` in the job's logs.

    A multi-line value is masked whole and line by line, as GitHub advises: the log masker
    matches what is printed one line at a time. Its lines under 4 characters are left out
    (masking ``}`` would garble every line of the log and hide nothing secret). An empty value
    returns ``""``: there is nothing to hide.
    """
    if not value:
        return ""
    values = [value]  # the whole value too, for anything that prints it on one line, escaped
    if len(value.splitlines()) > 1:
        values += [line for line in value.splitlines() if len(line.strip()) >= 4]
    return "\n".join(f"::add-mask::{escape_data(v)}" for v in values)


@contextlib.contextmanager
def group(title: str, *, stream: TextIO | None = None) -> Iterator[None]:
    """Fold everything printed inside into one collapsible section of the log."""
    out = stream if stream is not None else sys.stdout
    print(f"::group::{escape_data(title)}", file=out, flush=True)
    try:
        yield
    finally:
        print("::endgroup::", file=out, flush=True)


def _output_text(value: object) -> str:
    # Workflow expressions compare outputs as strings: `true`, not Python's `True`.
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _delimiter(value: str, name: str) -> str:
    while True:
        delim = f"EVALGATE_EOF_{secrets.token_hex(16)}"
        if delim not in value and delim not in name:
            return delim


def set_outputs(path: str | os.PathLike[str], mapping: Mapping[str, object]) -> None:
    """Append step outputs to the ``GITHUB_OUTPUT`` file at ``path``.

    Always the multi-line form ``name<<DELIM`` / value / ``DELIM``, with a random delimiter that
    occurs in neither name nor value: a value can then never end the block early or smuggle in
    another output, whatever it contains.
    """
    chunks: list[str] = []
    for name, raw in mapping.items():
        if not name or any(c in name for c in "\r\n") or "<<" in name or "=" in name:
            raise ValueError(f"invalid output name {name!r}")
        value = _output_text(raw)
        delim = _delimiter(value, name)
        chunks.append(f"{name}<<{delim}\n{value}\n{delim}\n")
    # One write per call: outputs from one call are never interleaved with another writer's.
    with open(path, "a", encoding="utf-8", newline="") as fh:
        fh.write("".join(chunks))


def _utf8_prefix(data: bytes, limit: int) -> bytes:
    """The longest prefix of ``data`` within ``limit`` bytes that ends at a line boundary."""
    cut = data[:limit]
    newline = cut.rfind(b"\n")
    if newline >= 0:
        return cut[: newline + 1]
    # No line break at all: cut at a character boundary instead (never inside a UTF-8 sequence).
    return cut.decode("utf-8", "ignore").encode("utf-8")


def append_summary(
    path: str | os.PathLike[str],
    markdown: str,
    *,
    artifact_hint: str | None = None,
    limit_bytes: int = SUMMARY_LIMIT_BYTES,
) -> bool:
    """Append Markdown to the ``GITHUB_STEP_SUMMARY`` file; return whether it was truncated.

    The limit counts the whole file (earlier writes of the same step included). Over it, the text
    is cut at a line boundary, an open code fence is closed, and a note says where the full
    report is (``artifact_hint``, e.g. "the `evalgate-report` artifact of this run").
    """
    target = Path(path)
    used = target.stat().st_size if target.exists() else 0
    if markdown and not markdown.endswith("\n"):
        markdown += "\n"  # the next append starts a new block instead of gluing onto this line
    data = markdown.encode("utf-8")
    truncated = used + len(data) > limit_bytes
    if truncated:
        note = "\n> ⚠️ **Summary truncated**: GitHub limits a job step summary to 1 MiB."
        if artifact_hint:
            note += f" The full report is in {artifact_hint}."
        note_bytes = (note + "\n").encode("utf-8")
        room = limit_bytes - used - len(note_bytes) - len(b"```\n")
        if room <= 0:
            return True  # nothing fits; writing anything would make GitHub drop the summary
        head = _utf8_prefix(data, room).decode("utf-8")
        if sum(1 for ln in head.splitlines() if ln.lstrip().startswith("```")) % 2:
            head += "```\n"  # a cut inside a code block would swallow the note
        data = (head + note + "\n").encode("utf-8")
    with open(target, "ab") as fh:
        fh.write(data)
    return truncated

"""Every ```yaml block of docs/*.md is checked as what it is: a reader copies them.

- an evals.yaml, whole or some of its top-level keys (the rest filled in: one model, one arith
  benchmark), is run through `evalgate validate`; a block whose first line names a config of the
  repository (`# examples/quickstart/evals.yaml`) is validated beside that file's data;
- a GitHub workflow (a mapping with `jobs`) parses, with `on` and `jobs`;
- a block the page shows as a fragment says so in an HTML comment on the line before the fence,
  ``<!-- yaml-check: KIND -->`` and a blank line, which the reader does not see:
  - ``under {BENCHMARK}``: the fields of one benchmark entry (indented as in the page), merged
    into BENCHMARK (default ``{name: arith, kind: arith}``), then validated as above;
  - ``schema``: validated by the config's schema and policy only (`load_config`, the errors
    `validate` gives for a field), where the data it names live in the reader's repository
    (an environment package, a dataset file, a task folder); combinable with ``under``;
  - ``workflow-steps``: a list of workflow steps, each with `run` or `uses`.

A block with none of these shapes fails: a new kind of block must say what it is."""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.cli import main
from tests.conftest import ROOT

# The marker, then a blank line (Markdown would read a fence right after raw HTML as HTML).
BLOCK = re.compile(
    r"(?:<!--\s*yaml-check:\s*(?P<marker>.*?)\s*-->\n\n)?```yaml\n(?P<body>.*?)```", re.S
)
BASE_MODEL = {"name": "m", "backend": "local"}  # the embedded model: priced (0), keyless
BASE_BENCH = {"name": "arith", "kind": "arith"}


def _blocks() -> list[Any]:
    out = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        for n, m in enumerate(BLOCK.finditer(text), 1):
            line = text.count("\n", 0, m.start("body"))
            rel = page.relative_to(ROOT)
            out.append(pytest.param(rel, m["marker"] or "", m["body"], id=f"{rel}:{line}#{n}"))
    return out


def _marker(marker: str) -> tuple[str, dict[str, Any] | None, bool]:
    """(kind, the benchmark for `under`, schema only)."""
    schema = bool(re.search(r"\bschema\b", marker))
    under = re.search(r"\bunder\b\s*(\{.*\})?", marker)
    if under:
        base = yaml.safe_load(under.group(1)) if under.group(1) else dict(BASE_BENCH)
        return "under", base, schema
    if "workflow-steps" in marker:
        return "workflow-steps", None, False
    assert marker in ("", "schema"), f"unknown yaml-check marker {marker!r}"
    return "config", None, schema


def _validate(folder: Path, config: dict[str, Any], schema: bool) -> None:
    path = folder / "evals.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    if schema:
        from evalgate.config.load import load_config

        load_config(path, [])  # raises a ConfigError naming the field
        return
    environ = {"CI": "true", "OPENAI_API_KEY": "k"}
    code = main(["validate", str(path)], environ=environ)
    assert code == 0


@pytest.mark.parametrize(("page", "marker", "body"), _blocks())
def test_every_yaml_block_of_the_docs_is_checked_as_what_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], page: Path, marker: str, body: str
) -> None:
    kind, base, schema = _marker(marker)
    data = yaml.safe_load(textwrap.dedent(body))
    if kind == "workflow-steps":
        assert isinstance(data, list) and data, body
        assert all(isinstance(s, dict) and ("run" in s or "uses" in s) for s in data), body
        return
    if kind == "config" and isinstance(data, dict) and "jobs" in data:  # a GitHub workflow
        assert "on" in data or True in data, body  # YAML 1.1 reads a bare `on` as True
        assert all("runs-on" in job or "uses" in job for job in data["jobs"].values()), body
        return
    if kind == "under":
        assert isinstance(data, dict), body
        data = {"benchmarks": [{**base, **data}]}
    assert isinstance(data, dict), f"{page}: a yaml block that is no config: mark it ({body!r})"
    folder = tmp_path / "config"
    first = body.splitlines()[0]
    named = re.fullmatch(r"#\s*(\S+/evals\.yaml)\s*", first)
    if named:  # the repository's own config, shown: validated beside its data
        shutil.copytree(ROOT / Path(named.group(1)).parent, folder)
    else:
        folder.mkdir()
    config = {"models": [BASE_MODEL], "benchmarks": [BASE_BENCH], **data}
    if "labels:" in body:  # a judge's labelled set, fitting the block's scale
        label = 4 if "scale:" in body else "pass"
        row = {"question": "q", "completion": "c", "reference": "r", "label": label}
        (folder / "judge-labels.jsonl").write_text(json.dumps(row) + "\n")
    try:
        _validate(folder, config, schema)
    except AssertionError:
        raise AssertionError(f"{page}: {capsys.readouterr().err.strip()}") from None

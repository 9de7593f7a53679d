"""Results on the Hugging Face Hub: a dataset repository with one folder per run.

``runs/{run_id}/{benchmark--org--model}/`` holds each benchmark's results.jsonl, metadata.json
and run_config.json, ``runs/{run_id}/scorecard.md`` the invocation's scorecard, and README.md is
a dataset card listing every run in the repository. A push is one commit that adds the new run's
folder and rewrites the card; nothing else in the repository is touched.

The upload goes through the ``huggingface_hub`` client (``pip install 'evalgate-action[hub]'``),
at ``HF_ENDPOINT`` when set. The token is read from ``HF_TOKEN`` and handed to the client only:
it is never printed, and it is scrubbed from any error message that quotes a request.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from evalgate.errors import ConfigError, InfraError
from evalgate.run.layout import EVALS, RUN_FILES, SCORECARD, VERDICT
from evalgate.run.rundir import find_run_dirs, load_run

if TYPE_CHECKING:
    from huggingface_hub import HfApi

__all__ = ["RUN_FILES", "dataset_card", "push_run", "run_files"]


def _run_dirs(run: str, output_root: Path) -> list[Path]:
    """The invocation's run directories, each checked by the run directory's loader: a run
    that did not finish or was damaged is refused in one line, not uploaded as a result."""
    dirs = find_run_dirs(output_root, run)
    for run_dir in dirs:
        load_run(run_dir)
    return dirs


def _scorecard(run_id: str, dirs: list[Path], output_root: Path) -> Path | None:
    """The output root's scorecard, if it is this run's (a later invocation overwrites it)."""
    root = dirs[0].parent.parent.parent if dirs[0].parent.parent.name == EVALS else output_root
    card, verdict = root / SCORECARD, root / VERDICT
    try:
        runs = json.loads(verdict.read_text(encoding="utf-8")).get("runs", [])
    except (OSError, ValueError):
        return None
    mine = any(Path(r.get("run_dir") or "").name == run_id for r in runs)
    return card if mine and card.is_file() else None


def run_files(run: str, output_root: Path) -> tuple[str, list[tuple[str, Path]]]:
    """The run id and (path in the repository, local file) for every file a push uploads."""
    dirs = _run_dirs(run, output_root)
    run_id = dirs[0].name
    files = [
        (f"runs/{run_id}/{d.parent.name}/{name}", d / name)
        for d in dirs
        for name in RUN_FILES
        if (d / name).is_file()
    ]
    card = _scorecard(run_id, dirs, output_root)
    if card is not None:
        files.append((f"runs/{run_id}/{SCORECARD}", card))
    return run_id, files


def dataset_card(repo: str, runs: Mapping[str, list[str]]) -> str:
    """README.md: the front matter the Hub's viewer reads, and the runs' table (newest first)."""
    lines = [
        "---",
        "pretty_name: evalgate results",
        "tags: [evalgate, evaluation]",
        "configs:",
        "  - config_name: results",
        '    data_files: "runs/*/*/results.jsonl"',
        "---",
        "",
        f"# evalgate results: {repo}",
        "",
        "One folder per run, `runs/RUN_ID/BENCHMARK--ORG--MODEL/` with `results.jsonl` (one line",
        "per rollout), `metadata.json` and `run_config.json`; `runs/RUN_ID/scorecard.md` is the",
        "run's scorecard. Pushed by `evalgate push`.",
        "",
        "| run | benchmark × model folders |",
        "|---|---|",
    ]
    for run_id in sorted(runs, reverse=True):
        folders = ", ".join(f"`{f}`" for f in sorted(runs[run_id])) or "–"
        lines.append(f"| [`{run_id}`](runs/{run_id}) | {folders} |")
    return "\n".join(lines) + "\n"


def _existing_runs(api: HfApi, repo: str) -> dict[str, list[str]]:
    from huggingface_hub.errors import EntryNotFoundError

    runs: dict[str, list[str]] = {}
    try:
        entries = list(
            api.list_repo_tree(repo, path_in_repo="runs", repo_type="dataset", recursive=True)
        )
    except EntryNotFoundError:
        return runs
    for entry in entries:
        parts = entry.path.split("/")
        if len(parts) == 3 and not parts[2].endswith((".md", ".json", ".jsonl")):
            runs.setdefault(parts[1], []).append(parts[2])
        elif len(parts) >= 2:
            runs.setdefault(parts[1], [])
    return runs


def _scrub(text: str, token: str) -> str:
    return text.replace(token, "***") if token else text


def push_run(
    run: str,
    *,
    repo: str,
    output_root: Path,
    environ: Mapping[str, str],
    private: bool = True,
    log: Callable[[str], None] = print,
) -> str:
    """Upload one run (a run id under ``output_root`` or a run directory) as a new folder of the
    dataset repository ``repo``; returns the commit's URL."""
    try:
        from huggingface_hub import CommitOperationAdd, HfApi
        from huggingface_hub.errors import HfHubHTTPError
    except ImportError as exc:
        raise ConfigError(
            "pushing to the Hugging Face Hub needs huggingface_hub: "
            "pip install 'evalgate-action[hub]'"
        ) from exc
    token = environ.get("HF_TOKEN", "")
    if not token:
        raise ConfigError("HF_TOKEN is not set: a write token for the Hub is needed to push")
    run_id, files = run_files(run, output_root)
    api = HfApi(endpoint=environ.get("HF_ENDPOINT") or None, token=token)
    try:
        api.create_repo(repo, repo_type="dataset", private=private, exist_ok=True)
        runs = _existing_runs(api, repo)
        runs[run_id] = sorted({p.split("/")[2] for p, _ in files if p.count("/") == 3})
        ops = [CommitOperationAdd(path_in_repo=p, path_or_fileobj=str(f)) for p, f in files]
        card = dataset_card(repo, runs).encode("utf-8")
        ops.append(CommitOperationAdd(path_in_repo="README.md", path_or_fileobj=card))
        info = api.create_commit(
            repo, operations=ops, repo_type="dataset", commit_message=f"evalgate: run {run_id}"
        )
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        first = _scrub(str(exc), token).splitlines()[0]
        raise InfraError(f"push to the Hub dataset {repo}: HTTP {status}: {first}") from exc
    log(f"[evalgate] pushed run {run_id} ({len(files)} files) to dataset {repo}: {info.commit_url}")
    return str(info.commit_url)

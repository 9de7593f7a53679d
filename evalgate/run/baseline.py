"""The baseline a run was compared with, recorded in its run_config.json so `evalgate resume`
compares with the same one (and a sequential run's looks pair with the same items).

A run started with ``--baseline`` records ``{"path", "relative_path", "run_id", "results_sha256",
"origin"}``: where the baseline's run directory was (absolute, and relative to the run's own
directory, so a tree moved with its baseline still resumes), a digest of its journal (so a
resume notices a baseline that was replaced or re-run since) and where it came from (a base
commit, for the scorecard).
The baseline is referred to, not copied: the comparison needs all of it (fingerprints, every
rollout, the completions shown for flipped items).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from evalgate.errors import UsageError
from evalgate.run.layout import RESULTS, RUN_CONFIG
from evalgate.run.rundir import LoadedRun, load_run
from evalgate.run.runfiles import BaselineRef

__all__ = ["baseline_reference", "load_recorded_baseline", "results_digest"]


def results_digest(run_dir: Path) -> str:
    """SHA-256 of a run's journal (results.jsonl): which baseline run, exactly."""
    sha = hashlib.sha256()
    with (run_dir / RESULTS).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def baseline_reference(baseline: LoadedRun) -> BaselineRef:
    """What a run's run_config.json records about the baseline it is compared with."""
    path = Path(baseline.path).resolve()
    return BaselineRef(
        path=str(path),
        run_id=path.name,
        results_sha256=results_digest(path),
        origin=dict(baseline.origin),  # e.g. the base commit, for the scorecard
    )


def load_recorded_baseline(run_dir: Path, ref: BaselineRef) -> LoadedRun:
    """The baseline recorded in ``run_dir``'s run_config.json, checked against its digest.

    Raises UsageError (one line, naming the run, the baseline and the fix) when the baseline is
    gone or its results changed since the run started.
    """
    path = Path(ref.path)
    where = f"{run_dir / RUN_CONFIG}: baseline.path {path}"
    moved = run_dir / (ref.relative_path or "")
    if not (path / RESULTS).is_file() and ref.relative_path:
        # The output tree moved (an artifact, a copy): the same relative place, if it is there.
        path = moved.resolve() if (moved / RESULTS).is_file() else path
    if not (path / RESULTS).is_file():
        raise UsageError(
            f"{where} is gone; restore that run directory there to resume, or start a new run"
        )
    if results_digest(path) != ref.results_sha256:
        raise UsageError(
            f"{where} changed since this run started (results.jsonl differs); "
            "restore the original to resume, or start a new run"
        )
    return load_run(path, origin=ref.origin or {"run_id": ref.run_id or path.name})

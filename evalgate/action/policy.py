"""The base branch's policy, read and applied so that a pull request cannot dodge its own gate.

What a PR may not change for its own run (it applies after merge): the gate (thresholds, δ, α,
``on_inconclusive``, gated metrics), the baseline settings, the **set of benchmarks** the base
gates, and each one's **measurement** (kind, scorer, rollouts, the verifiers environment). The
base's ``gate`` and ``baseline`` replace the PR's before anything runs; after the run,
:func:`policy_checks` turns every benchmark the PR dropped or renamed, and every measurement it
changed, into a FAIL with the reason: a renamed benchmark would otherwise carry no threshold and
no baseline, and PASS at any score.

Reading the base fails closed: any git error, and a base evals.yaml this evalgate cannot load,
is a :class:`PolicyError` (verdict ERROR). The one exception is a base commit with no evals.yaml
at all — the PR that adopts evalgate — which runs on its own policy and says so plainly.
"""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from evalgate.action import git as gitops
from evalgate.config.load import Config, load_config
from evalgate.config.spec.budget import apply_ceiling
from evalgate.errors import ConfigError, EvalgateError, ExitCode
from evalgate.gate import Check, Verdict

__all__ = ["BasePolicy", "PolicyError", "apply_policy", "policy_checks", "read_base_policy"]

REMOVED = "removed by this PR; base policy requires it"
_ORDER = ("ERROR", "FAIL", "INCONCLUSIVE", "PASS")


class PolicyError(EvalgateError):
    """The base branch's policy could not be read: the gate fails closed (verdict ERROR)."""

    exit_code = ExitCode.INFRA


@dataclass(frozen=True)
class BasePolicy:
    """Where this run's policy came from, and the base benchmarks' measurements."""

    source: Literal["base", "first-adoption", "own"]
    base_sha: str | None = None
    config: Config | None = None  # the base's, when source == "base"
    changes: tuple[str, ...] = ()  # what the PR changes in the policy (applies after merge)

    @property
    def measurements(self) -> dict[str, dict[str, Any]]:
        if self.config is None:
            return {}
        return {b.name: measurement(b) for b in self.config.benchmarks}

    def applied(self, config: Config) -> tuple[Config, str | None]:
        """``config`` (the PR's) with the base's gate and baseline settings, and its budget held
        under the base's caps (a ceiling the PR cannot raise); plus a note naming any cap the PR
        tried to raise."""
        if self.config is None:
            return config, None
        budget, note = apply_ceiling(config.budget, self.config.budget)
        update = {"gate": self.config.gate, "baseline": self.config.baseline, "budget": budget}
        return config.model_copy(update=update), note

    def note(self, config_name: str, overridden: list[str] | tuple[str, ...] = ()) -> str:
        """One plain sentence for the scorecard: which policy judged this run. ``overridden``:
        what the workflow's inputs changed, so the sentence never claims more than was applied."""
        if self.source == "first-adoption":
            return (
                f"the base branch has no {config_name} (first adoption): this PR's own gate "
                "policy was applied; from the next PR on, the base branch's policy applies"
            )
        if self.source == "own":
            return ""
        sha = (self.base_sha or "")[:12]
        text = (
            f"the base branch's policy (`{config_name}` at `{sha}`: gate, baseline, benchmark "
            "set and scorers) was applied"
        )
        if overridden:
            text += f", except {' and '.join(overridden)}"
        if self.changes:
            text += f"; this PR's changes to {', '.join(self.changes)} apply after merge"
        return text


def measurement(bench: Any) -> dict[str, Any]:
    """What a benchmark measures with: a PR may change the subject (model, prompt, sampling), not
    this. Paths are left out (they differ between checkouts); their contents are the dataset,
    which the per-item pairing already checks."""
    out: dict[str, Any] = {"kind": bench.kind, "rollouts": bench.eval.rollouts}
    scorer = getattr(bench, "scorer", None)
    if scorer is not None:
        out["scorer"] = scorer.model_dump(mode="json")
    if bench.kind == "verifiers":
        out["environment"] = {"env_id": bench.env_id, "env_args": bench.env_args}
    grader = getattr(bench, "grader", None)
    if grader is not None:  # an inspect task's model-graded scorers: the judge is the exam's
        out["grader"] = grader.model_dump(mode="json")
    return out


def _git_state(workdir: Path, sha: str, path: str, token: str | None) -> bool:
    """Whether ``path`` exists at ``sha``; a GitFailed for anything git cannot answer."""
    # actions/checkout fetches one commit by default: fetch the base (with the token as a header,
    # shallowly only into a shallow clone) through the one git wrapper.
    gitops.ensure_commit(workdir, sha, token)
    listing = gitops.git(workdir, "ls-tree", "--name-only", sha, "--", path)
    return bool(listing.strip())


def _materialise(workdir: Path, sha: str, config_path: str, into: Path) -> Path:
    """The base's evals.yaml and its ``benchmarks/`` folder, written under ``into``."""
    target = into / Path(config_path).name
    target.write_text(gitops.git(workdir, "show", f"{sha}:./{config_path}"), encoding="utf-8")
    local = (Path(config_path).parent / "benchmarks").as_posix()
    listing = gitops.git(workdir, "ls-tree", "--name-only", sha, "--", f"{local}/")
    for name in listing.split():
        if name.endswith((".yaml", ".yml")):
            (into / "benchmarks").mkdir(exist_ok=True)
            text = gitops.git(workdir, "show", f"{sha}:./{name}")
            (into / "benchmarks" / Path(name).name).write_text(text, encoding="utf-8")
    return target


def read_base_policy(
    workdir: Path,
    base_sha: str | None,
    config_path: str,
    config: Config,
    *,
    is_pr: bool,
    overrides: tuple[str, ...] = (),
    token: str | None = None,
) -> BasePolicy:
    """The policy this run is judged by. Raises :class:`PolicyError` when the base is unreadable.

    ``overrides`` (the workflow's) apply to the base's file as to the PR's: they belong to the
    job, and a measurement they change must change on both sides alike."""
    if not is_pr:
        return BasePolicy("own")  # a push is judged by its own commit: it is the base
    if not base_sha:
        raise PolicyError(
            "the pull_request event names no base commit, so the base branch's gate policy "
            "cannot be read (refusing to use the PR's own)",
            hint="run evalgate on pull_request events from actions/checkout",
        )
    try:
        if not _git_state(workdir, base_sha, config_path, token):
            return BasePolicy("first-adoption", base_sha)
        with tempfile.TemporaryDirectory(prefix="evalgate-policy-") as tmp:
            path = _materialise(workdir, base_sha, config_path, Path(tmp))
            try:
                base = load_config(path, overrides)
            except ConfigError:  # an override may name a benchmark only the PR has
                base = load_config(path)
    except gitops.GitFailed as exc:
        raise PolicyError(
            f"cannot read the base branch's {config_path} at {base_sha[:12]} ({exc}); the gate "
            "fails closed rather than use the PR's own policy",
            hint="check out with `fetch-depth: 0`, or make the base commit fetchable",
        ) from None
    except EvalgateError as exc:
        raise PolicyError(
            f"the base branch's {config_path} at {base_sha[:12]} is not a valid policy for this "
            f"evalgate ({exc}); fix it on the base branch first",
        ) from None
    return BasePolicy("base", base_sha, base, _changes(base, config))


def _changes(base: Config, pr: Config) -> tuple[str, ...]:
    out = []
    if base.gate != pr.gate:
        out.append("the gate")
    if base.baseline != pr.baseline:
        out.append("the baseline settings")
    base_m = {b.name: measurement(b) for b in base.benchmarks}
    pr_m = {b.name: measurement(b) for b in pr.benchmarks}
    if set(base_m) - set(pr_m):
        out.append("the benchmark set")
    if any(pr_m[n] != m for n, m in base_m.items() if n in pr_m):
        out.append("a benchmark's measurement")
    return tuple(out)


def policy_checks(policy: BasePolicy, config: Config) -> list[Check]:
    """A FAIL for every benchmark the base requires that the PR dropped, renamed or re-scored."""
    if policy.config is None:
        return []
    pr = {b.name: measurement(b) for b in config.benchmarks}
    gated = policy.config.gate.thresholds
    out = []
    for name, base in policy.measurements.items():
        metrics = ", ".join(sorted(gated.get(name, {}))) or "-"
        if name not in pr:
            out.append(Check("*", name, metrics, "policy", "FAIL", REMOVED, p=0.0))
            continue
        diff = sorted(k for k in base.keys() | pr[name].keys() if base.get(k) != pr[name].get(k))
        if diff:
            reason = (
                f"this PR changes its {', '.join(diff)}: not comparable with the base policy, "
                "so it cannot PASS (land the change on the base branch first)"
            )
            out.append(Check("*", name, metrics, "policy", "FAIL", reason, p=0.0))
    return out


def apply_policy(verdict: Verdict, checks: list[Check]) -> Verdict:
    """``verdict`` with the policy checks added: they come first in the reasons, and the status is
    the most severe of all."""
    if not checks:
        return verdict
    all_checks = (*checks, *verdict.checks)
    status = next(s for s in _ORDER if s == verdict.status or any(c.status == s for c in checks))
    reasons = tuple(f"{c.benchmark}: {c.reason}" for c in checks) + verdict.reasons
    return dataclasses.replace(verdict, status=status, checks=all_checks, reasons=reasons)

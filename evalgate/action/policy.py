"""The base branch's policy, read and applied so that a pull request cannot dodge its own gate.

What a PR may not change for its own run (it applies after merge): the gate (thresholds, δ, α,
``on_inconclusive``, gated metrics), the baseline settings, the **set of benchmarks** the base
gates, and the whole **exam** (:mod:`evalgate.config.split`: benchmark definitions and their data
and task files, scorers, ``eval.*``, sandboxes, publishing), read from the base commit's tree
(:mod:`evalgate.action.exam`). The PR brings only the candidate. After the run,
:func:`policy_checks` turns every benchmark the PR dropped or renamed into a FAIL with the
reason: a renamed benchmark would otherwise carry no threshold and no baseline, and PASS at any
score.

Reading the base fails closed: any git error, and a base evals.yaml this evalgate cannot load,
is a :class:`PolicyError` (verdict ERROR). The one exception is a base commit with no evals.yaml
at all — the PR that adopts evalgate — which runs on its own policy and says so plainly.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from evalgate.action import exam, workflow_inputs
from evalgate.action import git as gitops
from evalgate.config.load import Config, load_config
from evalgate.config.spec.budget import apply_ceiling
from evalgate.errors import ConfigError, EvalgateError, ExitCode
from evalgate.gate import Check, Verdict
from evalgate.run.fingerprint import measurement  # the one derivation, shared with compare

if TYPE_CHECKING:
    pass

__all__ = [
    "NEW_IN_PR",
    "BasePolicy",
    "PolicyError",
    "apply_policy",
    "mark_proposals",
    "policy_checks",
    "read_base_policy",
]

REMOVED = "removed by this PR; base policy requires it"
NEW_IN_PR = "new in this PR: gated after merge"
_ORDER: tuple[Literal["ERROR", "FAIL", "INCONCLUSIVE", "PASS"], ...] = (
    "ERROR",
    "FAIL",
    "INCONCLUSIVE",
    "PASS",
)


class PolicyError(EvalgateError):
    """The base branch's policy could not be read: the gate fails closed (verdict ERROR)."""

    exit_code = ExitCode.INFRA


@dataclass(frozen=True)
class BasePolicy:
    """Where this run's policy came from, and the base benchmarks' measurements."""

    source: Literal["base", "first-adoption", "own"]
    base_sha: str | None = None
    config: Config | None = None  # the base's, when source == "base"
    changes: tuple[str, ...] = ()  # what the PR changes in the exam (applies after merge)
    # What the workflow's inputs would change in the exam (not applied: a FAIL), and the
    # overrides that were applied (candidate fields only).
    workflow: tuple[str, ...] = ()
    overrides: tuple[str, ...] = ()
    config_path: str = ""  # the base's evals.yaml, relative to the repository's top
    # The workflow's `baseline` / `results_store` inputs this run may use ("": evals.yaml's).
    baseline_input: str = ""
    store_input: str = ""

    @property
    def measurements(self) -> dict[str, dict[str, object]]:
        if self.config is None:
            return {}
        return {b.name: measurement(b) for b in self.config.benchmarks}

    def applied(self, config: Config) -> tuple[Config, str | None]:
        """``config`` (the PR's candidate) with the base's exam (:func:`exam.merge`: benchmark
        definitions, data and tasks, eval settings, sandboxes, publishing), gate and baseline
        settings, and its budget held under the base's caps (a ceiling the PR cannot raise);
        plus a note naming any cap the PR tried to raise."""
        if self.config is None:
            return config, None
        budget, note = apply_ceiling(config.budget, self.config.budget)
        update = {"gate": self.config.gate, "baseline": self.config.baseline, "budget": budget}
        return exam.merge(self.config, config).model_copy(update=update), note

    def workflow_note(self) -> str | None:
        """The scorecard's first note when the workflow's inputs would change the exam."""
        if not self.workflow:
            return None
        return (
            f"the workflow changes the exam: {'; '.join(self.workflow)}. On pull_request the "
            "workflow is the PR's, so the gate used the base branch's exam without it, and FAILs"
        )

    def exam_note(self, config_name: str) -> str | None:
        """The scorecard's first note: which exam judged this run, and what the PR changed in
        it (applied once merged). None when the PR changes nothing in the exam."""
        if self.source == "first-adoption":
            return (
                f"first adoption: the base branch has no {config_name}, so this PR's own exam "
                "(benchmarks, data, gate) was used; from the next PR on the base's is"
            )
        if self.source != "base" or not self.changes:
            return None
        return (
            f"this PR changes the exam ({'; '.join(self.changes)}): the gate used the base "
            f"branch's exam (`{config_name}` at `{(self.base_sha or '')[:12]}`); the change "
            "takes effect when merged"
        )

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
            "set and the whole exam) was applied"
        )
        if overridden:
            text += f", except {' and '.join(overridden)}"
        return text


def _git_state(workdir: Path, sha: str, path: str, token: str | None) -> bool:
    """Whether ``path`` exists at ``sha``; a GitFailed for anything git cannot answer."""
    # actions/checkout fetches one commit by default: fetch the base (with the token as a header,
    # shallowly only into a shallow clone) through the one git wrapper.
    gitops.ensure_commit(workdir, sha, token)
    listing = gitops.git(workdir, "ls-tree", "--name-only", sha, "--", path)
    return bool(listing.strip())


def read_base_policy(
    workdir: Path,
    base_sha: str | None,
    config_path: str,
    config: Config,
    *,
    is_pr: bool,
    into: Path,
    overrides: tuple[str, ...] = (),
    token: str | None = None,
    environ: Mapping[str, str] | None = None,
    baseline_input: str = "",
    store_input: str = "",
) -> BasePolicy:
    """The policy this run is judged by. Raises :class:`PolicyError` when the base is unreadable,
    a ConfigError when the PR sends a secret where the base does not, or names a path outside
    the repository.

    The base commit's tree is written under ``into``, which must outlive the run: the exam's
    files (data, tasks, inspect task files) are read there, never from the PR's checkout.
    ``overrides`` (the workflow's) that change only the candidate apply to the base's file as to
    the PR's (a measurement they change must change on both sides alike); one that changes the
    exam, and a ``config`` other than the base's, is not applied and FAILs
    (:mod:`evalgate.action.workflow_inputs`)."""
    if not is_pr:
        # A push is judged by its own commit, with the job's inputs.
        return BasePolicy("own", overrides=overrides, baseline_input=baseline_input,
                          store_input=store_input)  # fmt: skip
    if not base_sha:
        raise PolicyError(
            "the pull_request event names no base commit, so the base branch's gate policy "
            "cannot be read (refusing to use the PR's own)",
            hint="run evalgate on pull_request events from actions/checkout",
        )
    try:
        top = Path(gitops.git(workdir, "rev-parse", "--show-toplevel").strip()).resolve()
    except gitops.GitFailed as exc:
        raise PolicyError(f"{workdir} is not a git checkout ({exc})") from exc
    exam.check_paths(config, top, config_path)
    exam.check_secret_routes(None, config, config_path)  # the job's own tokens, in any case
    try:
        prefix = gitops.git(workdir, "rev-parse", "--show-prefix").strip()
        has_config = _git_state(workdir, base_sha, config_path, token)  # relative to workdir
        exam.materialise(workdir, base_sha, into)
        candidate, workflow = _split_overrides(into, overrides, environ or {})
        where, found = _base_config(into, prefix, config_path, has_config, environ or {})
        workflow += found
        if where is None:
            return BasePolicy("first-adoption", base_sha, overrides=candidate,
                              baseline_input=baseline_input, store_input=store_input)  # fmt: skip
        base, config = _load_base(where, candidate, into, top, config)
    except gitops.GitFailed as exc:
        raise PolicyError(
            f"cannot read the base branch's {config_path} at {base_sha[:12]} ({exc}); the gate "
            "fails closed rather than use the PR's own policy",
            hint="check out with `fetch-depth: 0`, or make the base commit fetchable",
        ) from exc
    except EvalgateError as exc:
        raise PolicyError(
            f"the base branch's {config_path} at {base_sha[:12]} is not a valid policy for this "
            f"evalgate ({exc}); fix it on the base branch first",
        ) from None
    exam.check_secret_routes(base, config, config_path)
    changes = exam.exam_changes(base, into, config, top)
    given = {"baseline": baseline_input, "results_store": store_input}
    ours = {"baseline": base.baseline.mode, "results_store": base.baseline.store}
    refused = workflow_inputs.baseline_input_changes(into, environ or {}, given, ours)
    workflow += refused
    allowed = {k: v for k, v in given.items() if not any(r.startswith(f"{k} ") for r in refused)}
    rel = where.relative_to(into).as_posix()
    return BasePolicy(
        "base", base_sha, base, tuple(changes), tuple(workflow), candidate, rel,
        allowed.get("baseline", ""), allowed.get("results_store", ""),
    )  # fmt: skip


def _split_overrides(
    into: Path, overrides: tuple[str, ...], environ: Mapping[str, str]
) -> tuple[tuple[str, ...], list[str]]:
    """The workflow's overrides that apply (the candidate's) and, named, those that are refused.

    An override of an exam field is the PR's workflow changing the exam (not applied: a FAIL),
    unless the base's own workflows pass it too: then it is the base's."""
    passed = workflow_inputs.base_overrides(into, environ)
    exam_fields, candidate = workflow_inputs.exam_overrides(
        tuple(o for o in overrides if o.strip() not in passed)
    )
    candidate += tuple(o for o in overrides if o.strip() in passed)
    return candidate, [f"{name} (the `overrides` input)" for name in exam_fields]


def _load_base(
    where: Path, candidate: tuple[str, ...], into: Path, top: Path, config: Config
) -> tuple[Config, Config]:
    """The base's config (with the candidate's overrides where they apply) and the PR's, each
    reading local `datasets` files from its own tree."""
    try:  # its host paths stay in the exam's tree (which has no .git of its own)
        base = load_config(where, candidate, root=into)
    except ConfigError:  # an override may name a benchmark only the PR has
        base = load_config(where, root=into)
    # Where `datasets` looks for local files (the working directory), in the base's tree.
    here = Path.cwd().resolve()
    if here == top or top in here.parents:
        base = exam.anchor_local_data(base, into / here.relative_to(top))
        config = exam.anchor_local_data(config, here)
    return base, config


def _base_config(
    tree: Path, prefix: str, config_path: str, has_config: bool, environ: Mapping[str, str]
) -> tuple[Path | None, list[str]]:
    """The base's evals.yaml in its tree (None: the base does not use evalgate, the first
    adoption), and what the PR's ``config`` / ``working_directory`` inputs change: the base's
    are the ones its own workflows give evalgate, else the file the input names, else the
    default ``evals.yaml`` (a base that uses evalgate is never a first adoption)."""
    here = os.path.normpath(prefix or ".")
    steps = workflow_inputs.base_step_inputs(tree, environ)
    changed: list[str] = []
    if steps is not None and not any(
        c in (None, config_path) and w in (None, here) for c, w in steps
    ):
        config, folder = steps[0]
        if all(c not in (None, config_path) for c, _ in steps):
            changed.append(f"config {config_path} (the base's workflow gives {config})")
        if all(w not in (None, here) for _, w in steps):
            changed.append(f"working_directory {here} (the base's workflow gives {folder})")
        path = tree / (folder or here) / (config or config_path)
        if path.is_file():
            return path, changed
    if has_config:
        return tree / prefix / config_path, changed
    for default in (tree / prefix / "evals.yaml", tree / "evals.yaml"):
        if default.is_file():
            shown = default.relative_to(tree).as_posix()
            return default, changed or [f"config {prefix}{config_path} (the base has {shown})"]
    return None, []


def policy_checks(policy: BasePolicy, config: Config) -> list[Check]:
    """A FAIL when the workflow's inputs would change the exam, when no model of the PR has a
    label the base gates, and for every benchmark the base requires that the PR dropped or
    renamed. (A changed
    measurement cannot reach here: the run used the base's exam. The check stays, so that a
    field the merge ever missed fails instead of passing.)"""
    if policy.config is None:
        return []
    out = []
    if policy.workflow:  # first: the reason the comment leads with
        reason = f"the workflow changes the exam: {'; '.join(policy.workflow)}"
        out.append(Check("*", "workflow", "-", "policy", "FAIL", reason, p=0.0))
    ours, theirs = [m.name for m in policy.config.models], [m.name for m in config.models]
    if ours and not set(ours) & set(theirs):
        # Runs pair with their baseline on the model's label: under new labels only, nothing
        # the PR runs is compared with the base, and a regression would pass on thresholds.
        reason = (
            f"none of this PR's models ({', '.join(theirs)}) has a label the base gates "
            f"({', '.join(ours)}): nothing would be compared with the baseline, so it cannot "
            "PASS (keep a label to compare the model behind it)"
        )
        out.append(Check("*", "models", "-", "policy", "FAIL", reason, p=0.0))
    pr = {b.name: measurement(b) for b in config.benchmarks}
    gated = policy.config.gate.thresholds
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


def mark_proposals(verdict: Verdict, policy: BasePolicy) -> Verdict:
    """``verdict`` with the score rows of what the base does not have (a benchmark or a model
    only the PR has) saying so: the base gates them once the PR is merged, not now."""
    if policy.config is None:
        return verdict
    benchmarks = {b.name for b in policy.config.benchmarks}
    models = {m.name for m in policy.config.models}
    checks = tuple(
        dataclasses.replace(c, reason=NEW_IN_PR)
        if c.kind == "score" and (c.benchmark not in benchmarks or c.model not in models)
        else c
        for c in verdict.checks
    )
    return verdict if checks == verdict.checks else dataclasses.replace(verdict, checks=checks)


def apply_policy(verdict: Verdict, checks: list[Check]) -> Verdict:
    """``verdict`` with the policy checks added: they come first in the reasons, and the status is
    the most severe of all."""
    if not checks:
        return verdict
    all_checks = (*checks, *verdict.checks)
    status = next(s for s in _ORDER if s == verdict.status or any(c.status == s for c in checks))
    reasons = tuple(f"{c.benchmark}: {c.reason}" for c in checks) + verdict.reasons
    return dataclasses.replace(verdict, status=status, checks=all_checks, reasons=reasons)

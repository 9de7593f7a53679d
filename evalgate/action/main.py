"""The Action's two modes, end to end.

``run``: load evals.yaml under the BASE branch's policy (``policy.py``: gate, baseline, benchmark
set and scorers; an unreadable base fails closed), post an "in progress" comment, find the
baseline (result store at the merge-base, or a re-run of the base commit), evaluate, gate, and
publish: job summary, outputs, annotations, the sticky comment. On a push to the default branch
the runs are stored as the new baseline.

``publish`` (``publish_mode.py``): post the comment of a run whose outputs a ``pull_request`` job
uploaded as an artifact. It executes nothing from the PR: the fork-safe half of the two-workflow
recipe.

Every path ends in the outputs ``verdict`` and ``exit_code``. An error replaces the "in progress"
comment with what happened (plus the scorecard, when the run got that far); an unexpected
exception is a crash, exit 4, its traceback in ``crash.log`` in the outputs.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING

from pydantic import JsonValue

from evalgate import pipeline
from evalgate.action import git as gitops
from evalgate.action.context import CIContext
from evalgate.action.inputs import ActionInputs
from evalgate.action.policy import (
    BasePolicy,
    apply_policy,
    mark_proposals,
    policy_checks,
    read_base_policy,
)
from evalgate.action.publish_mode import publish_artifact
from evalgate.action.publisher import (
    Notices,
    missing_token_notice,
    portable,
    under_title,
    with_notices,
)
from evalgate.action.trend import trend_section
from evalgate.action.workspace import leaves_workspace_as_found
from evalgate.compare.paired import LoadedRun
from evalgate.config.load import Config, load_config
from evalgate.errors import EvalgateError, ExitCode, crash_report, secret_values
from evalgate.gate import Verdict
from evalgate.publish import actions
from evalgate.publish.github import GitHubClient, GitHubError
from evalgate.publish.sticky import in_progress_body, sticky_key, upsert_sticky_comment
from evalgate.report import code_span
from evalgate.report.html import write_html
from evalgate.report.link import report_link
from evalgate.report.trend import trend_points
from evalgate.run.fingerprint import SCORING_VERSION
from evalgate.run.layout import REPORT_HTML, SCORECARD
from evalgate.run.progress import make_progress
from evalgate.run.rundir import load_run, load_runs
from evalgate.serve import open_server
from evalgate.store import ResultStore, RunKey, StoredRun, StoreError, open_store

if TYPE_CHECKING:
    from evalgate.serve.registry import ServerFactory

__all__ = ["run_action", "store_name"]


def store_name(benchmark: str, model_label: str) -> str:
    """A run's name in the result store: by model *label*, so a PR that swaps the model behind a
    label is still compared with the label's baseline."""
    return f"{benchmark}--{model_label}"


class _Publisher:
    """Everything the Action writes to GitHub, each channel failing soft and visibly."""

    def __init__(
        self, ctx: CIContext, inputs: ActionInputs, environ: Mapping[str, str], out: IO[str]
    ):
        self.ctx, self.inputs, self.out = ctx, inputs, out
        self.env = actions.ActionsEnv.from_environ(environ)
        self.notices = Notices()  # each once; shown in the comment, scorecard.md and summary
        self.client: GitHubClient | None = None
        if ctx.is_pr and inputs.comment and inputs.github_token:
            self.client = GitHubClient(inputs.github_token, api_url=ctx.api_url)
        self.key = sticky_key(ctx.workflow, inputs.comment_key)
        self.degraded = False  # the token may not comment here: not tried again this run
        self.posted = False  # the comment was written (publish mode's exit code says so)
        if notice := missing_token_notice(ctx, inputs):
            self.notices.append(notice)
            self.log(actions.annotation("notice", f"evalgate: {notice}"))
        # Only a comment written by the identity that posts is ever adopted: anyone can paste
        # the marker into a comment of their own.
        self.author = inputs.comment_author
        # What the error path still reports: the scorecard and outputs, once the run has them.
        self.scorecard: str | None = None
        self.outputs: dict[str, str | int] = {}
        self.crash_dir: Path | None = None
        self.secrets: list[str] = [inputs.github_token, *secret_values(environ)]

    def log(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def comment(self, body: str) -> None:
        if self.client is None or self.ctx.pr_number is None or self.degraded:
            return
        self.notices.discard("comment")  # an earlier failure is moot if this one posts
        try:
            result = upsert_sticky_comment(
                self.client,
                self.ctx.repository,
                self.ctx.pr_number,
                with_notices(body, self.notices),
                key=self.key,
                artifact_hint=f"the `{self.inputs.output_dir}` artifact of {self.ctx.run_url}",
                author=self.author,
            )
        except GitHubError as exc:  # a comment is a courtesy: it never changes the verdict
            if exc.rate_limited:
                # GitHub asked for a wait the client could not make: another write seconds
                # later is what its secondary limits punish (longer blocks), so none this run.
                self.degraded = True
                exc_text = f"GitHub's rate limit refused the PR comment ({exc}); not tried again"
                self.notices.append(exc_text, key="comment")
                self.log(actions.annotation("warning", f"evalgate: {exc_text}"))
                return
            self.notices.append(f"could not post the PR comment: {exc}", key="comment")
            self.log(actions.annotation("warning", f"evalgate: could not comment: {exc}"))
            return
        self.posted = not result.degraded
        if result.author and result.author != self.author:
            # The token is not the job's own (a PAT or an App): keep updating what it wrote.
            self.notices.append(
                f"the PR comment is posted as {result.author}, not {self.author}: set the "
                f"input `comment_author: {result.author}` so later runs update it"
            )
            self.author = result.author
        if result.degraded and result.notice:
            self.degraded = True
            self.notices.append(result.notice)
            self.log(actions.annotation("notice", result.notice))

    def finish(self, markdown: str, outputs: Mapping[str, str | int]) -> None:
        markdown = with_notices(markdown, self.notices)
        if self.env.summary_path is not None:
            actions.append_summary(self.env.summary_path, markdown)
        if self.env.output_path is not None:
            actions.set_outputs(self.env.output_path, portable(outputs, self.ctx.workspace))

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


def _secret_values(config: Config, environ: Mapping[str, str]) -> list[str]:
    """Values of every environment variable the config names as holding a secret."""
    names = {
        value
        for model in config.models
        for field, value in model.model_dump().items()
        if field.endswith("_env") and isinstance(value, str)
    }
    return [environ[n] for n in sorted(names) if environ.get(n)]


def _stored_baselines(
    store: ResultStore, commits: list[str], config: Config
) -> tuple[dict[tuple[str, str], LoadedRun], list[str]]:
    """The runs stored for the merge-base (``commits[0]``) or its nearest stored ancestor, and
    what has none (each with why, when it is there but unusable)."""
    found: dict[tuple[str, str], LoadedRun] = {}
    missing = []
    for model in config.models:
        for bench in config.benchmarks:
            stored = store.find(commits, store_name(bench.name, model.name))
            if stored is None:
                missing.append(f"{model.name}/{bench.name}")
                continue
            run = _load_stored(stored, commits[0])
            recorded = run.config.fingerprint.measurement
            if recorded is None or recorded.scoring_version != SCORING_VERSION:
                # Stored by an evalgate that scored or identified items otherwise: it cannot
                # pair with this run, so it counts as absent (`auto` evaluates the base again).
                missing.append(f"{model.name}/{bench.name} (stored by another scoring version)")
                continue
            found[(model.name, bench.name)] = run
    return found, missing


def _load_stored(stored: StoredRun, merge_base: str) -> LoadedRun:
    """A stored baseline read back and checked for shape: a corrupt store is a one-line error
    naming the run and the fix, not a traceback from deep inside the comparison."""
    origin: dict[str, JsonValue] = {
        "commit": stored.key.commit,
        "stored_at": stored.stored_at,
        "merge_base": merge_base,
    }
    where = f"stored baseline {stored.key.name} @ {stored.key.commit[:12]} ({stored.path})"
    fix = "delete it from the result store, or push to the default branch to store a new one"
    try:  # the run directory's one loader checks every file, line and field
        return load_run(stored.path, origin=origin)
    except EvalgateError as exc:
        raise StoreError(f"{where} is corrupt: {exc}", hint=fix) from exc


def _rerun_baseline(
    workdir: Path, sha: str, policy: BasePolicy, out_root: Path, environ: Mapping[str, str],
    server_factory: ServerFactory, log: Callable[[str], None], why: dict[str, JsonValue],
) -> dict[tuple[str, str], LoadedRun]:  # fmt: skip
    """Evaluate the base commit itself (same items, same seeds) in a detached worktree;
    ``why`` it is re-run goes with the runs, for the comment's baseline line."""
    tmp = Path(tempfile.mkdtemp(prefix="evalgate-base-"))
    try:
        gitops.git(workdir, "worktree", "add", "--detach", str(tmp / "wt"), sha)
        # The base's evals.yaml (the one its policy was read from), with only the overrides
        # that change the candidate: the workflow's inputs never change the exam.
        base_config = load_config(tmp / "wt" / policy.config_path, policy.overrides)
        log(f"[evalgate] running the baseline at the merge-base {sha[:12]} ({why['why']})")
        how = pipeline.Invocation(out_root, dict(environ), make_progress(dict(environ)), log,
                                  server_factory)  # fmt: skip
        pipeline.run(base_config, how)
        origin: dict[str, JsonValue] = {"commit": sha, "rerun": True, "merge_base": sha, **why}
        return load_runs(out_root, origin=lambda _: dict(origin))
    finally:
        with contextlib.suppress(gitops.GitFailed):
            gitops.git(workdir, "worktree", "remove", "--force", str(tmp / "wt"))
        shutil.rmtree(tmp, ignore_errors=True)


def _baselines(base: str, mode: str, store: ResultStore | None, config: Config, workdir: Path,
               policy: BasePolicy, out_root: Path, environ: Mapping[str, str],
               server_factory: ServerFactory, pub: _Publisher,
               ) -> dict[tuple[str, str], LoadedRun]:  # fmt: skip
    """The baseline runs of ``base`` (the merge-base): stored, else (``auto``) re-run."""
    baselines: dict[tuple[str, str], LoadedRun] = {}
    missing: list[str] = []
    if store is not None and mode in ("auto", "stored"):
        baselines, missing = _stored_baselines(store, gitops.ancestors(workdir, base), config)
    if mode == "rerun" or (mode == "auto" and (store is None or bool(missing))):
        # Why, as the scorecard words it (evalgate.report._origin): the setting, or what is
        # not stored at the merge-base or its ancestors.
        why: dict[str, JsonValue] = {"why": "rerun" if mode == "rerun" else "no-store"}
        if mode != "rerun" and store is not None:
            why = {"why": "not-stored", "missing": list[JsonValue](missing)}
        with actions.group("evalgate: baseline run"):
            return _rerun_baseline(
                workdir, base, policy, out_root / "baseline", environ, server_factory, pub.log,
                why,
            )  # fmt: skip
    if missing:
        pub.notices.append(
            f"no stored baseline at {base[:12]} or its ancestors for: {', '.join(missing)}"
        )
    return baselines


def _overridden(inputs: ActionInputs, config: Config, policy: BasePolicy) -> list[str]:
    """Every workflow input that changed something: the overrides applied (candidate fields:
    one on an exam field is a FAIL, not applied), a config or working directory other than the
    defaults, and the baseline settings the inputs replace."""
    out = []
    if policy.overrides:
        shown = ", ".join(f"`{o}`" for o in policy.overrides)
        out.append(f"the candidate overrides {shown} (the workflow's `overrides` input)")
    for name, value, default in (
        ("config", inputs.config, "evals.yaml"),
        ("working_directory", inputs.working_directory, "."),
    ):
        if value != default:
            out.append(f"{name} {value} (the workflow's `{name}` input)")
    if policy.baseline_input and policy.baseline_input != config.baseline.mode:
        out.append(f"baseline mode {policy.baseline_input} (the workflow's `baseline` input)")
    if policy.store_input and policy.store_input != config.baseline.store:
        out.append(f"result store {policy.store_input} (the workflow's `results_store` input)")
    return out


def _outputs(verdict: Verdict, out_root: Path) -> dict[str, str | int]:
    summary = {
        f"{r.model}/{r.benchmark}": {k: v.mean for k, v in r.metrics.items()} for r in verdict.runs
    }
    return {
        "verdict": verdict.status,
        "exit_code": int(verdict.exit_code),
        "scorecard": str(out_root / SCORECARD),
        "results_dir": str(out_root),
        "summary": json.dumps(summary, sort_keys=True),
    }


def _annotate(verdict: Verdict, pub: _Publisher) -> None:
    level = {"FAIL": "error", "ERROR": "error", "INCONCLUSIVE": "warning"}
    for check in verdict.checks:
        if check.status in level and not (
            check.status == "INCONCLUSIVE" and verdict.on_inconclusive == "pass"
        ):
            title = f"evalgate {check.status}: {check.model}/{check.benchmark}/{check.metric}"
            pub.log(actions.annotation(level[check.status], check.reason, title=title))


def _run(ctx: CIContext, inputs: ActionInputs, environ: Mapping[str, str], pub: _Publisher,
         server_factory: ServerFactory) -> int:  # fmt: skip
    # The base commit's tree, where the exam's files are read: it must outlive the run.
    with tempfile.TemporaryDirectory(prefix="evalgate-exam-") as exam_tree:
        return _run_in(ctx, inputs, environ, pub, server_factory, Path(exam_tree))


def _run_in(ctx: CIContext, inputs: ActionInputs, environ: Mapping[str, str], pub: _Publisher,
            server_factory: ServerFactory, exam_tree: Path) -> int:  # fmt: skip
    workdir = (ctx.workspace / inputs.working_directory).resolve()
    out_root = (workdir / inputs.output_dir).resolve()
    pub.crash_dir = out_root
    config = load_config(workdir / inputs.config, inputs.overrides)
    for secret in _secret_values(config, environ):
        pub.log(actions.mask(secret))
        pub.secrets.append(secret)
    token = inputs.github_token or None
    policy = read_base_policy(
        workdir,
        ctx.base_sha,
        inputs.config,
        config,
        is_pr=ctx.is_pr,
        into=exam_tree,
        overrides=inputs.overrides,
        token=token,
        environ=environ,
        baseline_input=inputs.baseline,
        store_input=inputs.results_store,
    )
    config, mode, store_spec = _apply_policy(policy, config, inputs, pub)
    pub.comment(in_progress_body(run_url=ctx.run_url))

    store: ResultStore | None = None
    if store_spec != "none":
        store = open_store(
            store_spec, repo=workdir, environ=environ, token=inputs.github_token or None
        )
    baselines: dict[tuple[str, str], LoadedRun] = {}
    if ctx.is_pr and ctx.base_sha and mode != "none":
        base = gitops.merge_base(workdir, ctx.base_sha, ctx.sha, token=token)
        baselines = _baselines(base, mode, store, config, workdir, policy, out_root, environ,
                               server_factory, pub)  # fmt: skip

    with actions.group("evalgate: evaluation"):
        how = pipeline.Invocation(out_root, dict(environ), make_progress(dict(environ)),
                                  pub.log, server_factory)  # fmt: skip
        verdict = pipeline.run(config, how, baselines=baselines)
    checks = policy_checks(policy, config)
    marked = mark_proposals(verdict, policy)  # what only the PR has: gated after merge
    link = report_link(environ, out_root)
    if checks or marked is not verdict:  # dropped, renamed or re-scored; the workflow's inputs
        verdict = apply_policy(marked, checks)
        pipeline.write_report(verdict, out_root, link=link)
    if link is None and ctx.run_id:  # the comment links no report: say how it would
        pub.log(
            actions.annotation(
                "notice",
                f"evalgate: report.html is not linked from the comment: this job uploads no "
                f"artifact with {inputs.output_dir} after a failing step (add "
                "actions/upload-artifact with `if: always()`, as examples/workflows/evalgate.yml)",
            )
        )
    (out_root / "pr.json").write_text(
        json.dumps({"pr_number": ctx.pr_number, "sha": ctx.sha, "repository": ctx.repository}),
        encoding="utf-8",
    )

    return _report(ctx, inputs, pub, verdict, policy, config, store, out_root)


def _apply_policy(
    policy: BasePolicy, config: Config, inputs: ActionInputs, pub: _Publisher
) -> tuple[Config, str, str]:
    """The config the base's policy makes of the PR's, the baseline mode and the result store
    it allows; what it changed or refused is noted first on the scorecard."""
    if note := policy.workflow_note():  # the workflow's inputs change the exam: FAIL, said first
        pub.notices.append(note)
    if note := policy.exam_note(inputs.config):  # first on the scorecard, under its title
        pub.notices.append(note)
    config, raised = policy.applied(config)
    if raised:  # the PR lifted a budget cap the base branch sets
        pub.notices.append(raised)
    # The inputs the policy allows: in PR mode one that would change the baseline FAILs instead.
    mode = policy.baseline_input or config.baseline.mode
    if policy.source == "first-adoption" and mode != "none":
        # The base has no evals.yaml: there is nothing to re-run and nothing stored to compare.
        pub.notices.append("no baseline: the base branch does not use evalgate yet")
        mode = "none"
    return config, mode, policy.store_input or config.baseline.store


def _report(ctx: CIContext, inputs: ActionInputs, pub: _Publisher, verdict: Verdict,
            policy: BasePolicy,
            config: Config, store: ResultStore | None, out_root: Path) -> int:  # fmt: skip
    """The verdict out: the policy note and trend added, baselines stored on the default branch,
    the comment, the scorecard file, the summary and the outputs."""
    markdown = (out_root / SCORECARD).read_text(encoding="utf-8")
    if note := policy.note(inputs.config, _overridden(inputs, config, policy)):
        markdown = under_title(markdown, f"> **Policy:** {note}.\n")  # as the README says
    # From here on an error still reports the complete scorecard (summary, outputs, comment).
    pub.scorecard, pub.outputs = markdown, _outputs(verdict, out_root)
    if store is not None:
        try:
            trend = trend_points(store, verdict)
            markdown += trend_section(trend)
            write_html(verdict, out_root / REPORT_HTML, trend=trend)  # with the trend
            pub.scorecard = markdown
        except StoreError as exc:
            pub.notices.append(f"trend unavailable: {exc}")
    if ctx.on_default_branch and store is not None:
        for run in verdict.runs:
            if run.run_dir and run.infra_error is None:
                key = RunKey(commit=ctx.sha, name=store_name(run.benchmark, run.model))
                where = store.save(key, Path(run.run_dir))
                pub.log(f"[evalgate] stored baseline {key.name} @ {ctx.sha[:12]}: {where}")
    pub.scorecard = markdown
    _annotate(verdict, pub)
    pub.comment(markdown)
    # After the comment, so that a failure to post it is noted in the file too.
    (out_root / SCORECARD).write_text(with_notices(markdown, pub.notices), encoding="utf-8")
    pub.finish(markdown, pub.outputs)
    return int(verdict.exit_code)


def _error_body(pub: _Publisher, message: str, *, title: str) -> str:
    """The comment and summary that replace "in progress" when the run cannot finish: the error
    (escaped: it can quote the PR's files) and, when the run got that far, the scorecard."""
    body = f"## ⚠️ evalgate {title}\n\n{code_span(message)}\n"
    if pub.ctx.run_id:
        body += f"\nThe run: {pub.ctx.run_url}\n"
    if pub.scorecard:
        body += f"\n---\n\n{pub.scorecard}"
    return body


def _report_error(pub: _Publisher | None, out: IO[str], message: str, code: int, title: str,
                  environ: Mapping[str, str]) -> int:  # fmt: skip
    print(actions.annotation("error", message, title="evalgate"), file=out, flush=True)
    print(f"evalgate: {message}", file=sys.stderr, flush=True)
    if pub is None:  # the inputs or the event were unreadable: still say so where CI looks
        env = actions.ActionsEnv.from_environ(environ)
        if env.summary_path is not None:
            actions.append_summary(
                env.summary_path, f"## ⚠️ evalgate {title}\n\n{code_span(message)}\n"
            )
        if env.output_path is not None:
            actions.set_outputs(env.output_path, {"verdict": "ERROR", "exit_code": code})
        return code
    body = _error_body(pub, message, title=title)
    outputs = {**pub.outputs, "verdict": "ERROR", "exit_code": code}
    if pub.crash_dir is not None and (pub.crash_dir / "crash.log").is_file():
        outputs["crash_log"] = str(pub.crash_dir / "crash.log")
    try:  # replace a stale "in progress" comment with what happened
        pub.comment(body)
    finally:
        pub.finish(body, outputs)
    return code


@leaves_workspace_as_found
def run_action(
    environ: Mapping[str, str],
    *,
    out: IO[str] | None = None,
    server_factory: ServerFactory = open_server,
) -> int:
    """The Action's entrypoint. Returns the exit code; never raises for a user-fixable error.

    An unexpected exception is a bug, reported as one: one line, the traceback in the outputs'
    ``crash.log``, exit code 4, and the PR comment replaced with that error. A cancellation
    (SIGTERM arrives as KeyboardInterrupt) replaces the comment too, then propagates.
    """
    out = out or sys.stdout
    pub: _Publisher | None = None
    try:
        inputs = ActionInputs.from_environ(environ)
        if inputs.github_token:
            print(actions.mask(inputs.github_token), file=out, flush=True)
        ctx = CIContext.from_environ(environ)
        pub = _Publisher(ctx, inputs, environ, out)
        if inputs.mode == "publish":
            return publish_artifact(ctx, inputs, pub)
        return _run(ctx, inputs, environ, pub, server_factory)
    except EvalgateError as exc:
        return _report_error(
            pub, out, f"error: {exc}", int(exc.exit_code), "could not finish", environ
        )
    except KeyboardInterrupt:
        if pub is not None:
            with contextlib.suppress(Exception):
                _report_error(
                    pub, out, "cancelled (SIGTERM or Ctrl-C)", 130, "was cancelled", environ
                )
        raise
    except Exception as exc:
        secrets = pub.secrets if pub is not None else secret_values(environ)
        line = crash_report(exc, pub.crash_dir if pub else None, secrets=secrets)
        return _report_error(pub, out, line, int(ExitCode.INTERNAL), "crashed", environ)
    finally:
        if pub is not None:
            pub.close()

"""The Action's two modes, end to end.

``run``: load evals.yaml (the gate policy from the BASE branch's copy, so a PR cannot loosen its
own gate), post an "in progress" comment, find the baseline (result store at the merge-base, or a
re-run of the base commit), evaluate, gate, and publish: job summary, outputs, annotations, the
sticky comment. On a push to the default branch the runs are stored as the new baseline.

``publish``: post the comment of a run whose outputs a ``pull_request`` job uploaded as an
artifact. It executes nothing from the PR: the fork-safe half of the two-workflow recipe.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from evalgate import pipeline
from evalgate.action import git as gitops
from evalgate.action.context import CIContext
from evalgate.action.inputs import ActionInputs
from evalgate.action.publisher import Notices, missing_token_notice, portable, with_notices
from evalgate.action.trend import trend_section
from evalgate.action.workspace import leaves_workspace_as_found
from evalgate.compare.paired import LoadedRun, load_run
from evalgate.config._yamlio import load_yaml
from evalgate.config.load import Config, load_config
from evalgate.config.spec import BaselineSettings, GateSettings
from evalgate.errors import EvalgateError, ExitCode
from evalgate.gate import Verdict
from evalgate.publish import actions
from evalgate.publish.github import GitHubClient, GitHubError
from evalgate.publish.sticky import in_progress_body, sticky_key, upsert_sticky_comment
from evalgate.report.html import render_html, trend_points
from evalgate.run.progress import make_progress
from evalgate.serve import open_server
from evalgate.store import ResultStore, RunKey, StoreError, open_store

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
        if notice := missing_token_notice(ctx, inputs):
            self.notices.append(notice)
            self.log(actions.annotation("notice", f"evalgate: {notice}"))

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
            )
        except GitHubError as exc:  # a comment is a courtesy: it never changes the verdict
            self.notices.append(f"could not post the PR comment: {exc}", key="comment")
            self.log(actions.annotation("warning", f"evalgate: could not comment: {exc}"))
            return
        if result.degraded and result.notice:
            self.degraded = True
            self.notices.append(result.notice)
            self.log(actions.annotation("notice", result.notice))

    def finish(self, markdown: str, outputs: dict[str, Any]) -> None:
        markdown = with_notices(markdown, self.notices)
        if self.env.summary_path is not None:
            actions.append_summary(self.env.summary_path, markdown)
        if self.env.output_path is not None:
            actions.set_outputs(self.env.output_path, portable(outputs, self.ctx.workspace))

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


def _base_policy(workdir: Path, ctx: CIContext, inputs: ActionInputs, config: Config):
    """The gate policy and baseline settings from the base branch's evals.yaml (a PR must not
    loosen its own gate or opt out of the comparison), and a note when the PR changes them."""
    own = (config.gate, config.baseline)
    if not ctx.is_pr or not ctx.base_sha:
        return *own, None
    text = gitops.show_file(workdir, ctx.base_sha, inputs.config)
    if text is None:
        return *own, f"the base branch has no {inputs.config}: this PR's gate policy is used"
    try:
        layer = load_yaml(Path(inputs.config), text=text, source=f"{inputs.config}@base")
        data = layer.data if isinstance(layer.data, dict) else {}
        base = (
            GateSettings.model_validate(data.get("gate") or {}),
            BaselineSettings.model_validate(data.get("baseline") or {}),
        )
    except (EvalgateError, ValueError):
        return *own, "the base branch's gate policy is invalid: this PR's policy is used"
    if base != own:
        note = (
            f"this PR changes the gate policy in {inputs.config}; the base branch's policy was "
            "applied, the new one applies after merge"
        )
        return *base, note
    return *base, None


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
    found: dict[tuple[str, str], LoadedRun] = {}
    missing = []
    for model in config.models:
        for bench in config.benchmarks:
            stored = store.find(commits, store_name(bench.name, model.name))
            if stored is None:
                missing.append(f"{model.name}/{bench.name}")
                continue
            origin = {"commit": stored.key.commit, "stored_at": stored.stored_at}
            found[(model.name, bench.name)] = load_run(stored.path, origin=origin)
    return found, missing


def _rerun_baseline(
    workdir: Path, sha: str, inputs: ActionInputs, out_root: Path, environ: Mapping[str, str],
    server_factory: Callable[..., Any], log: Callable[[str], None],
) -> dict[tuple[str, str], LoadedRun]:  # fmt: skip
    """Evaluate the base commit itself (same items, same seeds) in a detached worktree."""
    tmp = Path(tempfile.mkdtemp(prefix="evalgate-base-"))
    try:
        gitops.git(workdir, "worktree", "add", "--detach", str(tmp / "wt"), sha)
        prefix = gitops.git(workdir, "rev-parse", "--show-prefix").strip()
        base_config = load_config(tmp / "wt" / prefix / inputs.config, inputs.overrides)
        log(f"[evalgate] running the baseline at {sha[:12]}")
        pipeline.run(
            base_config,
            output_root=out_root,
            environ=dict(environ),
            progress=make_progress(dict(environ)),
            server_factory=server_factory,
            log=log,
        )
        return {
            key: load_run(p, origin={"commit": sha, "rerun": True})
            for key, p in pipeline.find_runs(out_root).items()
        }
    finally:
        with contextlib.suppress(gitops.GitFailed):
            gitops.git(workdir, "worktree", "remove", "--force", str(tmp / "wt"))
        shutil.rmtree(tmp, ignore_errors=True)


def _outputs(verdict: Verdict, out_root: Path) -> dict[str, Any]:
    summary = {
        f"{r.model}/{r.benchmark}": {k: v.mean for k, v in r.metrics.items()} for r in verdict.runs
    }
    return {
        "verdict": verdict.status,
        "exit_code": int(verdict.exit_code),
        "scorecard": str(out_root / "scorecard.md"),
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
         server_factory: Callable[..., Any]) -> int:  # fmt: skip
    workdir = (ctx.workspace / inputs.working_directory).resolve()
    out_root = (workdir / inputs.output_dir).resolve()
    config = load_config(workdir / inputs.config, inputs.overrides)
    for secret in _secret_values(config, environ):
        pub.log(actions.mask(secret))
    gate, baseline_settings, policy_note = _base_policy(workdir, ctx, inputs, config)
    config = config.model_copy(update={"gate": gate, "baseline": baseline_settings})
    mode = inputs.baseline or baseline_settings.mode
    store_spec = inputs.results_store or baseline_settings.store
    if policy_note:
        pub.notices.append(policy_note)
    pub.comment(in_progress_body(run_url=ctx.run_url))

    store: ResultStore | None = None
    if store_spec != "none":
        store = open_store(
            store_spec, repo=workdir, environ=environ, token=inputs.github_token or None
        )
    baselines: dict[tuple[str, str], LoadedRun] = {}
    if ctx.is_pr and ctx.base_sha and mode != "none":
        base = gitops.merge_base(workdir, ctx.base_sha, ctx.sha)
        missing: list[str] = []
        if store is not None and mode in ("auto", "stored"):
            baselines, missing = _stored_baselines(store, gitops.ancestors(workdir, base), config)
        rerun = mode == "rerun" or (mode == "auto" and (store is None or bool(missing)))
        if rerun:
            with actions.group("evalgate: baseline run"):
                baselines = _rerun_baseline(
                    workdir, base, inputs, out_root / "baseline", environ, server_factory, pub.log
                )
        elif missing:
            pub.notices.append(
                f"no stored baseline at {base[:12]} or its ancestors for: {', '.join(missing)}"
            )

    with actions.group("evalgate: evaluation"):
        verdict = pipeline.run(
            config,
            output_root=out_root,
            environ=dict(environ),
            progress=make_progress(dict(environ)),
            server_factory=server_factory,
            log=pub.log,
            baselines=baselines,
        )
    (out_root / "pr.json").write_text(
        json.dumps({"pr_number": ctx.pr_number, "sha": ctx.sha, "repository": ctx.repository}),
        encoding="utf-8",
    )

    markdown = (out_root / "scorecard.md").read_text(encoding="utf-8")
    if store is not None:
        names = [store_name(r.benchmark, r.model) for r in verdict.runs]
        try:
            markdown += trend_section(store, names)
            html = render_html(verdict, trend=trend_points(store, verdict))  # with the trend
            (out_root / "report.html").write_text(html, encoding="utf-8")
        except StoreError as exc:
            pub.notices.append(f"trend unavailable: {exc}")
    if ctx.on_default_branch and store is not None:
        for run in verdict.runs:
            if run.run_dir and run.infra_error is None:
                key = RunKey(commit=ctx.sha, name=store_name(run.benchmark, run.model))
                where = store.save(key, Path(run.run_dir))
                pub.log(f"[evalgate] stored baseline {key.name} @ {ctx.sha[:12]}: {where}")
    _annotate(verdict, pub)
    pub.comment(markdown)
    # After the comment, so that a failure to post it is noted in the file too.
    (out_root / "scorecard.md").write_text(with_notices(markdown, pub.notices), encoding="utf-8")
    pub.finish(markdown, _outputs(verdict, out_root))
    return int(verdict.exit_code)


def _publish(ctx: CIContext, inputs: ActionInputs, pub: _Publisher) -> int:
    """Post a finished run's scorecard on its PR: the one the trusted event payload names, or
    (for a fork's PR, which GitHub leaves out of the payload) the artifact's, once verified."""
    results = (ctx.workspace / inputs.results_dir).resolve()
    verdict_file, scorecard = results / "verdict.json", results / "scorecard.md"
    if not verdict_file.is_file() or not scorecard.is_file():
        raise EvalgateError(
            f"{results}: no verdict.json / scorecard.md; download the run's artifact there first"
        )
    if not ctx.is_pr and ctx.pr_run is None:
        raise EvalgateError(
            "publish mode needs a workflow_run event for a pull request (the run's PR is read "
            "from the event, or verified against it)"
        )
    if not ctx.is_pr and inputs.comment and inputs.github_token:
        # pr.json is written by code the PR controls: with_artifact_pr takes its number only if
        # GitHub says that PR's head is the run's commit. Until then nothing can be posted:
        # pub.client stays None, so even the error handler's comment goes nowhere.
        client = GitHubClient(inputs.github_token, api_url=ctx.api_url)
        try:
            repo = ctx.repository
            ctx = ctx.with_artifact_pr(
                results / "pr.json", lambda n: client.get_pull_request(repo, n)
            )
        except BaseException:
            client.close()
            raise
        pub.ctx, pub.client = ctx, client
    verdict = json.loads(verdict_file.read_text(encoding="utf-8"))
    markdown = scorecard.read_text(encoding="utf-8")
    pub.comment(markdown)
    pub.finish(markdown, {"verdict": verdict.get("status", ""), "scorecard": str(scorecard)})
    return int(verdict.get("exit_code", ExitCode.INFRA))


@leaves_workspace_as_found
def run_action(
    environ: Mapping[str, str],
    *,
    out: IO[str] | None = None,
    server_factory: Callable[..., Any] = open_server,
) -> int:
    """The Action's entrypoint. Returns the exit code; never raises for a user-fixable error."""
    out = out or sys.stdout
    pub: _Publisher | None = None
    try:
        inputs = ActionInputs.from_environ(environ)
        if inputs.github_token:
            print(actions.mask(inputs.github_token), file=out, flush=True)
        ctx = CIContext.from_environ(environ)
        pub = _Publisher(ctx, inputs, environ, out)
        if inputs.mode == "publish":
            return _publish(ctx, inputs, pub)
        return _run(ctx, inputs, environ, pub, server_factory)
    except EvalgateError as exc:
        message = f"evalgate: error: {exc}"
        print(actions.annotation("error", str(exc), title="evalgate"), file=out, flush=True)
        print(message, file=sys.stderr, flush=True)
        if pub is not None:  # replace a stale "in progress" comment with what happened
            pub.comment(f"## ⚠️ evalgate could not finish\n\n{exc}\n\n{pub.ctx.run_url}\n")
            pub.finish(f"## ⚠️ evalgate could not finish\n\n{exc}\n", {"verdict": "ERROR"})
        return int(exc.exit_code)
    finally:
        if pub is not None:
            pub.close()

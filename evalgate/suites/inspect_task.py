"""``kind: inspect``: an inspect_ai task as a gate benchmark, scored by the task's own scorer.

The task is a file (``evals/my_task.py@my_task``) or a registered name (``inspect_evals/gsm8k``
with the inspect-evals package). Each inspect sample is an item (its id is inspect's sample id,
so base and PR pair per sample); each epoch is a rollout. The reward is the task's first scorer's
value as inspect itself converts it to a number (C/I, yes/no, 0–1).

inspect runs in its own process (:mod:`evalgate.suites._inspect_runner`), with the interpreter
``EVALGATE_INSPECT_PYTHON`` names (a venv with inspect_ai: it needs an openai newer than verifiers
allows), else this one. It reaches the served model through inspect's OpenAI-compatible provider
(``openai-api/evalgate/<model>`` at the endpoint's base URL). The task runs once, on the first
rollout the engine asks for, over the samples the engine said it would ask for (:meth:`plan`: all
of them, or a resumed run's missing ones, or a sequential look's slice), every epoch of each; the
engine then collects each
(sample, epoch) as its own rollout, so the journal, the comparison and the scorecard treat it
like any other kind. inspect's own log (``inspect view --log-dir RUN/artifacts`` reads it) is kept
in the run directory under ``artifacts/``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from evalgate._json import integer, items, mapping
from evalgate._repo_code import repo_env
from evalgate.errors import ConfigError, InfraError
from evalgate.sandbox.worker import jail
from evalgate.score.base import JudgeFailed
from evalgate.score.relay import Grader, Tab
from evalgate.suites.base import Item, Outcome, SuiteDefaults
from evalgate.suites.datasets import DataError
from evalgate.suites.identity import digest

if TYPE_CHECKING:
    from evalgate.config.spec import InspectBenchmark
    from evalgate.sandbox import Sandboxes
    from evalgate.serve.client import ChatClient
    from evalgate.suites._inspect_runner import SampleRecord

__all__ = ["Grader", "InspectSuite", "inspect_python"]

RUNNER = Path(__file__).with_name("_inspect_runner.py")
SCORE_SHAPE = 5  # the runner's exit status for a score the config must say how to read
INSTALL = (
    "inspect_ai is not installed for EVALGATE_INSPECT_PYTHON (or this interpreter): "
    "python -m venv .venv-inspect && .venv-inspect/bin/pip install 'inspect-ai==0.3.285' "
    "'openai>=3.4,<4' and set EVALGATE_INSPECT_PYTHON=.venv-inspect/bin/python"
)


def inspect_python(environ: dict[str, str] | None = None) -> str:
    """The interpreter that runs inspect: ``EVALGATE_INSPECT_PYTHON``, else this one."""
    env = os.environ if environ is None else environ
    named = env.get("EVALGATE_INSPECT_PYTHON")
    if not named:
        return sys.executable
    found = shutil.which(named)  # a path, or a name on PATH; must be an executable file
    if found is None:
        raise ConfigError(
            f"EVALGATE_INSPECT_PYTHON={named!r}: no such executable interpreter; point it at "
            "the python of the venv that has inspect_ai, or unset it"
        )
    return found


def _runner_env(
    api_key: str | None, declared: list[str], grader_key: str | None = None
) -> dict[str, str]:
    # The task file is the repository's code: a cleared environment (repo_code), plus what the
    # benchmark declares. inspect's openai-api provider reads <SERVICE>_API_KEY; the service is
    # "evalgate" (and "evalgate-grader" for the grader role).
    return repo_env(
        declared,
        {
            "EVALGATE_API_KEY": api_key or "none",
            "EVALGATE_GRADER_API_KEY": grader_key or "none",
            "PYTHONUNBUFFERED": "1",
        },
    )


async def _call(
    argv: list[str],
    *,
    cwd: Path,
    api_key: str | None,
    declared: list[str],
    grader_key: str | None = None,
    task_file: Path | None = None,
    writes: Sequence[Path] = (),
) -> tuple[int, str, str]:
    # The runner and the task it loads run in a jail (sandbox.worker): no capabilities, only
    # the interpreter, the runner, the task's folder (read-only) and its output folders, a pid
    # namespace that ends every process the task left when the runner exits.
    jailed = jail(
        argv,
        env=_runner_env(api_key, declared, grader_key),
        python=argv[0],
        reads=[RUNNER, *([task_file] if task_file is not None else [])],
        writes=writes,
        cwd=task_file.parent if task_file is not None else None,
    )
    try:
        proc = await asyncio.create_subprocess_exec(
            *jailed.argv,
            cwd=jailed.cwd,
            env=jailed.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            **jailed.options,
        )
    except OSError as exc:  # the interpreter went away, or is not executable
        raise InfraError(f"cannot start inspect's runner {argv[0]}: {exc.strerror or exc}") from exc
    try:
        out, err = await proc.communicate()
    finally:
        jailed.end(proc.pid)  # whatever is left of its group, the run cancelled or not
    return proc.returncode or 0, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:400] if lines else "no output"


def _folder_like(file: str) -> bool:
    """A path that is not a ``.py`` file: a folder (``./``, ``evals/``, ``/abs``), never a
    registered name (``inspect_evals/gsm8k``)."""
    if file.endswith(".py"):
        return False
    return file.endswith("/") or file.startswith(("/", "./", "../")) or file in (".", "..")


def _task_source(task: str, file: str, cwd: Path, meta: Mapping[str, object]) -> str:
    """A digest of the task's code: the task file, the modules it imported from its folder (as
    the runner listed them; read here, only inside that folder, links as links), a registered
    task's package version."""
    root = cwd.resolve()
    files: dict[str, object] = {}
    for rel in [*items(meta.get("files")), *([Path(file).name] if file.endswith(".py") else [])]:
        path = root / str(rel)
        if path.is_symlink():
            files[str(rel)] = {"link": os.readlink(path)}
        elif path.resolve().is_relative_to(root) and path.is_file():
            files[str(rel)] = path.read_bytes()
    return digest({"task": task.rpartition("@")[2], "files": files, "package": meta.get("package")})


def _check_epochs(spec: InspectBenchmark, epochs: int) -> None:
    """A task's own epochs are replaced by ``eval.rollouts`` (one rollout per epoch): said, not
    silent, unless the config chose its rollouts."""
    if epochs != spec.eval.rollouts and "rollouts" not in spec.eval.model_fields_set:
        raise ConfigError(
            f"benchmark {spec.name!r}: task {spec.task!r} asks for epochs={epochs}, and evalgate "
            f"runs eval.rollouts ({spec.eval.rollouts}) epochs per sample: set "
            f"`eval: {{rollouts: {epochs}}}` on this benchmark (or any number, to choose)"
        )


def _check_score_key(spec: InspectBenchmark, keys: list[str] | None) -> None:
    """A dict-valued score the task's scorer declares (metrics per key) needs ``score_key``,
    one of its keys: known when the task loads, so refused before the first call rather than
    after every sample was generated and graded."""
    if not keys:
        return
    listed = ", ".join(keys)
    if spec.score_key is None:
        raise DataError(
            f"benchmark {spec.name!r}: task {spec.task!r} declares a dict-valued score (keys: "
            f"{listed}): set `score_key` to the key this benchmark gates (one benchmark per key "
            "to gate several)",
            field="task",
        )
    if spec.score_key not in keys:
        raise DataError(
            f"benchmark {spec.name!r}: score_key {spec.score_key!r}: task {spec.task!r} "
            f"declares keys {listed}",
            field="score_key",
        )


def _task_args_fix(own: dict[str, str]) -> str:
    args = ", ".join(f"{name}: null" for name in own) or "<the judge parameter>: null"
    return f"`task_args: {{{args}}}`"


def _check_grader_used(spec: InspectBenchmark, own: dict[str, str]) -> None:
    """A ``grader:`` the task would not ask: its parameters name a judge model of its own
    (strong_reject's ``judge_llm="openai/gpt-4o"``), which its scorer asks instead of the
    ``grader`` role. Unrefused, the exam's judge would sit unused while another model grades
    (with a key in ``pass_env``) or every sample fails (without): refused before any call."""
    if spec.grader is None or not own:
        return
    named = ", ".join(f"{name}={value!r}" for name, value in own.items())
    raise DataError(
        f"benchmark {spec.name!r}: `grader:` is set, but task {spec.task!r} names its own judge "
        f"({named}) and would grade with it, never asking the grader: set "
        f"{_task_args_fix(own)} so that the task asks its `grader` role (if that is what it "
        "does with no model), or drop `grader:` to grade with the task's own judge",
        field="grader",
    )


def _attribute(total: dict[str, int], records: list[SampleRecord]) -> None:
    """Split the relay's count of the grader's tokens (``total``) over the samples: as inspect
    reports each sample's grader usage, with what the reports leave out (or a task's code
    under-reports) on the first sample, so the run's judge tokens are the relay's, not the
    task's word."""
    if not records:
        return
    for rec in records:
        rec["grader_usage"] = {k: int((rec.get("grader_usage") or {}).get(k) or 0) for k in total}
    for k, value in total.items():
        reported = sum(r["grader_usage"][k] for r in records)
        if reported > value:  # more than the relay answered: the relay's count stands
            for rec in records:
                rec["grader_usage"][k] = 0
            reported = 0
        records[0]["grader_usage"][k] += value - reported


@dataclass
class InspectSuite(SuiteDefaults):
    name: str
    items: list[Item]
    spec: InspectBenchmark
    cwd: Path  # the task file's paths are relative to evals.yaml's folder
    log_dir: Path = field(
        default_factory=lambda: Path(tempfile.mkdtemp(prefix="evalgate-inspect-"))
    )
    _batch: asyncio.Task[dict[tuple[str, int], SampleRecord]] | None = None
    _wanted: list[str] | None = None  # sample ids of the next batch (see plan); None: all
    judge: Grader | None = None  # the grader role's model (``grader:``); the run binds its client
    _grader_failed: tuple[str, str] | None = None  # (kind, detail): the relay's first failure

    @classmethod
    def from_spec(
        cls, spec: InspectBenchmark, *, sandboxes: Sandboxes | None = None
    ) -> InspectSuite:
        # A task file's path is absolute by now (anchored at evals.yaml's folder); inspect runs
        # beside it, so the task's own relative paths (data files) work as under `inspect eval`.
        file = spec.task.partition("@")[0]
        if _folder_like(file):
            raise ConfigError(
                f"benchmark {spec.name!r}: task {spec.task!r} is a folder, not a task (inspect "
                "would take whatever task it finds there): name one, `file.py@task_name` "
                "relative to the evals.yaml, or a registered name such as `inspect_evals/gsm8k`"
            )
        if file.endswith(".py") and not Path(file).is_file():
            raise ConfigError(
                f"benchmark {spec.name!r}: task file {file} not found (a task is "
                "`path/to/file.py@task_name`, relative to the evals.yaml, or a registered name "
                "such as `inspect_evals/gsm8k`)"
            )
        cwd = Path(file).parent if file.endswith(".py") else Path.cwd()
        with tempfile.TemporaryDirectory(prefix="evalgate-inspect-list-") as tmp:
            listing = Path(tmp) / "samples.jsonl"
            argv = [inspect_python(), str(RUNNER), "list", "--task", spec.task]
            argv += ["--task-args", json.dumps(spec.task_args), "--out", str(listing)]
            code, _, err = asyncio.run(
                _call(
                    argv,
                    cwd=cwd,
                    api_key=None,
                    declared=list(spec.pass_env),
                    task_file=Path(file) if file.endswith(".py") else None,
                    writes=[Path(tmp)],
                )
            )
            # The samples come through their own file: stdout is the task's (inspect_evals
            # prints "Loading dataset…" there).
            text = listing.read_text(encoding="utf-8") if code == 0 else ""
        if code != 0:
            if "No module named 'inspect_ai'" in err:
                raise ConfigError(f"benchmark {spec.name!r}: {INSTALL}")
            raise ConfigError(
                f"benchmark {spec.name!r}: inspect could not load task {spec.task!r}: "
                f"{_last_line(err)}"
            )
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        meta = mapping(next((r["task"] for r in rows if "task" in r), {}))
        rows = [r for r in rows if "task" not in r]
        _check_epochs(spec, integer(meta.get("epochs"), 1))
        own = mapping(meta.get("own_models"))
        _check_grader_used(spec, {str(k): str(v) for k, v in own.items()})
        keys = meta.get("score_keys")
        _check_score_key(spec, None if keys is None else [str(k) for k in items(keys)])
        # The task file holds the scorer (what decides every sample's score): its bytes, and
        # those of the modules it imported from its folder, are in each item's hash, beside what
        # the runner reports of the sample's own.
        source = _task_source(spec.task, file, cwd, meta)
        samples = [
            Item(
                id=r["id"],
                prompt=r["input"],
                answer=r["target"],
                group=r.get("group"),
                exam=digest({"sample": r.get("exam"), "task": source}),
            )
            for r in rows
        ]
        if spec.eval.num_examples is not None:
            samples = samples[: spec.eval.num_examples]
        if not samples:
            raise ConfigError(f"benchmark {spec.name!r}: task {spec.task!r} has no samples")
        grader = Grader(spec.grader) if spec.grader is not None else None
        return cls(name=spec.name, items=samples, spec=spec, cwd=cwd, judge=grader)

    def artifacts(self) -> list[Path]:
        """inspect's own logs, for the run directory."""
        return sorted(self.log_dir.glob("*")) if self.log_dir.is_dir() else []

    async def _run_task(self, client: ChatClient) -> dict[tuple[str, int], SampleRecord]:
        ep, spec = client.endpoint, self.spec
        out_file = self.log_dir / "evalgate-samples.jsonl"
        generate = {
            "temperature": spec.sampling.temperature,
            "max_tokens": spec.sampling.max_tokens,
            "top_p": spec.sampling.top_p,
            "seed": spec.sampling.seed,
            # evalgate's retry policy, not inspect's (which retries for hours): an unreachable
            # model must end as counted errors, not a hung gate.
            "max_retries": spec.eval.max_retries,
            "attempt_timeout": int(spec.eval.request_timeout_s),
        }
        task_path = spec.task.partition("@")[0]
        argv = [inspect_python(), str(RUNNER), "run", "--task", spec.task]
        argv += ["--task-args", json.dumps(spec.task_args), "--model", ep.model]
        argv += ["--base-url", ep.base_url, "--epochs", str(spec.eval.rollouts)]
        argv += ["--log-dir", str(self.log_dir), "--out", str(out_file)]
        argv += ["--max-connections", str(spec.eval.max_concurrent)]
        argv += ["--generate", json.dumps(generate)]
        if spec.score_key is not None:
            argv += ["--score-key", spec.score_key]
        for item_id in self._wanted if self._wanted is not None else [i.id for i in self.items]:
            argv += ["--sample-id", item_id]
        grader_key, tab, relay = None, None, None
        if self.judge is not None:
            # The grader role goes through the judge's relay (the exam's model and sampling,
            # evalgate's retries, cache and accounting), never straight to the judge's server.
            relay = self.judge.relay
            if relay is None:
                raise InfraError(f"benchmark {spec.name!r}: the grader's relay is not running")
            tab = relay.open()
            gep, gs = relay.endpoint(tab), self.judge.spec.sampling
            # No retries in inspect: the relay has retried already (evalgate's policy).
            grader = {"temperature": gs.temperature, "max_tokens": gs.max_tokens,
                      "top_p": gs.top_p, "seed": gs.seed, "max_retries": 0,
                      "attempt_timeout": generate["attempt_timeout"]}  # fmt: skip
            argv += ["--grader-model", gep["model"], "--grader-base-url", gep["base_url"]]
            argv += ["--grader-generate", json.dumps(grader)]
            grader_key = gep["api_key"]
        try:
            code, _, err = await _call(
                argv,
                cwd=self.cwd,
                api_key=ep.api_key,
                declared=list(spec.pass_env),
                grader_key=grader_key,
                task_file=Path(task_path) if task_path.endswith(".py") else None,
                writes=[self.log_dir],
            )
        finally:
            graded = relay.close(tab) if relay is not None and tab is not None else None
        if code == SCORE_SHAPE:
            raise ConfigError(f"benchmark {spec.name!r}: task {spec.task!r}: {_last_line(err)}")
        if code != 0 or not out_file.is_file():
            raise InfraError(f"inspect: task {spec.task!r} failed: {_last_line(err)}")
        results: dict[tuple[str, int], SampleRecord] = {}
        for line in out_file.read_text(encoding="utf-8").splitlines():
            rec: SampleRecord = json.loads(line)
            results[(rec["id"], rec["epoch"] - 1)] = rec
        out_file.unlink()
        if graded is not None:
            self._check_grader_asked(graded, list(results.values()))
            _attribute(graded.usage, list(results.values()))
            self._grader_failed = graded.failed
        return results

    def _check_grader_asked(self, graded: Tab, records: list[SampleRecord]) -> None:
        """The relay saw not one of the grader's calls while the candidate answered: the task's
        scorer asks a judge of its own (written into the task, beyond what the validate-time
        check of its parameters sees), so the benchmark was graded by another model than the
        exam's. Refused (a config error), never scored, nor a silent 0."""
        if sum(graded.seen.values()) or not any(r.get("completion") for r in records):
            return
        raise ConfigError(
            f"benchmark {self.spec.name!r}: `grader:` is set, but task {self.spec.task!r} never "
            f"asked it ({len(records)} samples ran, evalgate's judge relay saw no grader call): "
            "its scorer asks a model of its own; set the `task_args` that make the task ask its "
            "`grader` role (e.g. its judge parameter: null), or drop `grader:`"
        )

    def plan(self, pairs: list[tuple[Item, int]]) -> None:
        """Run only the samples the engine will ask for (a resumed run's missing ones, a
        sequential look's slice): inspect runs each selected sample's every epoch."""
        self._wanted = list(dict.fromkeys(item.id for item, _ in pairs))
        self._batch = None

    async def rollout(self, item: Item, index: int, client: ChatClient) -> Outcome:
        if self._batch is None:  # the first rollout starts the whole task; the rest wait on it
            self._batch = asyncio.ensure_future(self._run_task(client))
        results = await asyncio.shield(self._batch)
        rec = results.get((item.id, index))
        if rec is None:
            raise InfraError(f"inspect: no result for sample {item.id!r} epoch {index + 1}")
        judge: dict[str, object] | None = None
        if self.judge is not None:  # the grader's tokens: counted, at the grader's price
            usage = rec.get("grader_usage") or {"prompt_tokens": 0, "completion_tokens": 0}
            judge = {"usage": usage, "cost_usd": self.judge.cost(usage), "samples": []}
        failed = rec["error"] or rec.get("unscored")
        if failed is not None:
            partial = {"completion": rec.get("completion"), "usage": rec.get("usage") or {},
                       "judge": judge}  # fmt: skip
            if self._grader_failed is not None:
                # The grader failed after evalgate's retries (the relay saw it): a sample that
                # errored, or that its scorer left unscored, is a judge error, as a scorer
                # judge's would be.
                kind, detail = self._grader_failed
                raise JudgeFailed(f"judge_{kind}", f"{detail} ({failed})", partial)
            if rec["error"] is None:
                # Unscored (the grader gave no grade, inspect's NaN): this rollout's error,
                # counted against the error budget as an unreadable verdict is; never a 0.
                raise JudgeFailed("judge_unparseable", failed, partial)
            raise InfraError(f"inspect: {rec['error']}")
        reward = rec["reward"]
        if reward is None:  # the runner writes an error or `unscored` for a sample without one
            raise InfraError(f"inspect: no reward for sample {item.id!r} epoch {index + 1}")
        return Outcome(
            prompt=rec["messages"][:-1] or [{"role": "user", "content": item.prompt}],
            completion=rec["completion"],
            reward=reward,
            metrics={"accuracy": reward},
            usage=rec["usage"],
            judge=judge,
        )

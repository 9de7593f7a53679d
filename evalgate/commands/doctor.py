"""``evalgate doctor``: check the whole stack, phase by phase, each check with its fix.

Phases, in order: prerequisites (Python, the packages each configured backend and benchmark kind
needs, bwrap, git) → credentials (the keys evals.yaml names, Modal's token) → deploy (start every
configured server) → smoke (one chat completion per model) → eval (two items of every benchmark,
one rollout) → GPU (``nvidia-smi`` when a ``vllm`` backend is configured). A check whose
prerequisite failed is skipped, not failed again, so the first failure is the one to fix.

Exit code: 2 when a failure is the configuration's (evals.yaml invalid, a key not set), else 3
when any check failed (infrastructure), else 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from evalgate._json import number
from evalgate.commands._doctor_report import Check, Doctor, DoctorReport, Status, run_command
from evalgate.commands._doctor_setup import credentials, prerequisites
from evalgate.errors import ConfigError, EvalgateError
from evalgate.serve.base import ServeContext

if TYPE_CHECKING:
    from evalgate.config.load import Config
    from evalgate.config.spec import Benchmark, Model
    from evalgate.serve.base import Endpoint, ModelServer
    from evalgate.serve.client import Reply
    from evalgate.serve.registry import ServerFactory
    from evalgate.suites.base import Suite

    # benchmark name → (its config cut to the tiny eval, its suite)
    _Suites = dict[str, tuple[Benchmark, Suite]]

__all__ = ["PHASES", "Check", "DoctorReport", "run", "run_doctor"]

PHASES = ("prerequisites", "credentials", "deploy", "smoke", "eval", "gpu")

# ---------------------------------------------------------------------------------------------
# Phases


def _open(
    doc: Doctor, config: Config, model: Model, factory: ServerFactory, logs: Path
) -> ModelServer:
    # The same context a run gives its servers, so a template fallback resolves the same way.
    ctx = ServeContext(
        log_dir=logs,
        environ=doc.environ,
        config_dir=config.path.parent,
        benchmarks=tuple(b.name for b in config.benchmarks),
    )
    return factory(model, ctx)


def _deploy(
    doc: Doctor,
    config: Config,
    stack: contextlib.ExitStack,
    factory: ServerFactory,
    logs: Path,
) -> dict[str, Endpoint]:
    endpoints: dict[str, Endpoint] = {}
    for model in config.models:
        name = f"{model.name} ({model.backend})"
        if model.name in doc.blocked:
            doc.add("deploy", name, "skip", doc.blocked[model.name])
            continue
        t0 = time.perf_counter()
        server = None
        try:
            server = _open(doc, config, model, factory, logs)
            endpoint = stack.enter_context(server)
        except EvalgateError as exc:
            log = getattr(server, "log_path", None)
            doc.add(
                "deploy",
                name,
                "fail",
                exc.message,
                fix=f"read the server log: {log}" if log else (exc.hint or "see the message"),
                config_error=isinstance(exc, ConfigError),
            )
            doc.block(model.name, "the server did not start")
            continue
        detail = f"ready in {time.perf_counter() - t0:.1f} s at {endpoint.base_url}"
        template = getattr(server, "chat_template", None)
        if template is not None:
            detail += f"; chat template: {template.source}"
        doc.add("deploy", name, "pass", detail)
        endpoints[model.name] = endpoint
    return endpoints


def _smoke(doc: Doctor, config: Config, endpoints: dict[str, Endpoint]) -> None:
    from evalgate.config.spec import Sampling
    from evalgate.serve.client import ChatClient, RequestFailed

    async def ask(endpoint: Endpoint) -> Reply:
        sampling = Sampling(temperature=0.0, max_tokens=16)
        async with ChatClient(endpoint, sampling, timeout_s=300.0, max_retries=2) as client:
            return await client.chat([{"role": "user", "content": "Reply with the word OK."}])

    for model in config.models:
        if model.name not in endpoints:
            doc.add("smoke", model.name, "skip", doc.blocked.get(model.name, "not deployed"))
            continue
        try:
            reply = asyncio.run(ask(endpoints[model.name]))
        except RequestFailed as exc:
            fix = "read the server log"
            if exc.kind == "http_400":
                fix = "a model without a chat template answers 400: set chat_template"
            elif exc.kind in ("http_401", "http_403"):
                fix = "the endpoint rejected the API key: check the variable api_key_env names"
            doc.add("smoke", model.name, "fail", str(exc)[:200], fix=fix)
            doc.block(model.name, "the smoke request failed")
            continue
        text = " ".join(reply.text.split())[:40]
        doc.add("smoke", model.name, "pass", f"{text!r} in {reply.latency_s:.2f} s")


def _deploy_judges(
    doc: Doctor,
    config: Config,
    suites: _Suites,
    stack: contextlib.ExitStack,
    factory: ServerFactory,
    logs: Path,
) -> dict[str, Endpoint | None]:
    """Serve the judge of every judged benchmark (benchmark name → its endpoint, or None when
    it did not start), each on its own server as a run serves it: a judged benchmark's tiny
    eval is graded by its judge, not skipped (nor crashed on an unbound judge)."""
    served: dict[str, Endpoint | None] = {}
    out: dict[str, Endpoint | None] = {}
    for name, (_, suite) in suites.items():
        judge = getattr(suite, "judge", None)
        if judge is None:
            continue
        model = judge.spec.model
        key = json.dumps(model.model_dump(mode="json"), sort_keys=True)
        if key not in served:
            labelled = model.model_copy(update={"name": f"judge-{model.name}"})
            check = f"judge {model.name} ({model.backend}) of {name}"
            t0 = time.perf_counter()
            server = None
            try:
                server = _open(doc, config, labelled, factory, logs)
                served[key] = stack.enter_context(server)
            except EvalgateError as exc:
                log = getattr(server, "log_path", None)
                fix = f"read the server log: {log}" if log else (exc.hint or "see the message")
                doc.add("deploy", check, "fail", exc.message, fix=fix)
                served[key] = None
            else:
                url = endpoint.base_url if (endpoint := served[key]) else ""
                ready = f"ready in {time.perf_counter() - t0:.1f} s at {url}"
                asked = (
                    "structured (a JSON schema in response_format)"
                    if judge.response_format() is not None
                    else "free text (a last line VERDICT: …; scorer.verdict_format: json if "
                    "the server takes a JSON schema)"
                )
                doc.add("deploy", check, "pass", f"{ready}; verdicts asked for as {asked}")
        out[name] = served[key]
    return out


def _tiny_eval(
    doc: Doctor,
    config: Config,
    endpoints: dict[str, Endpoint],
    n_items: int,
    judges: Callable[[_Suites], dict[str, Endpoint | None]] = lambda suites: {},
) -> None:
    from evalgate.run.engine import run_suite
    from evalgate.run.judging import bound_judge
    from evalgate.serve.client import ChatClient
    from evalgate.suites import build_suite

    suites: _Suites = {}
    for bench in config.benchmarks:
        limit = min(n_items, bench.eval.num_examples or n_items)
        tiny = bench.model_copy(
            update={"eval": bench.eval.model_copy(update={"num_examples": limit, "rollouts": 1})}
        )
        try:
            suites[bench.name] = (tiny, build_suite(tiny))
        except EvalgateError as exc:
            doc.add(
                "eval",
                f"benchmark {bench.name}",
                "fail",
                exc.message,
                fix=exc.hint or "see the message",
                config_error=isinstance(exc, ConfigError),
            )

    judge_endpoints = judges(suites)

    async def run(endpoint: Endpoint, tiny: Benchmark, suite: Suite) -> list[dict[str, object]]:
        async with (
            ChatClient(
                endpoint, tiny.sampling, timeout_s=tiny.eval.request_timeout_s, max_retries=2
            ) as client,
            bound_judge(suite, judge_endpoints.get(tiny.name), tiny.eval, None, None),
        ):
            return await run_suite(suite, client, rollouts=1, max_concurrent=n_items)

    for model in config.models:
        for bench in config.benchmarks:
            name = f"{bench.name} on {model.name}"
            if bench.name not in suites:
                continue
            if model.name not in endpoints or model.name in doc.blocked:
                doc.add("eval", name, "skip", doc.blocked.get(model.name, "not deployed"))
                continue
            tiny, suite = suites[bench.name]
            if (
                getattr(suite, "judge", None) is not None
                and judge_endpoints.get(bench.name) is None
            ):
                doc.add("eval", name, "skip", "its judge did not start")
                continue
            try:
                records = asyncio.run(run(endpoints[model.name], tiny, suite))
            except EvalgateError as exc:
                doc.add("eval", name, "fail", exc.message, fix=exc.hint or "see the message")
                continue
            errors = [str(r["error"]) for r in records if r["error"]]
            rewards = [number(r["reward"]) for r in records if r["reward"] is not None]
            mean = sum(rewards) / len(rewards) if rewards else 0.0
            detail = f"{len(records)} items, {len(errors)} errored, mean reward {mean:.2f}"
            if errors:
                doc.add("eval", name, "fail", f"{detail}: {errors[0][:160]}", fix="read the log")
            else:
                doc.add("eval", name, "pass", detail)


def _gpu(doc: Doctor, config: Config) -> None:
    if not any(m.backend == "vllm" for m in config.models):
        doc.add("gpu", "nvidia-smi", "skip", "no vllm backend configured (Modal brings its own)")
        return
    exe = doc.which("nvidia-smi")
    if exe is None:
        doc.add(
            "gpu",
            "nvidia-smi",
            "fail",
            "not on PATH",
            fix="run on a GPU runner with the NVIDIA driver, or use backend: modal-vllm",
        )
        return
    query = [exe, "--query-gpu=name,memory.total", "--format=csv,noheader"]
    code, out = run_command(query, doc.environ)
    gpus = [line.strip() for line in out.splitlines() if line.strip()]
    if code != 0 or not gpus:
        doc.add("gpu", "nvidia-smi", "fail", out[:200] or f"exit {code}", fix="check the driver")
        return
    need = max(
        (
            m.tensor_parallel_size * m.data_parallel_size
            for m in config.models
            if m.backend == "vllm"
        ),
        default=1,
    )
    status: Status = "pass" if len(gpus) >= need else "fail"
    doc.add(
        "gpu",
        "nvidia-smi",
        status,
        f"{len(gpus)} GPU(s): {'; '.join(gpus)}",
        fix=f"the vllm models need {need} GPUs (tensor_parallel_size × data_parallel_size)",
    )


# ---------------------------------------------------------------------------------------------


def run_doctor(
    config_path: Path,
    *,
    environ: dict[str, str],
    overrides: Sequence[str] = (),
    deploy: bool = True,
    eval_items: int = 2,
    log_dir: Path | None = None,
    server_factory: ServerFactory | None = None,
    log: Callable[[str], None] = lambda line: None,
) -> DoctorReport:
    """Run every phase against ``config_path``; never raises for a failed check."""
    from evalgate.config.load import load_config

    report = DoctorReport(str(config_path))
    doc = Doctor(report, environ)
    try:
        config = load_config(Path(config_path), list(overrides))
    except EvalgateError as exc:
        doc.add(
            "prerequisites",
            "evals.yaml",
            "fail",
            str(exc),
            fix="see `evalgate schema`; `evalgate validate` shows the resolved plan",
            config_error=True,
        )
        return report
    doc.add("prerequisites", "evals.yaml", "pass", "valid")
    if server_factory is None:
        from evalgate.serve import open_server

        server_factory = open_server
    logs = log_dir or Path("outputs") / "logs" / "doctor"
    logs.mkdir(parents=True, exist_ok=True)

    log("[evalgate] doctor: prerequisites")
    prerequisites(doc, config)
    log("[evalgate] doctor: credentials")
    credentials(doc, config)
    with contextlib.ExitStack() as stack:  # every server started here is stopped at the end
        if deploy:
            log("[evalgate] doctor: deploy")
            endpoints = _deploy(doc, config, stack, server_factory, logs)
            log("[evalgate] doctor: smoke request")
            _smoke(doc, config, endpoints)
            log("[evalgate] doctor: tiny eval")
            _tiny_eval(
                doc,
                config,
                endpoints,
                eval_items,
                lambda suites: _deploy_judges(doc, config, suites, stack, server_factory, logs),
            )
        else:
            for phase in ("deploy", "smoke", "eval"):
                doc.add(phase, "all models", "skip", "--no-deploy")
    log("[evalgate] doctor: gpu")
    _gpu(doc, config)
    return report


def run(
    args: argparse.Namespace, overrides: list[str], environ: dict[str, str], out: IO[str]
) -> int:
    """``evalgate doctor``: the report on ``out`` (text or ``--json``), progress on stderr."""
    from evalgate.commands._options import log_line

    report = run_doctor(
        Path(args.config),
        environ=environ,
        overrides=overrides,
        deploy=not args.no_deploy,
        eval_items=args.items,
        log_dir=Path(args.output) / "logs" / "doctor",
        log=log_line,
    )
    print(json.dumps(report.as_dict(), indent=2) if args.json else report.render(), file=out)
    return int(report.exit_code)

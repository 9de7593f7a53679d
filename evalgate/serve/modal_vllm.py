"""A vLLM OpenAI-compatible server on Modal GPUs, deployed from evals.yaml.

Three layers, so the offline-checkable part is checked offline:

- :func:`describe` turns a ``modal-vllm`` model into a :class:`ModalAppSpec`: plain data (GPU,
  image, volumes, secret *names*, timeouts, the exact ``vllm serve`` command line) that tests
  assert on, and whose :meth:`~ModalAppSpec.digest` tags the deployed app;
- :func:`build_app` turns a spec into real ``modal`` objects; construction is lazy in modal 1.6
  (no network until ``run``/``deploy``);
- :class:`ModalOps` is every call that talks to Modal (run, deploy, look up, stop, list), the
  one seam that lifecycle tests replace.

The web function is ``serialized=True``: the app is built at run time from evals.yaml, so the
container cannot import it, and the function body is a closure over the command line that
imports nothing from evalgate (cloudpickle ships it by value). The image's Python therefore
matches this interpreter's minor version, as cloudpickle requires.

Modal's web endpoints answer a request that runs past 150 s with ``303 See Other`` to a result
URL (the same URL plus ``__modal_function_call_id``); a GET there blocks until the original
request's result is ready. A GET without the body is what that
URL wants. ``ChatClient`` follows the chain itself: each hop gets at least 150 s + a margin
(``Endpoint.redirect_after_s``), and a retry polls the result URL instead of POSTing again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import secrets
import sys
import types
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from evalgate.errors import ConfigError, InfraError
from evalgate.serve._cuda import cuda_image
from evalgate.serve._health import NotReady, wait_until_ready
from evalgate.serve._modal_ops import FUNCTION_NAME, MANAGED_TAG, ModalOps, first_line
from evalgate.serve._vllm_args import gpus_needed, serve_command
from evalgate.serve.base import Endpoint
from evalgate.serve.chat_template import ChatTemplate, resolve_chat_template
from evalgate.serve.keys import api_key_from_env

if TYPE_CHECKING:
    from typing import Unpack

    import modal

    from evalgate.config.spec import ModalVLLMModel
    from evalgate.serve.base import ServeOptions

__all__ = [
    "API_KEY_ENV",
    "FUNCTION_NAME",
    "MODAL_PIN",
    "ModalAppSpec",
    "ModalOps",
    "ModalVLLMServer",
    "app_name_for",
    "build_app",
    "describe",
    "import_modal",
    "secret_values",
]

MODAL_PIN = "1.6.4"
INSTALL_HINT = f"pip install 'evalgate-action[modal]' (modal=={MODAL_PIN})"
PORT = 8000
HF_CACHE_PATH = "/root/.cache/huggingface"  # huggingface_hub's default cache: weights persist
VLLM_CACHE_PATH = "/root/.cache/vllm"  # VLLM_CACHE_ROOT default: torch.compile artefacts
TEMPLATE_PATH = "/root/evalgate/chat_template.jinja"
# Per HTTP request (one Modal input). Long generations outlive Modal's 150 s HTTP limit through
# the 303 chain; the function itself may run this long.
REQUEST_TIMEOUT_S = 3600
# Modal answers a web request still running after this long with 303 to its result URL.
MODAL_HTTP_LIMIT_S = 150.0
# vLLM batches internally: one container takes the whole run's concurrency.
MAX_INPUTS = 1000
# The image Modal's vLLM guide builds on: CUDA's devel image (nvcc and headers for the kernels
# vLLM and FlashInfer compile at start-up) at the CUDA the pinned vLLM's torch links (see
# serve/_cuda.py), Python added by Modal at this interpreter's minor version (cloudpickle), vLLM
# installed by a pinned uv.
UV_VERSION = "0.9.5"
# A persistent deployment outlives this process, so its key must come from the environment.
API_KEY_ENV = "EVALGATE_VLLM_API_KEY"


def import_modal() -> types.ModuleType:
    """The ``modal`` module, or a ConfigError naming the extra that installs it."""
    try:
        import modal
    except ModuleNotFoundError as exc:
        raise ConfigError(f"backend 'modal-vllm' needs the modal package; {INSTALL_HINT}") from exc
    return modal


def app_name_for(model: ModalVLLMModel) -> str:
    """The Modal app name: ``app_name``, else ``evalgate-<label>`` in Modal's name alphabet."""
    if model.app_name:
        return model.app_name
    slug = re.sub(r"[^a-z0-9-]+", "-", model.name.lower()).strip("-") or "model"
    return f"evalgate-{slug}"[:63]


def _gpu_count(gpu: str) -> int:
    _, _, count = gpu.partition(":")
    return int(count) if count else 1


@dataclass(frozen=True)
class ModalAppSpec:
    """Everything Modal is told, as plain data. Secret values are never in here, only names."""

    app_name: str
    mode: str
    gpu: str
    python_version: str
    base_image: str
    uv_version: str
    packages: tuple[str, ...]
    image_env: dict[str, str]
    volumes: dict[str, str]  # mount path → Volume name (created if missing)
    secret_env: tuple[str, ...]  # environment variables the container gets from a Secret
    named_secrets: tuple[str, ...]  # existing Modal Secrets (by name) the container also gets
    command: tuple[str, ...]
    chat_template_path: str | None  # where the template is written in the container
    chat_template_sha256: str | None
    port: int
    startup_timeout_s: int
    timeout_s: int
    scaledown_window_s: int
    max_containers: int
    max_inputs: int
    tags: dict[str, str] = field(default_factory=dict)

    def digest(self) -> str:
        """What decides the measurement (image, GPU, command, template), hashed. A persistent
        deployment carries it as a tag, so a run can refuse a server deployed differently."""
        keys = (
            "base_image",
            "uv_version",
            "packages",
            "image_env",
            "gpu",
            "command",
            "chat_template_sha256",
        )
        data = {k: v for k, v in asdict(self).items() if k in keys}
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def describe(
    model: ModalVLLMModel,
    *,
    chat_template: ChatTemplate,
    secret_env: Iterable[str] = ("VLLM_API_KEY",),
) -> ModalAppSpec:
    """The app for a ``modal-vllm`` model (pure: no modal import, no network)."""
    need = gpus_needed(model)
    if _gpu_count(model.gpu) != need:
        raise ConfigError(
            f"model {model.name!r}: gpu {model.gpu!r} has {_gpu_count(model.gpu)} GPU(s), but "
            f"tensor_parallel_size × data_parallel_size = {need}; make them equal "
            f"(e.g. gpu: {model.gpu.split(':')[0]}:{need})"
        )
    template_arg = TEMPLATE_PATH if chat_template.server_arg else None
    command = serve_command(
        model,
        served_model_name=model.name,
        host="0.0.0.0",  # Modal's proxy reaches the container over its network interface
        port=PORT,
        chat_template=template_arg,
    )
    spec = ModalAppSpec(
        app_name=app_name_for(model),
        mode=model.mode,
        gpu=model.gpu,
        python_version=f"{sys.version_info.major}.{sys.version_info.minor}",
        base_image=cuda_image(model.vllm_version),
        uv_version=UV_VERSION,
        packages=(f"vllm=={model.vllm_version}",),
        # Faster hub downloads through the Xet backend (a no-op for older huggingface_hub).
        image_env={"HF_XET_HIGH_PERFORMANCE": "1"},
        volumes={HF_CACHE_PATH: model.hf_cache_volume, VLLM_CACHE_PATH: model.vllm_cache_volume},
        secret_env=tuple(sorted(set(secret_env))),
        named_secrets=tuple(getattr(model, "secrets", ()) or ()),
        command=tuple(command),
        chat_template_path=template_arg,
        chat_template_sha256=chat_template.sha256 if template_arg else None,
        port=PORT,
        startup_timeout_s=math.ceil(model.startup_timeout_s),
        timeout_s=REQUEST_TIMEOUT_S,
        scaledown_window_s=model.scaledown_window_s,
        max_containers=1,  # one server per run: one prefix cache, no mid-run cold starts
        max_inputs=MAX_INPUTS,
    )
    tags = {
        MANAGED_TAG[0]: MANAGED_TAG[1],
        "evalgate-model": re.sub(r"[^A-Za-z0-9._-]", "-", model.name)[:63],
        "evalgate-mode": model.mode,
        "evalgate-digest": spec.digest(),
    }
    return ModalAppSpec(**{**asdict(spec), "tags": tags})


def secret_values(
    model: ModalVLLMModel, environ: Mapping[str, str], *, api_key: str
) -> dict[str, str]:
    """The values behind ``secret_env``: the server's API key, and the HF token if set."""
    values = {"VLLM_API_KEY": api_key}
    token = environ.get(model.hf_token_env) if model.hf_token_env else None
    if token:
        values["HF_TOKEN"] = token  # the name huggingface_hub reads, whatever it is called here
    return values


def _serve_function(command: Sequence[str], template_text: str | None, template_path: str | None):
    """The container's entry: write the template, start vLLM, return (Modal waits for the port).

    Self-contained on purpose: it is pickled by value and must not reference evalgate.
    """
    argv = list(command)

    def serve() -> None:
        import os
        import subprocess

        if template_text is not None and template_path is not None:
            os.makedirs(os.path.dirname(template_path), exist_ok=True)
            with open(template_path, "w", encoding="utf-8") as fh:
                fh.write(template_text)
        subprocess.Popen(argv)

    return serve


def build_app(
    spec: ModalAppSpec, *, secret_values: Mapping[str, str], template_text: str | None
) -> tuple[modal.App, modal.Function]:
    """(modal.App, modal.Function) for ``spec``. No network: objects hydrate on run/deploy."""
    modal = import_modal()
    missing = set(spec.secret_env) - set(secret_values)
    if missing:
        raise ConfigError(f"no value for the secret(s) {', '.join(sorted(missing))}")
    image = (
        modal.Image.from_registry(spec.base_image, add_python=spec.python_version)
        .entrypoint([])  # the CUDA image's entrypoint prints a banner before every command
        .uv_pip_install(*spec.packages, uv_version=spec.uv_version)
        .env(spec.image_env)
    )
    volumes = {
        path: modal.Volume.from_name(name, create_if_missing=True)
        for path, name in spec.volumes.items()
    }
    secret = modal.Secret.from_dict({k: secret_values[k] for k in spec.secret_env})
    # Named secrets are looked up when the app starts: a missing one fails there, before a GPU.
    named = [modal.Secret.from_name(name) for name in spec.named_secrets]
    # include_source=False: the function is serialized, nothing from this checkout is mounted.
    app = modal.App(spec.app_name, tags=spec.tags, include_source=False)
    body = _serve_function(spec.command, template_text, spec.chat_template_path)
    web = modal.web_server(port=spec.port, startup_timeout=spec.startup_timeout_s)(body)
    function = app.function(
        name=FUNCTION_NAME,
        image=image,
        gpu=spec.gpu,
        volumes=volumes,
        secrets=[*named, secret],
        timeout=spec.timeout_s,
        startup_timeout=spec.startup_timeout_s,
        scaledown_window=spec.scaledown_window_s,
        max_containers=spec.max_containers,
        serialized=True,
    )(modal.concurrent(max_inputs=spec.max_inputs)(web))
    return app, function


class ModalVLLMServer:
    """Serve a ``modal-vllm`` model: ephemeral (this run only) or an existing deployment."""

    health_interval_s = 5.0
    # Below Modal's 150 s request limit: a poll that hangs on a cold container just ends.
    health_poll_timeout_s = 30.0

    def __init__(
        self, model: ModalVLLMModel, *, ops: ModalOps | None = None, **ctx: Unpack[ServeOptions]
    ) -> None:
        self.model = model
        self.environ = ctx["environ"]
        self.config_dir = ctx.get("config_dir") or Path.cwd()
        self.benchmarks = tuple(ctx.get("benchmarks", ()))
        self.log_path: Path | None = ctx["log_dir"] / f"model_server-{model.name}.log"
        self.chat_template: ChatTemplate | None = None
        self.spec: ModalAppSpec | None = None
        self._ops = ops
        self._stack = contextlib.ExitStack()

    def _log(self, line: str) -> None:
        assert self.log_path is not None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(f"[evalgate] {line}\n")

    def prepare(self, *, need_key: bool = True) -> tuple[ModalAppSpec, str]:
        """Resolve the template and describe the app; (spec, API key). No network.

        ``need_key=False`` describes a persistent app without its key (``status``): the key is
        not part of the digest."""
        self.chat_template = resolve_chat_template(
            self.model, config_dir=self.config_dir, benchmarks=self.benchmarks, environ=self.environ
        )
        if self.model.mode == "persistent":
            env_name = getattr(self.model, "api_key_env", None) or API_KEY_ENV
            key = api_key_from_env(self.environ, env_name, model=self.model.name)
            if not key and need_key:
                raise ConfigError(
                    f"model {self.model.name!r}: a persistent Modal deployment is protected by "
                    f"an API key; set the environment variable {env_name} (the same value for "
                    "`evalgate deploy` and for runs)"
                )
        else:
            key = secrets.token_urlsafe(24)  # dies with the ephemeral app
        names = secret_values(self.model, self.environ, api_key=key)
        self.spec = describe(self.model, chat_template=self.chat_template, secret_env=names)
        return self.spec, key

    def __enter__(self) -> Endpoint:
        spec, key = self.prepare()
        ops = self._ops or ModalOps(self.environ)
        self._stack.callback(ops.close)
        self._log(f"app {spec.app_name} ({spec.mode}) gpu {spec.gpu} digest {spec.digest()}")
        self._log("command: " + " ".join(spec.command))
        try:
            if spec.mode == "persistent":
                url = self._connect(ops, spec)
            else:
                app, function = build_app(
                    spec,
                    secret_values=secret_values(self.model, self.environ, api_key=key),
                    template_text=self.chat_template.text() if self.chat_template else None,
                )
                url = ops.run_ephemeral(app, function, self._stack)
                self._log(f"ephemeral app {getattr(app, 'app_id', '?')} serving at {url}")
            ready = wait_until_ready(
                url,
                served_model=self.model.name,
                api_key=key,
                timeout_s=self.model.startup_timeout_s,
                poll_timeout_s=self.health_poll_timeout_s,
                interval_s=self.health_interval_s,
                max_interval_s=max(self.health_interval_s, 15.0),
            )
            self._log(f"ready after {ready.elapsed_s:.0f} s ({ready.health_polls} health polls)")
        except NotReady as exc:
            self._stack.close()  # an ephemeral app is stopped even when it never came up
            raise InfraError(
                f"model {self.model.name!r}: the Modal vLLM server did not become ready: {exc} "
                f"(see `modal app logs {spec.app_name}`; log: {self.log_path})"
            ) from exc
        except (ConfigError, InfraError):
            self._stack.close()
            raise
        except BaseException as exc:
            self._stack.close()
            if isinstance(exc, Exception) and type(exc).__module__.startswith("modal"):
                raise InfraError(f"model {self.model.name!r}: Modal: {first_line(exc)}") from exc
            raise
        return Endpoint(
            base_url=f"{url.rstrip('/')}/v1",
            model=self.model.name,
            api_key=key,
            model_id=self.model.model_id,
            redirect_after_s=MODAL_HTTP_LIMIT_S,
        )

    def _connect(self, ops: ModalOps, spec: ModalAppSpec) -> str:
        tags = ops.tags(spec.app_name)
        url = ops.web_url(spec.app_name) if tags is not None else None
        if tags is None or url is None:
            raise InfraError(
                f"model {self.model.name!r}: no deployed Modal app {spec.app_name!r}; run "
                "`evalgate deploy` first (or use mode: ephemeral)"
            )
        deployed = tags.get("evalgate-digest")
        if deployed != spec.digest():
            raise InfraError(
                f"model {self.model.name!r}: the deployed app {spec.app_name!r} runs another "
                f"configuration (digest {deployed}, evals.yaml gives {spec.digest()}); run "
                "`evalgate deploy` to update it"
            )
        self._log(f"persistent app serving at {url}")
        return url

    def __exit__(self, *exc: object) -> None:
        self._stack.close()  # ephemeral: stops the app; persistent: only closes the client

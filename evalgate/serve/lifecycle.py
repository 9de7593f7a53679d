"""Persistent Modal deployments: ``evalgate deploy`` / ``stop`` / ``status``.

A ``modal-vllm`` model with ``mode: persistent`` is not started by a run; the run connects to an
app deployed here, and refuses it when its configuration digest (image, GPU, ``vllm serve``
command line, chat template) differs from what evals.yaml now describes. Deployed apps carry the
tag ``managed-by=evalgate``, which is how ``stop --all`` finds them (leftover ephemeral apps of a
killed CI job included).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from evalgate.errors import InfraError, UsageError
from evalgate.serve._health import NotReady, wait_until_ready
from evalgate.serve.modal_vllm import (
    ModalOps,
    ModalVLLMServer,
    app_name_for,
    build_app,
    secret_values,
)

if TYPE_CHECKING:
    from evalgate.config.load import Config
    from evalgate.config.spec import ModalVLLMModel

__all__ = ["AppStatus", "deploy", "modal_models", "status", "stop"]


@dataclass(frozen=True)
class AppStatus:
    """One app's state, as printed by the commands (and as JSON with ``--json``)."""

    app_name: str
    state: str  # deployed | ready | not deployed | outdated | stopped | not running
    model: str | None = None
    url: str | None = None
    digest: str | None = None
    detail: str = ""

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def line(self) -> str:
        parts = [f"{self.app_name}: {self.state}"]
        if self.model:
            parts.append(f"model {self.model}")
        if self.url:
            parts.append(self.url)
        if self.detail:
            parts.append(self.detail)
        return " · ".join(parts)


def modal_models(
    config: Config, names: Sequence[str] = (), *, persistent_only: bool = True
) -> list[ModalVLLMModel]:
    """The config's ``modal-vllm`` models, optionally only those named."""
    all_modal = [m for m in config.models if m.backend == "modal-vllm"]
    if names:
        known = {m.name: m for m in all_modal}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UsageError(
                f"no modal-vllm model named {unknown[0]!r} in {config.path} "
                f"(have: {', '.join(known) or 'none'})"
            )
        chosen = [known[n] for n in names]
    else:
        chosen = all_modal
    if persistent_only:
        ephemeral = [m.name for m in chosen if m.mode != "persistent"]
        if names and ephemeral:
            raise UsageError(
                f"model {ephemeral[0]!r} has mode: ephemeral (started by each run); set "
                "mode: persistent to deploy it"
            )
        chosen = [m for m in chosen if m.mode == "persistent"]
    return chosen


def _server(
    config: Config, model: ModalVLLMModel, environ: dict[str, str], log_dir: Path
) -> ModalVLLMServer:
    return ModalVLLMServer(
        model,
        log_dir=log_dir,
        environ=environ,
        config_dir=Path(config.path).parent,
        benchmarks=[b.name for b in config.benchmarks],
    )


def deploy(
    config: Config,
    *,
    environ: dict[str, str],
    models: Sequence[str] = (),
    wait: bool = False,
    log_dir: Path = Path("outputs/logs/deploy"),
    ops: ModalOps | None = None,
    log: Callable[[str], None] = print,
) -> list[AppStatus]:
    """Deploy (or update) every persistent ``modal-vllm`` model; with ``wait``, also wait for
    ``/health`` (a cold start: image, weights, compile) so the first run starts warm."""
    chosen = modal_models(config, models)
    if not chosen:
        raise UsageError(f"{config.path}: no modal-vllm model with mode: persistent to deploy")
    ops = ops or ModalOps(environ)
    results = []
    try:
        for model in chosen:
            server = _server(config, model, environ, log_dir)
            spec, key = server.prepare()
            template = server.chat_template.text() if server.chat_template else None
            app, function = build_app(
                spec,
                secret_values=secret_values(model, environ, api_key=key),
                template_text=template,
            )
            log(f"[evalgate] deploying {spec.app_name} ({model.model} on {spec.gpu})")
            url = ops.deploy(app, function)
            state, detail = "deployed", ""
            if wait:
                try:
                    ready = wait_until_ready(
                        url,
                        served_model=model.name,
                        api_key=key,
                        timeout_s=model.startup_timeout_s,
                        poll_timeout_s=ModalVLLMServer.health_poll_timeout_s,
                        interval_s=ModalVLLMServer.health_interval_s,
                        max_interval_s=15.0,
                    )
                except NotReady as exc:
                    raise InfraError(
                        f"{spec.app_name}: deployed, but not ready: {exc} "
                        f"(see `modal app logs {spec.app_name}`)"
                    ) from exc
                state, detail = "ready", f"ready in {ready.elapsed_s:.0f} s"
            results.append(AppStatus(spec.app_name, state, model.name, url, spec.digest(), detail))
    finally:
        ops.close()
    return results


def status(
    config: Config,
    *,
    environ: dict[str, str],
    models: Sequence[str] = (),
    probe: bool = False,
    ops: ModalOps | None = None,
) -> list[AppStatus]:
    """Where each persistent model's app stands. ``probe`` also asks ``/health``, which wakes a
    scaled-to-zero app (GPU time), so it is off unless asked for."""
    ops = ops or ModalOps(environ)
    results = []
    try:
        for model in modal_models(config, models):
            server = _server(config, model, environ, Path("."))
            spec, key = server.prepare(need_key=probe)
            tags = ops.tags(spec.app_name)
            if tags is None:
                results.append(AppStatus(spec.app_name, "not deployed", model.name))
                continue
            url = ops.web_url(spec.app_name)
            deployed = tags.get("evalgate-digest")
            if deployed != spec.digest():
                detail = f"digest {deployed}, evals.yaml gives {spec.digest()}: run deploy"
                results.append(
                    AppStatus(spec.app_name, "outdated", model.name, url, deployed, detail)
                )
                continue
            state, detail = "deployed", ""
            if probe and url:
                try:
                    wait_until_ready(
                        url,
                        served_model=model.name,
                        api_key=key,
                        timeout_s=60.0,
                        poll_timeout_s=ModalVLLMServer.health_poll_timeout_s,
                        interval_s=ModalVLLMServer.health_interval_s,
                    )
                    state = "ready"
                except NotReady as exc:
                    detail = f"not ready: {exc}"
            results.append(AppStatus(spec.app_name, state, model.name, url, deployed, detail))
    finally:
        ops.close()
    return results


def stop(
    config: Config | None,
    *,
    environ: dict[str, str],
    models: Sequence[str] = (),
    all_apps: bool = False,
    ops: ModalOps | None = None,
) -> list[AppStatus]:
    """Stop the apps of the config's ``modal-vllm`` models (any mode), or with ``all_apps``
    every live app tagged ``managed-by=evalgate`` in the Modal environment."""
    if not all_apps and config is None:
        raise UsageError("stop needs an evals.yaml, or --all")
    ops = ops or ModalOps(environ)
    results = []
    try:
        if all_apps:
            # By app id: an ephemeral app has no deployment name to look it up by.
            targets = [
                (app_id, label, tags.get("evalgate-model"))
                for app_id, label, tags in ops.managed_apps()
            ]
        else:
            assert config is not None  # checked above
            chosen = modal_models(config, models, persistent_only=False)
            targets = [(app_name_for(m), app_name_for(m), m.name) for m in chosen]
        for target, app_name, model_name in targets:
            stopped = ops.stop(target)
            results.append(AppStatus(app_name, "stopped" if stopped else "not running", model_name))
    finally:
        ops.close()
    return results

"""The ``litellm`` backend: any provider LiteLLM routes, behind evalgate's one hot path.

Two modes, one wire format (OpenAI chat completions over the aiohttp ChatClient):

- ``proxy_url`` set: an existing LiteLLM proxy. Nothing starts; its key comes from the variable
  named by ``api_key_env`` (as with the ``openai`` backend).
- otherwise: the real LiteLLM proxy (``litellm[proxy]``) as a child process on a free loopback
  port, from a config file generated into the run's log folder: one ``model_list`` entry with the
  user's model string, ``api_base`` and ``params``. It runs in its own process group, is
  health-checked, and is always stopped: at exit, on errors and on Ctrl-C, start-up included.

Why a proxy process rather than calling the LiteLLM SDK in-process: the proxy *is* LiteLLM's
routing (same providers, same parameter mapping), and it speaks the protocol the ChatClient
already speaks, so a provider reached through LiteLLM runs the same code path, retries, error
accounting and timing as every other backend.

No secret lands in the config file: the provider key and the proxy's per-run master key are
``os.environ/NAME`` references that the proxy resolves from its own environment. Use the same
form in ``params`` for other credentials (``aws_secret_access_key: os.environ/AWS_SECRET``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from evalgate._repo_code import RESERVED
from evalgate.errors import ConfigError, InfraError
from evalgate.serve._process import die_with_parent, spawn_group, stop_group
from evalgate.serve.base import Endpoint
from evalgate.serve.keys import api_key_from_env
from evalgate.serve.tracing import langfuse_enabled, litellm_callback_settings

if TYPE_CHECKING:
    from typing import Unpack

    from evalgate.config.spec import LiteLLMModel
    from evalgate.serve.base import ServeOptions

__all__ = [
    "INSTALL_HINT",
    "MASTER_KEY_ENV",
    "STARTUP_TIMEOUT_S",
    "LiteLLMServer",
    "proxy_config",
    "proxy_environment",
]

INSTALL_HINT = "install LiteLLM: pip install 'evalgate-action[litellm]'"
MASTER_KEY_ENV = "EVALGATE_LITELLM_MASTER_KEY"
# The proxy imports all of LiteLLM before it binds: 8-20 s measured on a busy 2-core machine.
STARTUP_TIMEOUT_S = 120.0
# litellm_params that have a field of their own in evals.yaml (api_key: the key stays out of files).
_RESERVED_PARAMS = {"model": "model", "api_base": "api_base", "api_key": "api_key_env"}


def proxy_config(model: LiteLLMModel, environ: Mapping[str, str]) -> dict[str, object]:
    """The LiteLLM proxy config for one model: routing, settings, and no secret values."""
    clash = sorted(set(model.params) & set(_RESERVED_PARAMS))
    if clash:
        fields = ", ".join(f"{p!r} (use {_RESERVED_PARAMS[p]!r})" for p in clash)
        raise ConfigError(f"model {model.name!r}: params may not set {fields}")
    keyless = not model.api_key_env and not environ.get("OPENAI_API_KEY")
    if model.model.startswith("openai/") and keyless:
        # LiteLLM's openai provider then fails every request with a 500 ("Missing credentials"),
        # which the ChatClient would retry: say so once, up front.
        raise ConfigError(
            f"model {model.name!r}: LiteLLM's openai/ provider needs a key: set api_key_env "
            "(any non-empty value for a server without auth) or OPENAI_API_KEY"
        )
    params: dict[str, object] = {"model": model.model}
    if model.api_base:
        params["api_base"] = model.api_base
    if model.api_key_env:
        params["api_key"] = f"os.environ/{model.api_key_env}"
    params.update(model.params)
    model_list, router = _with_router_fallbacks(model.model, params)
    settings: dict[str, object] = {
        # Retries belong to the ChatClient (backoff, Retry-After, error accounting); LiteLLM's
        # default retries would multiply every attempt by three.
        "num_retries": 0,
        # One evals.yaml across providers: a sampling field a provider lacks (seed, top_p) is
        # dropped instead of failing every request with a 400.
        "drop_params": True,
        **litellm_callback_settings(environ),
    }
    config: dict[str, object] = {
        "model_list": model_list,
        "litellm_settings": settings,
        "general_settings": {"master_key": f"os.environ/{MASTER_KEY_ENV}"},
    }
    if router:
        config["router_settings"] = router
    return config


def _with_router_fallbacks(
    name: str, params: dict[str, object]
) -> tuple[list[dict[str, object]], dict[str, object]]:
    """The proxy's model list and router settings for ``params``, its ``fallbacks`` made router
    fallbacks. Left in ``litellm_params``, LiteLLM would call a fallback itself and answer in the
    primary's name, with no fallback header and the primary's api base in
    ``x-litellm-model-api-base``: evalgate would record and price the fallback's reply as the
    primary's. As a deployment of its own, behind ``router_settings.fallbacks``, its reply names
    it and carries ``x-litellm-attempted-fallbacks`` (serve.served). Each fallback is the
    primary's params with its own laid over them (a model name alone: only the model changes),
    as LiteLLM's own fallbacks are."""
    fallbacks = params.pop("fallbacks", None)
    if not isinstance(fallbacks, list) or not fallbacks:
        if fallbacks is not None:
            params["fallbacks"] = fallbacks  # not a list: LiteLLM's to refuse, as before
        return [{"model_name": name, "litellm_params": params}], {}
    entries: list[dict[str, object]] = [{"model_name": name, "litellm_params": params}]
    names: list[str] = []
    for entry in fallbacks:
        own = {"model": entry} if isinstance(entry, str) else dict(entry)
        label = str(own.get("model") or name)
        if label in names or label == name:  # the same model elsewhere: another deployment
            label = f"{label} (fallback {len(names) + 1})"
        names.append(label)
        entries.append({"model_name": label, "litellm_params": {**params, **own}})
    # LiteLLM's router retries a deployment itself unless told not to: the ChatClient retries.
    return entries, {"fallbacks": [{name: names}], "num_retries": 0}


def proxy_environment(environ: Mapping[str, str], master_key: str) -> dict[str, str]:
    """The proxy's environment: the run's (provider keys, Langfuse) plus fixed settings; never
    the job's tokens (``GITHUB_*``, ``INPUT_*``, ``ACTIONS_*``, ``RUNNER_*``): the proxy runs
    the candidate's LiteLLM settings, and no provider reads those."""
    # os.environ underneath keeps PATH and HOME when a caller passes only a few variables; the
    # CLI passes a copy of os.environ, so there the two are the same.
    merged = {**os.environ, **environ}
    return {
        **{k: v for k, v in merged.items() if not k.startswith(RESERVED)},
        MASTER_KEY_ENV: master_key,
        # The price list bundled in the wheel: no fetch at start-up (the network may be closed).
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        # PRODUCTION only stops LiteLLM loading a .env from its working directory into itself.
        "LITELLM_MODE": "PRODUCTION",
        "LITELLM_DONT_SHOW_FEEDBACK_BOX": "True",
        "PYTHONUNBUFFERED": "1",
    }


PYTHON_ENV = "EVALGATE_LITELLM_PYTHON"


def litellm_python(environ: Mapping[str, str]) -> str | None:
    """The interpreter that runs the proxy: this one when it has LiteLLM, else the one named
    by EVALGATE_LITELLM_PYTHON (a side venv: litellm[proxy] 1.103 needs mcp>=2.2, verifiers
    0.4.0 pins mcp==2.0.0, so one environment cannot hold both)."""
    named = environ.get(PYTHON_ENV)
    if named:
        return named if Path(named).is_file() and os.access(named, os.X_OK) else None
    return sys.executable if importlib.util.find_spec("litellm") is not None else None


def _litellm_installed(environ: Mapping[str, str] | None = None) -> bool:
    return litellm_python(environ if environ is not None else os.environ) is not None


def _provider_key(model: LiteLLMModel, environ: Mapping[str, str]) -> str | None:
    if not model.api_key_env:
        return None
    key = api_key_from_env(environ, model.api_key_env, model=model.name)
    if not key:
        raise ConfigError(
            f"model {model.name!r}: no API key found; set the environment variable "
            f"{model.api_key_env} (named by api_key_env)"
        )
    return key


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _log_lines(path: Path, offset: int) -> list[str]:
    """The log's lines from ``offset`` on (this start attempt's), last 50 at most."""
    with contextlib.suppress(OSError), path.open("rb") as f:
        f.seek(offset)
        return f.read().decode("utf-8", "replace").splitlines()[-50:]
    return []


def _why_it_exited(lines: list[str]) -> str:
    """The last error-looking line: uvicorn logs its shutdown after it."""
    for line in reversed(lines):
        if "error" in line.lower() or "exception" in line.lower():
            return line.strip()[:200]
    return ""


class LiteLLMServer:
    """A LiteLLM proxy for one model: an existing one (``proxy_url``) or one started here."""

    chat_template = None  # the server applies its own (ModelServer.chat_template)

    def __init__(self, model: LiteLLMModel, **ctx: Unpack[ServeOptions]) -> None:
        self.model = model
        self.environ = ctx["environ"]
        spawn = not model.proxy_url
        # Absolute: the proxy runs in the log folder, so a relative --config (the CLI's default
        # output folder is relative) would be looked up from inside itself.
        log_dir = ctx["log_dir"].absolute()
        self.log_path: Path | None = log_dir / f"model_server-{model.name}.log" if spawn else None
        self.config_path: Path | None = log_dir / f"litellm-{model.name}.yaml" if spawn else None
        # Not (yet) fields of LiteLLMModel: read when the spec grows them.
        self.startup_timeout_s = float(getattr(model, "startup_timeout_s", STARTUP_TIMEOUT_S))
        self.num_workers = int(getattr(model, "num_workers", 1))
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0  # where this start attempt's lines begin in the log

    def __enter__(self) -> Endpoint:
        if self.model.proxy_url:
            return self._existing_proxy()
        try:
            return self._start_proxy()
        except BaseException:
            # Ctrl-C or an error during start-up: __exit__ will not run, so stop it here.
            self._stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self._stop()

    @property
    def pid(self) -> int | None:
        """The started proxy's process id (also its process group's), while it runs."""
        return self._proc.pid if self._proc is not None else None

    def _existing_proxy(self) -> Endpoint:
        ignored = [f for f in ("api_base", "params") if getattr(self.model, f)]
        if ignored:
            raise ConfigError(
                f"model {self.model.name!r}: {' and '.join(ignored)} cannot apply with proxy_url "
                "(configure them on that proxy, or drop proxy_url to let evalgate start one)"
            )
        assert self.model.proxy_url is not None  # the caller's condition
        return Endpoint(
            base_url=self.model.proxy_url.rstrip("/"),
            model=self.model.model,
            api_key=_provider_key(self.model, self.environ),
            model_id=self.model.model_id,
            router=True,
        )

    def command(self, config: Path, port: int) -> list[str]:
        # -c rather than -m: running proxy_cli as __main__ would import it twice (runpy warns).
        return [
            litellm_python(self.environ) or sys.executable,
            "-c",
            "from litellm.proxy.proxy_cli import run_server; run_server()",
            "--config",
            str(config),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--telemetry",
            "False",
        ] + (["--num_workers", str(self.num_workers)] if self.num_workers > 1 else [])

    def _start_proxy(self) -> Endpoint:
        if not _litellm_installed(self.environ):
            named = self.environ.get(PYTHON_ENV)
            where = (
                f"{PYTHON_ENV}={named} is not an executable"
                if named
                else "LiteLLM is not installed"
            )
            raise InfraError(f"{where}; {INSTALL_HINT}")
        _provider_key(self.model, self.environ)  # a missing key is a config error, not a 401
        assert self.log_path is not None and self.config_path is not None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            yaml.safe_dump(proxy_config(self.model, self.environ), sort_keys=False),
            encoding="utf-8",
        )
        master_key = f"sk-evalgate-{secrets.token_urlsafe(24)}"  # loopback is shared: lock it
        env = proxy_environment(self.environ, master_key)
        # A port picked free can be taken before the proxy binds it (~10 s later): try a few.
        last = "no attempt"
        for _ in range(3):
            port = _free_port()
            base = f"http://127.0.0.1:{port}/v1"
            self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
            try:
                self._spawn(self.command(self.config_path, port), env)
                self._wait_healthy(base, master_key)
                return Endpoint(
                    base_url=base,
                    model=self.model.model,
                    api_key=master_key,
                    model_id=self.model.model_id,
                    router=True,
                )
            except _StartFailed as exc:
                last = str(exc)
                self._stop()
                lines = _log_lines(self.log_path, self._log_offset)
                if not any("address already in use" in line.lower() for line in lines):
                    break
        raise InfraError(f"the LiteLLM proxy did not start: {last} (log: {self.log_path})")

    def _spawn(self, cmd: list[str], env: dict[str, str]) -> None:
        assert self.log_path is not None
        self._proc = spawn_group(
            cmd,
            self.log_path,
            env=env,
            preexec_fn=die_with_parent(),  # the kernel kills it if evalgate dies first
            cwd=self.log_path.parent,  # nothing of the user's working directory is read
        )

    def _wait_healthy(self, base: str, master_key: str) -> None:
        # /models with the master key: proves the config loaded, auth works and the model is routed.
        request = urllib.request.Request(
            f"{base}/models", headers={"Authorization": f"Bearer {master_key}"}
        )
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            assert self._proc is not None
            code = self._proc.poll()
            if code is not None:
                assert self.log_path is not None
                why = _why_it_exited(_log_lines(self.log_path, self._log_offset))
                raise _StartFailed(f"proxy exited with code {code}" + (f": {why}" if why else ""))
            try:
                with urllib.request.urlopen(request, timeout=2) as resp:
                    listed = {m.get("id") for m in json.loads(resp.read()).get("data", [])}
                    if self.model.model in listed:
                        return
                    raise _StartFailed(f"proxy is up but does not list {self.model.model!r}")
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError, ValueError):
                pass
            time.sleep(0.2)
        raise _StartFailed(f"no healthy answer within {self.startup_timeout_s:.0f} s")

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None and langfuse_enabled(self.environ):
            # Langfuse's SDK sends its queue from a background thread every flush interval
            # (LiteLLM's default: 1 s) and not on the proxy's shutdown: stopped at once, the
            # run's last traces were lost (tests/test_langfuse_contract.py). Let it send them.
            time.sleep(_langfuse_drain_s(self.environ))
        stop_group(proc)  # uvicorn shuts down cleanly in 0.3-0.5 s (measured here)


def _langfuse_drain_s(environ: Mapping[str, str]) -> float:
    """One flush interval of Langfuse's SDK (LANGFUSE_FLUSH_INTERVAL, LiteLLM's default 1 s),
    plus the time to send a batch over."""
    try:
        interval = float(environ.get("LANGFUSE_FLUSH_INTERVAL") or 1.0)
    except ValueError:
        interval = 1.0
    return min(interval, 30.0) + 1.5


class _StartFailed(Exception):
    pass

"""The ``modal`` sandbox: one ``modal.Sandbox`` per task, in Modal's cloud (``modal==1.6.4``).

Needs the ``modal`` package and credentials (``MODAL_TOKEN_ID`` / ``MODAL_TOKEN_SECRET``, or
``~/.modal.toml``). Sandboxes are created concurrently from asyncio (the SDK's ``.aio`` calls),
tagged ``evalgate=1`` plus the config's labels, and always terminated: by :meth:`destroy`, by
:meth:`ModalBackend.aclose` for any a crashed caller left, and at the latest by Modal at the
sandbox's ``timeout``.

What a sandbox gets (see :meth:`ModalBackend.sandbox_kwargs`, which the offline tests check):

- the image: a task's own (``config.build``: its Dockerfile, built by Modal with
  ``Image.from_dockerfile``, once per content digest and backend, cached by Modal across runs),
  else ``sandbox.image`` from a registry, else Debian slim with Python 3.11; workdir ``/workspace``
  (a *challenge* sandbox, a Terminal-Bench or SWE-bench-style task: the image's own WORKDIR,
  asked of the running sandbox, and root, as in the docker backend);
- hard CPU and memory limits (Modal's ``(request, limit)`` pairs); no disk or process limit is
  offered by the SDK, so ``disk_mb`` and ``pids`` are not enforced here (``timeout`` caps it all);
- read-only mounts (an agent binary, a skills folder) are copied in after creation, since a
  Modal sandbox cannot see host paths;
- ``network: none`` → ``block_network``; ``model-only`` → an outbound allowlist holding only the
  model endpoint's host (so the endpoint must be reachable from Modal, not a loopback address),
  with the API key passed as a Modal Secret. Unlike the local and docker backends there is no
  bridge: the key is visible inside the sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import ipaddress
import math
import os
import secrets
import tarfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from evalgate.sandbox.base import (
    WORKDIR,
    ExecCall,
    Mount,
    Sandbox,
    SandboxBackend,
    SandboxConfig,
    SandboxError,
)

if TYPE_CHECKING:
    import modal

__all__ = ["APP_NAME", "ModalBackend", "ModalSandbox", "has_credentials"]

APP_NAME = "evalgate-sandboxes"
_LIFETIME_SLACK_S = 60  # Modal's own hard stop comes this long after the task's timeout


def has_credentials() -> bool:
    env = os.environ.get("MODAL_TOKEN_ID") and os.environ.get("MODAL_TOKEN_SECRET")
    return bool(env) or os.path.exists(os.path.expanduser("~/.modal.toml"))


def _allowlist(base_url: str) -> dict[str, list[str]]:
    host = urlsplit(base_url).hostname or ""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        if host in ("localhost", "") or host.endswith(".local"):
            raise SandboxError(
                f"modal sandbox: the model endpoint {base_url} is not reachable from Modal"
            ) from None
        return {"outbound_domain_allowlist": [host]}
    if ip.is_loopback or ip.is_private or ip.is_link_local:
        raise SandboxError(
            f"modal sandbox: the model endpoint {base_url} is not reachable from Modal"
        )
    return {"outbound_cidr_allowlist": [f"{ip}/{ip.max_prefixlen}"]}


class ModalSandbox(Sandbox):
    backend = "modal"

    def __init__(
        self,
        config: SandboxConfig,
        handle: modal.Sandbox,
        on_destroy: Callable[[ModalSandbox], None] | None = None,
    ) -> None:
        super().__init__(config)
        self._sb = handle
        self._on_destroy = on_destroy
        self.id = getattr(handle, "object_id", "") or "modal-" + secrets.token_hex(4)
        if config.network == "model-only" and config.model is not None:
            self.model_env = {
                "OPENAI_BASE_URL": config.model.base_url,
                "OPENAI_API_BASE": config.model.base_url,
                "EVAL_MODEL": config.model.model,
            }

    async def _exec(self, call: ExecCall) -> tuple[int, bytes, bytes, bool, bool]:
        argv, timeout_s, stdin, env, cwd, max_output = call.unpack()
        self._check_alive()
        limit = max(1, math.ceil(timeout_s))
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        environment: dict[str, str | None] = dict(env)  # modal's type: None unsets a variable
        try:
            proc = await self._sb.exec.aio(
                "timeout", "-s", "KILL", str(limit), *argv,
                workdir=cwd,
                env=environment,
                timeout=limit + 30,
                text=False,
            )  # fmt: skip
            if stdin:
                proc.stdin.write(stdin)
            proc.stdin.write_eof()
            await proc.stdin.drain.aio()
            out, err = await asyncio.gather(proc.stdout.read.aio(), proc.stderr.read.aio())
            code = await proc.wait.aio()
        except Exception as exc:  # the SDK's errors are many; all mean the sandbox failed us
            raise SandboxError(f"{self.describe()}: {type(exc).__name__}: {exc}") from exc
        code = 128 - code if code < 0 else code
        late = loop.time() - t0 >= limit - 0.5
        truncated = len(out) > max_output or len(err) > max_output
        return code, out[:max_output], err[:max_output], code == 137 and late, truncated

    async def destroy(self) -> None:
        if self._destroyed:
            return
        self._destroyed = True
        if self._on_destroy is not None:
            self._on_destroy(self)
        with contextlib.suppress(Exception):  # already gone is fine; Modal's timeout is the net
            await self._sb.terminate.aio()


async def _upload_mounts(sandbox: ModalSandbox, mounts: tuple[Mount, ...]) -> None:
    """Modal sandboxes cannot bind host paths: copy each mount in (one ``tar -x`` each)."""
    for mount in mounts:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(mount.source, arcname=os.path.basename(mount.target.rstrip("/")))
        parent = os.path.dirname(mount.target.rstrip("/")) or "/"
        result = await sandbox.exec(
            ["sh", "-c", 'mkdir -p "$1" && tar -x -f - -C "$1"', "sh", parent],
            stdin=buf.getvalue(),
            cwd="/",
            timeout_s=300,
        )
        if not result.ok:
            raise SandboxError(f"modal sandbox: cannot copy {mount.source} in: {result.stderr}")


async def _image_workdir(sandbox: ModalSandbox) -> str:
    """The image's WORKDIR: where a process started without a ``workdir`` runs."""
    try:
        proc = await sandbox._sb.exec.aio("pwd", timeout=60, text=False)
        out = await proc.stdout.read.aio()
        code = await proc.wait.aio()
    except Exception as exc:  # the SDK's errors are many; all mean the sandbox failed us
        raise SandboxError(f"{sandbox.describe()}: {type(exc).__name__}: {exc}") from exc
    workdir = out.decode("utf-8", "replace").strip()
    if code != 0 or not workdir.startswith("/") or workdir == "/":
        raise SandboxError(
            f"{sandbox.describe()}: the task image sets no WORKDIR (got {workdir or 'nothing'!r}); "
            "a challenge image needs one, e.g. `WORKDIR /app`"
        )
    return workdir


class ModalBackend(SandboxBackend):
    """``modal``: one Modal Sandbox per task; many in parallel, all terminated."""

    name = "modal"
    runs_task_images = True  # Modal builds a task's Dockerfile itself (no local Docker)

    def __init__(self, app_name: str = APP_NAME) -> None:
        try:
            import modal
        except ImportError as exc:
            raise SandboxError("modal sandbox: pip install modal==1.6.4") from exc
        self.modal = modal
        self.app_name = app_name
        self._app: modal.App | None = None
        self._live: set[ModalSandbox] = set()
        self._images: dict[str, modal.Image] = {}  # ImageBuild.digest → modal.Image: one build each

    @classmethod
    def unavailable(cls) -> str | None:
        import importlib.util

        if importlib.util.find_spec("modal") is None:
            return "the modal package is not installed (pip install modal==1.6.4)"
        if not has_credentials():
            return "no Modal credentials (MODAL_TOKEN_ID / MODAL_TOKEN_SECRET)"
        return None

    def sandbox_kwargs(self, config: SandboxConfig) -> dict[str, Any]:
        """Keyword arguments for ``modal.Sandbox.create`` (no network: testable offline)."""
        modal = self.modal
        kwargs: dict[str, Any] = {
            "image": self._image(config),
            "timeout": math.ceil(config.timeout_s) + _LIFETIME_SLACK_S,
            "cpu": (config.cpus, config.cpus),
            "memory": (config.memory_mb, config.memory_mb),
            "tags": {"evalgate": "1", **config.labels},
        }
        if not config.challenge:  # a challenge image works in its own WORKDIR (/app, /testbed)
            kwargs["workdir"] = WORKDIR
        if config.network == "model-only" and config.model is not None:
            kwargs.update(_allowlist(config.model.base_url))
            if config.model.api_key:
                kwargs["secrets"] = [
                    modal.Secret.from_dict({"OPENAI_API_KEY": config.model.api_key})
                ]
        elif config.network != "internet":  # "internet": a verifier that fetches its tools
            kwargs["block_network"] = True
        return kwargs

    def _image(self, config: SandboxConfig) -> modal.Image:
        build = config.build
        if build is None:
            if config.image:
                return self.modal.Image.from_registry(config.image)
            return self.modal.Image.debian_slim(python_version="3.11")
        key = build.digest or f"{build.context}:{build.dockerfile}"
        if key not in self._images:
            # Built in Modal's cloud from the task's own context (no local Docker needed); Modal
            # caches the layers, so a second run of an unchanged task starts without a build.
            self._images[key] = self.modal.Image.from_dockerfile(
                os.path.join(build.context, build.dockerfile), context_dir=build.context
            )
        return self._images[key]

    async def create(self, config: SandboxConfig) -> ModalSandbox:
        kwargs = self.sandbox_kwargs(config)
        try:
            if self._app is None:
                self._app = await self.modal.App.lookup.aio(self.app_name, create_if_missing=True)
            handle = await self.modal.Sandbox.create.aio(
                "sleep", "infinity", app=self._app, **kwargs
            )
        except Exception as exc:
            raise SandboxError(f"modal sandbox did not start: {type(exc).__name__}: {exc}") from exc
        sandbox = ModalSandbox(config, handle, on_destroy=self._live.discard)
        self._live.add(sandbox)
        try:
            if config.challenge:
                sandbox.workdir = await _image_workdir(sandbox)
            else:
                result = await sandbox.exec(["mkdir", "-p", WORKDIR], cwd="/", timeout_s=60)
                if not result.ok:
                    raise SandboxError(f"modal sandbox: cannot create {WORKDIR}: {result.stderr}")
            await _upload_mounts(sandbox, config.mounts)
        except BaseException:
            await sandbox.destroy()
            raise
        return sandbox

    async def aclose(self) -> None:
        """Terminate every sandbox this backend created that is still running."""
        live, self._live = list(self._live), set()
        await asyncio.gather(*(sb.destroy() for sb in live), return_exceptions=True)

    async def terminate_tagged(self, tags: dict[str, str]) -> int:
        """Terminate leftovers of earlier runs by tag (e.g. ``{"evalgate.run": run_id}``)."""
        count = 0
        async for handle in self.modal.Sandbox.list.aio(tags=tags):
            with contextlib.suppress(Exception):
                await handle.terminate.aio()
                count += 1
        return count

    def limits(self, config: SandboxConfig) -> dict[str, str]:
        return {
            "wall time": f"per exec: `timeout -s KILL` inside; sandbox lifetime "
            f"{math.ceil(config.timeout_s) + _LIFETIME_SLACK_S} s (Modal); terminate on destroy",
            "processes": "not limited by Modal",
            "memory": f"{config.memory_mb} MiB hard limit (Modal)",
            "disk": "not limited by Modal",
            "cpu": f"{config.cpus:g} CPU hard limit (Modal)",
            "network": {
                "model-only": "outbound allowlist: the model endpoint's host only",
                "internet": "open (a verifier with `verifier_network: true`)",
            }.get(config.network, "block_network"),
        }

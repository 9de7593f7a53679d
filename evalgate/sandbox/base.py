"""The sandbox interface: create, exec with a timeout, read/write files, destroy.

Untrusted code (an agent and its tool calls, a generated program, a task's check) runs only
through this interface. Backends differ in how well they contain it (bubblewrap namespaces, a
container, a Modal VM, or the plain-subprocess reference that contains nothing), never in how
they are called, so one contract test suite covers them all.

Errors: :class:`SandboxError` is an infrastructure failure (the backend could not create or reach
the sandbox) and is an :class:`InfraError`, so the engine counts the rollout as an error, never as
a 0. What the code inside does (exits non-zero, times out, fills its disk) is a result, not an
error: it comes back in :class:`ExecResult`.
"""

from __future__ import annotations

import abc
import hashlib
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from evalgate.errors import InfraError

if TYPE_CHECKING:
    from evalgate.config.spec import SandboxSpec
    from evalgate.sandbox.bridge import ModelBridge

__all__ = [
    "DEFAULT_ENV",
    "MAX_OUTPUT",
    "MODEL_PORT",
    "WORKDIR",
    "ExecCall",
    "ExecResult",
    "ImageBuild",
    "ModelRoute",
    "Mount",
    "Sandbox",
    "SandboxBackend",
    "SandboxConfig",
    "SandboxError",
    "SandboxFileError",
    "portable_mode",
]

WORKDIR = "/workspace"  # the task's writable workspace, the default cwd of every exec
MODEL_PORT = 18080  # inside a "model-only" sandbox, the model bridge listens on 127.0.0.1:18080
MAX_OUTPUT = 1 << 20  # bytes kept per stream of one exec; the rest is read and dropped

# The whole environment of sandboxed code (plus the per-exec additions): nothing is inherited from
# the host, so a runner's tokens and credentials never reach it.
DEFAULT_ENV: Mapping[str, str] = {
    "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "USER": "sandbox",
    "LOGNAME": "sandbox",
    "SHELL": "/bin/sh",
    "TERM": "dumb",
    "PYTHONDONTWRITEBYTECODE": "1",
}


class SandboxError(InfraError):
    """The sandbox backend failed (could not start, lost its sandbox). Never scored as a 0."""


class SandboxFileError(Exception):
    """A file operation inside the sandbox failed (missing file, not a directory, too large)."""


@dataclass(frozen=True)
class ExecCall:
    """One command for a backend's :meth:`Sandbox._exec`: what runs, with what, and the limits."""

    argv: list[str]
    timeout_s: float
    stdin: bytes | None = None
    env: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_ENV))
    cwd: str = "/"
    max_output: int = 64 << 10

    def unpack(self) -> tuple[list[str], float, bytes | None, dict[str, str], str, int]:
        return self.argv, self.timeout_s, self.stdin, self.env, self.cwd, self.max_output


@dataclass(frozen=True)
class ExecResult:
    """How one command ended. ``exit_code`` follows the shell: 128 + N when killed by signal N."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    duration_s: float = 0.0
    truncated: bool = False  # an output stream exceeded ``max_output`` and was cut

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True)
class ModelRoute:
    """The one network destination of a ``model-only`` sandbox: the model under test."""

    base_url: str  # upstream, up to and including /v1
    model: str  # forced into every request: the sandbox evaluates the model under test, only
    api_key: str | None = field(default=None, repr=False)  # added on the host, never inside
    # Per sandbox: past these the bridge answers 429 (a runaway agent cannot spend without end).
    max_requests: int = 1000
    max_tokens: int = 5_000_000  # prompt + completion tokens, as the upstream reported them


@dataclass(frozen=True)
class Mount:
    """A host file or folder made visible read-only inside the sandbox (e.g. an agent binary)."""

    source: str
    target: str


@dataclass(frozen=True)
class ImageBuild:
    """A task's own image, built from its Dockerfile (Terminal-Bench and SWE-bench-style tasks).

    Each backend builds it its own way (``docker build`` on this machine, Modal's
    ``Image.from_dockerfile`` in the cloud) and caches it by ``digest``, a hash of the build
    context's files: an unchanged task is built once, a changed one gets a new image.
    """

    context: str  # absolute host folder sent as the build context
    dockerfile: str = "Dockerfile"  # relative to ``context``
    digest: str = ""  # sha256 of the context's paths, modes and bytes (see :meth:`of`)

    @classmethod
    def of(cls, context: str | Path, dockerfile: str = "Dockerfile") -> ImageBuild:
        """The build of ``context`` with its content digest (files sorted, links by target)."""
        root = Path(context).resolve()
        h = hashlib.sha256(dockerfile.encode() + b"\0")
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root).as_posix().encode()
            if path.is_symlink():
                h.update(b"L" + rel + b"\0" + os.readlink(path).encode() + b"\0")
            elif path.is_file():
                mode = portable_mode(path.stat().st_mode)
                h.update(b"F" + rel + b"\0" + oct(mode).encode() + b"\0")
                h.update(hashlib.sha256(path.read_bytes()).digest())
        return cls(context=str(root), dockerfile=dockerfile, digest=h.hexdigest())


def portable_mode(st_mode: int) -> int:
    """A file's mode as git keeps it: executable (0o755) or not (0o644). The rest depends on the
    umask of whoever checked the files out (a runner's checkout, the base commit's archive), so
    it must neither change an item's identity nor an image's digest."""
    return 0o755 if st_mode & 0o111 else 0o644


@dataclass(frozen=True)
class SandboxConfig:
    """What one sandbox gets: limits, network policy, read-only mounts, base environment."""

    image: str | None = None
    build: ImageBuild | None = None  # a task's own image: wins over ``image`` where set
    # A challenge container (Terminal-Bench, SWE-bench): the task's own image (``build`` or
    # ``image``) as those tasks expect it: commands run as root in the image's WORKDIR on its
    # writable filesystem (capabilities still dropped to a minimum, no network but the bridge).
    challenge: bool = False
    cpus: float = 1.0
    memory_mb: int = 1024
    pids: int = 256
    disk_mb: int = 512
    timeout_s: float = 300.0  # the sandbox's whole lifetime (a hard cap where the backend has one)
    # "internet": a challenge container's verifier that fetches its tools (Terminal-Bench 2.0's
    # test.sh), with `verifier_network: true`; never an agent's sandbox.
    network: Literal["none", "model-only", "internet"] = "none"
    model: ModelRoute | None = None  # required for "model-only"
    verifier_network: bool = False  # the benchmark allows its verifiers "internet"
    mounts: tuple[Mount, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)  # added to DEFAULT_ENV for every exec
    labels: Mapping[str, str] = field(default_factory=dict)  # for finding leftovers (docker/modal)

    @classmethod
    def from_spec(cls, spec: SandboxSpec, **overrides: Any) -> SandboxConfig:
        """From an evals.yaml ``SandboxSpec``; ``overrides`` set the runtime-only fields."""
        return cls(
            image=spec.image,
            cpus=spec.cpus,
            memory_mb=spec.memory_mb,
            pids=spec.pids,
            disk_mb=spec.disk_mb,
            timeout_s=spec.timeout_s,
            network=overrides.pop("network", spec.network),
            verifier_network=getattr(spec, "verifier_network", False),
            **overrides,
        )

    def __post_init__(self) -> None:
        if self.network == "internet" and not self.challenge:
            raise ValueError("network 'internet' is for a challenge container's verifier only")
        if self.network == "model-only" and self.model is None:
            # "model-only" without a model is "none"; keep the two spellings one state.
            object.__setattr__(self, "network", "none")


def _argv(command: str | Sequence[str]) -> list[str]:
    return ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)


class Sandbox(abc.ABC):
    """One live sandbox. Use ``async with`` (or call :meth:`destroy`): destroy always runs."""

    backend: ClassVar[str]

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.id = ""
        self.scratch = "/tmp"  # writable scratch space outside the workspace (HOME, TMPDIR)
        # The task's working directory, every exec's default cwd: /workspace, or a challenge
        # image's WORKDIR (e.g. /app, /testbed).
        self.workdir = WORKDIR
        # A shell whose processes the sandbox's other processes can neither trace nor read
        # (/proc/PID/mem): where a backend has one, a task's check runs under it.
        self.guard_shell = "sh"
        # What sandboxed code uses to reach the model (OPENAI_BASE_URL, OPENAI_API_KEY); empty
        # unless the sandbox is "model-only".
        self.model_env: dict[str, str] = {}
        self._destroyed = False
        self._bridge: ModelBridge | None = None  # the host-side model bridge, where one runs

    # -- the one primitive each backend implements ------------------------------------------

    @abc.abstractmethod
    async def _exec(self, call: ExecCall) -> tuple[int, bytes, bytes, bool, bool]:
        """Run argv; return (exit_code, stdout, stderr, timed_out, truncated)."""

    @abc.abstractmethod
    async def destroy(self) -> None:
        """Stop everything in the sandbox and free it. Idempotent; never raises for a dead one."""

    # -- the public surface, shared --------------------------------------------------------

    def _check_alive(self) -> None:
        """Backends call this first in ``_exec``: a destroyed sandbox runs nothing."""
        if self._destroyed:
            raise SandboxError(f"{self.describe()}: already destroyed")

    @property
    def usage(self) -> dict[str, int]:
        """Model tokens used through the bridge (empty without one)."""
        return dict(self._bridge.usage) if self._bridge is not None else {}

    async def exec(
        self,
        command: str | Sequence[str],
        *,
        timeout_s: float = 60.0,
        stdin: bytes | str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        max_output: int = MAX_OUTPUT,
    ) -> ExecResult:
        """Run ``command`` (a string runs under ``/bin/sh -c``) and wait at most ``timeout_s``.

        On timeout the command's process group is killed and ``timed_out`` is set. The
        environment is :data:`DEFAULT_ENV` + the config's ``env`` + ``model_env`` + ``env``.
        """
        full_env = {**DEFAULT_ENV, **self.config.env, **self.model_env, **(env or {})}
        data = stdin.encode() if isinstance(stdin, str) else stdin
        t0 = time.perf_counter()
        code, out, err, timed_out, truncated = await self._exec(
            ExecCall(
                _argv(command),
                timeout_s=timeout_s,
                stdin=data,
                env=full_env,
                cwd=cwd or self.workdir,
                max_output=max_output,
            )
        )
        return ExecResult(
            exit_code=code,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            timed_out=timed_out,
            duration_s=time.perf_counter() - t0,
            truncated=truncated,
        )

    async def read_file(
        self, path: str, *, max_bytes: int = 16 << 20, cwd: str | None = None
    ) -> bytes:
        """A file's bytes, read inside the sandbox (its symlinks resolve in the sandbox's view)."""
        code, out, err, timed_out, truncated = await self._exec(
            ExecCall(
                ["cat", "--", path],
                timeout_s=30.0,
                stdin=None,
                env=dict(DEFAULT_ENV),
                cwd=cwd or self.workdir,
                max_output=max_bytes,
            )
        )
        if timed_out:
            raise SandboxFileError(f"{path}: reading timed out (a FIFO or device?)")
        if code != 0:
            raise SandboxFileError(err.decode("utf-8", "replace").strip() or f"{path}: exit {code}")
        if truncated:
            raise SandboxFileError(f"{path}: larger than {max_bytes} bytes")
        return out

    async def _script(
        self,
        script: str,
        path: str,
        *,
        timeout_s: float,
        stdin: bytes | None,
        cwd: str,
        max_output: int,
    ) -> tuple[int, bytes, bytes, bool, bool]:
        """A file operation's shell ``script`` (``path`` as its ``$1``: never spliced into the
        script), run with the default environment as every exec is."""
        return await self._exec(
            ExecCall(
                ["/bin/sh", "-c", script, "sh", path],
                timeout_s=timeout_s,
                stdin=stdin,
                env=dict(DEFAULT_ENV),
                cwd=cwd,
                max_output=max_output,
            )
        )

    async def write_file(
        self, path: str, data: bytes | str, *, mode: int | None = None, cwd: str | None = None
    ) -> None:
        """Write a file inside the sandbox, creating parent folders."""
        payload = data.encode() if isinstance(data, str) else data
        script = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"'
        if mode is not None:
            script += f' && chmod {mode:o} -- "$1"'
        code, _, err, timed_out, _ = await self._script(
            script,
            path,
            timeout_s=60.0,
            stdin=payload,
            cwd=cwd or self.workdir,
            max_output=64 << 10,
        )
        if code != 0 or timed_out:
            detail = err.decode("utf-8", "replace").strip() or f"exit {code}"
            raise SandboxFileError(f"{path}: cannot write ({detail})")

    async def read_tree(self, path: str | None = None, *, max_bytes: int = 256 << 20) -> bytes:
        """An uncompressed tar of folder ``path``, made inside the sandbox (links stay links).

        Modes are first made readable to their owner (the sandboxed user owns everything it
        wrote), so a file the agent locked with ``chmod 000`` is copied, not an error.
        """
        path = path or self.workdir
        # The folder's entries, not the folder itself: restoring "." would chmod/utime the
        # target's root, which the sandboxed user does not own under docker (a root tmpfs).
        script = (
            'chmod -R u+rwX -- "$1" 2>/dev/null; cd -- "$1" && '
            "find . -mindepth 1 -maxdepth 1 -print0 | tar --null -cf - -T -"
        )
        code, out, err, timed_out, truncated = await self._script(
            script, path, timeout_s=120.0, stdin=None, cwd="/", max_output=max_bytes
        )
        if timed_out or code != 0 or truncated:
            detail = err.decode("utf-8", "replace").strip()[-300:] or f"exit {code}"
            if truncated:
                detail = f"larger than {max_bytes} bytes"
            raise SandboxFileError(f"{path}: cannot be copied out ({detail})")
        return out

    async def kill_all(self) -> None:
        """Kill every process the sandboxed user runs (left-overs of an agent) except the init.

        ``kill -9 -1`` signals all processes the caller may signal, except itself and the pid
        namespace's init, which is the backend's own supervisor.
        """
        await self._exec(
            ExecCall(
                ["/bin/sh", "-c", "kill -9 -1 2>/dev/null; exit 0"],
                timeout_s=10.0,
                stdin=None,
                env=dict(DEFAULT_ENV),
                cwd="/",
                max_output=4096,
            )
        )

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.destroy()

    def describe(self) -> str:
        return f"{self.backend} sandbox {self.id}"


class SandboxBackend(abc.ABC):
    """Creates sandboxes of one kind. One instance may serve many concurrent sandboxes."""

    name: ClassVar[str]
    isolating: ClassVar[bool] = True  # False only for the subprocess reference
    # Whether it runs challenge sandboxes (``SandboxConfig.challenge``: a task's own image, as
    # root in its WORKDIR). A backend without it would run such a task in its default image.
    runs_task_images: ClassVar[bool] = False

    @classmethod
    @abc.abstractmethod
    def unavailable(cls) -> str | None:
        """Why this backend cannot run on this machine, or None when it can."""

    @abc.abstractmethod
    async def create(self, config: SandboxConfig) -> Sandbox:
        """Start a sandbox; raise :class:`SandboxError` when the backend fails."""

    async def aclose(self) -> None:  # noqa: B027 - optional: most backends share nothing
        """Release what the backend shares between sandboxes (clients, apps)."""

    def limits(self, config: SandboxConfig) -> dict[str, str]:
        """Each limit of ``config`` → how this backend enforces it (for reports and docs)."""
        return {}

    def unenforced(self, config: SandboxConfig) -> list[str]:
        """The limits of ``config`` this backend cannot enforce here, said in the scorecard."""
        return []

"""Challenge images for the docker backend: a task's own image, built once per content digest.

A Terminal-Bench or SWE-bench-style task brings a Dockerfile (:class:`ImageBuild`). It is built
as ``evalgate-task:<digest>``, the digest of its content and of its base images' ids, so an
unchanged task is never built twice (in one run or the next) and a changed one, or one whose
``FROM`` image was rebuilt, always gets a new image. Concurrent
rollouts of one task wait on the one build. A build that fails is an infrastructure error that
quotes the end of the build log: the task cannot run, the agent did nothing wrong. A prebuilt
image (``image``) that the daemon does not have is pulled, once.

What the runner needs of an image (its WORKDIR, the task's working directory, and its ENV, e.g.
a conda PATH) is read once with ``docker image inspect``.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import re
import sys
import tarfile
import time
from dataclasses import dataclass

from evalgate.sandbox.base import ImageBuild, SandboxError
from evalgate.sandbox.subprocess import run_process

__all__ = ["ImageInfo", "Images", "base_images", "strip_top"]

TAG_PREFIX = "evalgate-task"
_BUILD_TIMEOUT_S = 3600.0
_LOG_TAIL = 15  # lines of the build log quoted in a build failure


@dataclass(frozen=True)
class ImageInfo:
    tag: str
    workdir: str
    env: dict[str, str]


_ARG = re.compile(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(\S*))?", re.IGNORECASE)
_FROM = re.compile(r"^\s*FROM\s+(.*)$", re.IGNORECASE)
_VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


def base_images(dockerfile: str) -> list[str]:
    """The images a Dockerfile's stages start ``FROM``, in order: not ``scratch``, not an
    earlier stage's name; global ``ARG`` defaults substituted (``FROM base:${V}``)."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    found: list[str] = []
    for line in dockerfile.splitlines():
        if (arg := _ARG.match(line)) and not found:  # ARGs before the first FROM are global
            args[arg.group(1)] = arg.group(2) or ""
            continue
        match = _FROM.match(line)
        if match is None:
            continue
        words = [w for w in match.group(1).split() if not w.startswith("--")]
        if not words:
            continue
        image = _VAR.sub(lambda m: args.get(m.group(1), ""), words[0])
        if len(words) >= 3 and words[1].lower() == "as":
            stages.add(words[2].lower())
        if image.lower() in stages or image == "scratch" or image in found:
            continue
        found.append(image)
    return found


def _say(text: str) -> None:
    print(f"evalgate: {text}", file=sys.stderr, flush=True)


class Images:
    """Builds and inspects images for one backend; safe to share between event loops."""

    def __init__(self, docker: str) -> None:
        self.docker = docker
        self._info: dict[str, ImageInfo] = {}
        self._locks: dict[tuple[int, str], asyncio.Lock] = {}

    def _lock(self, key: str) -> asyncio.Lock:
        loop_key = (id(asyncio.get_running_loop()), key)
        return self._locks.setdefault(loop_key, asyncio.Lock())

    async def resolve(self, build: ImageBuild | None, image: str | None) -> ImageInfo:
        """The image a challenge container runs: ``build``'s (built if needed), else ``image``."""
        if build is None and not image:
            raise SandboxError("docker sandbox: a challenge container needs an image or a build")
        ref = await self._tag(build) if build is not None else str(image)
        async with self._lock(ref):
            if ref not in self._info:
                info = await self._inspect(ref)
                if info is None:
                    await (self._build(build, ref) if build is not None else self._pull(ref))
                    info = await self._inspect(ref)
                if info is None:
                    raise SandboxError(f"docker sandbox: image {ref!r} is not on this daemon")
                self._info[ref] = info
        return self._info[ref]

    async def _tag(self, build: ImageBuild) -> str:
        """``evalgate-task:<digest>`` of the build context *and* the base images' ids: a
        rebuilt ``FROM`` image (pulled anew, retagged) gives a new task image. A base the daemon
        lacks counts by name (the build pulls it; the next run keys on its id)."""
        try:
            with open(os.path.join(build.context, build.dockerfile), encoding="utf-8") as fh:
                bases = base_images(fh.read())
        except (OSError, UnicodeDecodeError):
            bases = []  # the build itself says what is wrong with the Dockerfile
        h = hashlib.sha256(build.digest.encode())
        for base in bases:
            argv = [self.docker, "image", "inspect", "--format", "{{.Id}}", base]
            code, out, _, _, _ = await run_process(argv, timeout_s=60, stdin=None, max_output=4096)
            ident = out.decode("utf-8", "replace").strip() if code == 0 else ""
            h.update(f"\0{base}\0{ident}".encode())
        return f"{TAG_PREFIX}:{h.hexdigest()[:32]}"

    async def _inspect(self, ref: str) -> ImageInfo | None:
        argv = [self.docker, "image", "inspect", "--format", "{{json .Config}}", ref]
        code, out, _, _, _ = await run_process(argv, timeout_s=60, stdin=None, max_output=1 << 20)
        if code != 0:
            return None
        config = json.loads(out or b"{}") or {}
        env = dict(e.split("=", 1) for e in config.get("Env") or () if "=" in e)
        workdir = config.get("WorkingDir") or ""
        if workdir.rstrip("/") == "":
            # Copying "/" out and back is no working directory: the task must name one.
            raise SandboxError(
                f"docker sandbox: image {ref!r} sets no WORKDIR; a challenge image needs one "
                "(add `WORKDIR /app` to its Dockerfile)"
            )
        return ImageInfo(tag=ref, workdir=workdir, env=env)

    async def _build(self, build: ImageBuild, tag: str) -> None:
        dockerfile = os.path.join(build.context, build.dockerfile)
        if not os.path.isfile(dockerfile):
            raise SandboxError(f"docker sandbox: no Dockerfile at {dockerfile}")
        _say(f"building image {tag} from {dockerfile} ...")
        # --force-rm: a failed step leaves no stopped container behind.
        argv = [self.docker, "build", "--force-rm", "-t", tag, "-f", dockerfile]
        argv += ["--label", "evalgate.sandbox=1", "--label", f"evalgate.digest={build.digest}"]
        argv.append(build.context)
        t0 = time.monotonic()
        await _run_logged(argv, f"docker build of {dockerfile}")
        _say(f"built image {tag} in {time.monotonic() - t0:.1f} s")

    async def _pull(self, ref: str) -> None:
        """A prebuilt image (Terminal-Bench's ``docker_image``, a SWE-bench instance image)."""
        _say(f"pulling image {ref} ...")
        t0 = time.monotonic()
        await _run_logged([self.docker, "pull", ref], f"docker pull of {ref}")
        _say(f"pulled image {ref} in {time.monotonic() - t0:.1f} s")


async def _run_logged(argv: list[str], what: str) -> None:
    """Run a docker build or pull; an :class:`SandboxError` quoting the log's end if it fails."""
    code, out, err, timed_out, _ = await run_process(
        argv, timeout_s=_BUILD_TIMEOUT_S, stdin=None, max_output=4 << 20
    )
    if code != 0 or timed_out:
        log = (out + err).decode("utf-8", "replace").strip().splitlines()
        tail = " | ".join(line.strip() for line in log[-_LOG_TAIL:] if line.strip())
        why = "timed out" if timed_out else f"exit {code}"
        raise SandboxError(f"{what} failed ({why}): {tail}")


def strip_top(stream: bytes) -> bytes:
    """``docker cp CONTAINER:/dir -`` archives ``dir/…``; the same tar with ``…`` at its root.

    :meth:`Sandbox.read_tree`'s contract is the folder's entries, not the folder itself."""
    out = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(stream), mode="r:") as src,
        tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as dst,
    ):
        for member in src:
            _, sep, rest = member.name.partition("/")
            if not sep or not rest:
                continue  # the folder itself
            member.name = rest
            if member.islnk():  # a hard link names its target by its path in the archive
                member.linkname = member.linkname.partition("/")[2]
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
    return out.getvalue()

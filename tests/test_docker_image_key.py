"""A task image is cached by its build context *and* its base images: a rebuilt `FROM` image
(a security update, a re-tagged `python:3.12`) must give a new task image, not the stale one.

A stand-in `docker` (a script keeping its images in a JSON file) plays the daemon: what is
tested is which builds evalgate asks for, not Docker itself."""

from __future__ import annotations

import asyncio
import json
import stat
import sys
from pathlib import Path

from evalgate.sandbox._docker_image import Images
from evalgate.sandbox.base import ImageBuild

FAKE_DOCKER = """#!{python}
import json, sys
from pathlib import Path
state_path = Path({state!r})
state = json.loads(state_path.read_text())
args = sys.argv[1:]
state["calls"].append(args)
if args[:2] == ["image", "inspect"]:
    fmt, ref = args[3], args[4]
    if ref in state["bases"]:
        out = state["bases"][ref] if fmt == "{{{{.Id}}}}" else json.dumps({{"WorkingDir": "/"}})
    elif ref in state["built"]:
        out = "sha256:" + ref if fmt == "{{{{.Id}}}}" else json.dumps({{"WorkingDir": "/app"}})
    else:
        state_path.write_text(json.dumps(state)); sys.exit(1)
    print(out)
elif args[0] == "build":
    state["built"].append(args[args.index("-t") + 1])
state_path.write_text(json.dumps(state))
"""


def _docker(tmp_path: Path) -> tuple[str, Path]:
    state = tmp_path / "docker-state.json"
    state.write_text(json.dumps({"bases": {"base:1": "sha256:aaa"}, "built": [], "calls": []}))
    script = tmp_path / "docker"
    script.write_text(FAKE_DOCKER.format(python=sys.executable, state=str(state)))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), state


def _builds(state: Path) -> list[list[str]]:
    return [c for c in json.loads(state.read_text())["calls"] if c[0] == "build"]


def test_a_rebuilt_base_image_gives_a_new_task_image(tmp_path: Path) -> None:
    docker, state = _docker(tmp_path)
    task = tmp_path / "task"
    task.mkdir()
    (task / "Dockerfile").write_text("FROM --platform=linux/amd64 base:1 AS env\nWORKDIR /app\n")
    build = ImageBuild.of(task)

    first = asyncio.run(Images(docker).resolve(build, None))
    again = asyncio.run(Images(docker).resolve(build, None))  # the next run, same base
    assert again.tag == first.tag and len(_builds(state)) == 1

    data = json.loads(state.read_text())
    data["bases"]["base:1"] = "sha256:bbb"  # `docker pull base:1` brought a rebuilt image
    state.write_text(json.dumps(data))
    rebuilt = asyncio.run(Images(docker).resolve(build, None))
    assert rebuilt.tag != first.tag and len(_builds(state)) == 2


def test_a_stage_named_earlier_is_not_a_base_image(tmp_path: Path) -> None:
    from evalgate.sandbox._docker_image import base_images

    text = "ARG V=1\nFROM base:${V} AS build\nRUN make\nFROM build\nFROM scratch\nFROM other:2\n"
    assert base_images(text) == ["base:1", "other:2"]

"""The Action's image: its size, what a pull downloads, and start to first answered request.

Prints, for the image (default ``evalgate:container-test``, what the container test builds):
- its size unpacked and per layer (the layers a pull fetches), and compressed (``docker save |
  gzip -6``: about what a registry serves, which stores layers gzipped);
- the time from ``docker run`` to the embedded model's first answered chat request inside the
  container (a fresh container each repeat: interpreter start, imports, model load, one request);
  the same measured on this host outside Docker is the reference, same run, and the ratio.

No registry is reachable here, so the download part of a pull is not measured: divide the
compressed size by the runner's bandwidth.

Usage: python bench/image_startup.py [--image evalgate:container-test] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# One chat request through the embedded model, as `evalgate local` serves it.
FIRST_REQUEST = """
import json, sys, tempfile, urllib.request
from pathlib import Path
from evalgate.config.spec.models import LocalModel
from evalgate.serve.llama_cpp import LlamaCppServer
with LlamaCppServer(LocalModel(), log_dir=Path(tempfile.mkdtemp()), environ={}) as ep:
    body = json.dumps({"model": ep.model, "max_tokens": 8, "temperature": 0,
                       "messages": [{"role": "user", "content": "Say hi."}]}).encode()
    req = urllib.request.Request(ep.base_url + "/chat/completions", body,
                                 {"Content-Type": "application/json"})
    reply = json.load(urllib.request.urlopen(req, timeout=120))
    assert reply["choices"][0]["message"]["content"] is not None
"""


def _timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"{argv[:4]} failed: {done.stderr[-800:]}")
    return seconds


def sizes(docker: str, image: str) -> None:
    size = int(subprocess.check_output([docker, "image", "inspect", image, "-f", "{{.Size}}"]))
    print(f"{image}: {size / 1e6:.0f} MB unpacked")
    history = subprocess.check_output(
        [docker, "history", "--no-trunc", "--format", "{{.Size}}\t{{.CreatedBy}}", image],
        text=True,
    )
    for line in history.splitlines():
        layer, cmd = line.split("\t", 1)
        if layer not in ("0B", "0"):
            print(f"  {layer:>8}  {cmd.replace('/bin/sh -c ', '')[:90]}")
    save = subprocess.Popen([docker, "save", image], stdout=subprocess.PIPE)
    gz = subprocess.run(["gzip", "-6"], stdin=save.stdout, capture_output=True)
    save.wait()
    print(f"  compressed (docker save | gzip -6): {len(gz.stdout) / 1e6:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="evalgate:container-test")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    docker = shutil.which("docker")
    if docker is None:
        sys.exit("needs the docker CLI and a daemon")
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    sizes(docker, args.image)
    in_container, on_host = [], []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(args.repeats):
        in_container.append(
            _timed(
                [
                    docker,
                    "run",
                    "--rm",
                    "--network",
                    "none",
                    "--entrypoint",
                    "python",
                    args.image,
                    "-c",
                    FIRST_REQUEST,
                ]
            )
        )
        on_host.append(_timed([sys.executable, "-c", FIRST_REQUEST], env=env))
    c, h = statistics.median(in_container), statistics.median(on_host)
    print(
        f"start to first answered request (medians of {args.repeats}): container {c:.2f} s, "
        f"host {h:.2f} s, container/host {c / h:.2f}x"
    )


if __name__ == "__main__":
    main()

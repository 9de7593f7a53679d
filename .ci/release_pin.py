#!/usr/bin/env python3
"""action.yml's image, pinned by digest for a release.

A tag (``:v1``) can be pushed over, so ``uses: org/evalgate@<commit>`` would not pin the code
that runs: a release commit names the image by digest. ``pin DIGEST`` rewrites ``runs.image`` to
``docker://<registry path>@sha256:…`` (the release workflow's prepare run prints the digest of
the image it pushed); ``check`` fails, in one line, unless it is in that form (the release
workflow runs it on every ``vX.Y.Z`` tag).

Usage: .ci/release_pin.py check [action.yml] | .ci/release_pin.py pin sha256:HEX [action.yml]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

IMAGE = re.compile(
    r"^(?P<indent>\s*image:\s*)docker://(?P<path>[^\s@:]+(?::\d+)?/[^\s@:]+)(?P<ref>\S*)$", re.M
)
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def check(text: str) -> str | None:
    """None when runs.image is pinned by digest, else why not (one line)."""
    match = IMAGE.search(text)
    if match is None:
        return "action.yml: runs.image is not a docker:// image"
    ref = match["ref"]
    if not (ref.startswith("@") and DIGEST.match(ref[1:])):
        return (
            f"action.yml: runs.image is docker://{match['path']}{ref}, a tag that can move: a "
            "release pins it by digest (.ci/release_pin.py pin sha256:…)"
        )
    return None


def pin(text: str, digest: str) -> str:
    if not DIGEST.match(digest):
        raise ValueError(f"{digest!r} is not a sha256:<64 hex> digest")
    match = IMAGE.search(text)
    if match is None:
        raise ValueError("action.yml: runs.image is not a docker:// image")
    line = f"{match['indent']}docker://{match['path']}@{digest}"
    return text[: match.start()] + line + text[match.end() :]


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("check", "pin") or (argv[0] == "pin" and len(argv) < 2):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    if argv[0] == "check":
        path = Path(argv[1] if len(argv) > 1 else "action.yml")
        why = check(path.read_text(encoding="utf-8"))
        if why is not None:
            print(f"::error::{why}", file=sys.stderr)
            return 1
        return 0
    path = Path(argv[2] if len(argv) > 2 else "action.yml")
    try:
        path.write_text(pin(path.read_text(encoding="utf-8"), argv[1]), encoding="utf-8")
    except ValueError as exc:
        print(f"release_pin: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Print CHANGELOG.md's section for one version: the release notes the release workflow publishes.

Usage: ``python .ci/changelog.py VERSION [CHANGELOG.md]``. Exit 0 with the section's body on
stdout; exit 1 with one line on stderr when the changelog has no section for VERSION (a release
whose changes nobody wrote down is refused); exit 2 on bad usage.

A section starts at a second-level heading naming the version (``## 1.2.3`` or
``## [1.2.3] - 2026-11-28``) and runs to the next second-level heading.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def section(text: str, version: str) -> str | None:
    """The body of ``version``'s section, stripped; None when there is none."""
    head = re.compile(rf"^## \[?v?{re.escape(version)}\]?(\s|$)")
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if head.match(line):
            body = []
            for following in lines[i + 1 :]:
                if following.startswith("## "):
                    break
                body.append(following)
            return "\n".join(body).strip()
    return None


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: changelog.py VERSION [CHANGELOG.md]", file=sys.stderr)
        return 2
    version = argv[0].removeprefix("v")
    path = Path(
        argv[1] if len(argv) == 2 else Path(__file__).resolve().parent.parent / "CHANGELOG.md"
    )
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        print(f"{path}: cannot read the changelog ({exc.strerror})", file=sys.stderr)
        return 1
    body = section(text, version)
    if not body:
        print(
            f"{path}: no '## {version}' section with notes: write the release's changes first",
            file=sys.stderr,
        )
        return 1
    print(body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

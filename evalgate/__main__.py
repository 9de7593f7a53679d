"""``python -m evalgate``."""

from __future__ import annotations

from evalgate.cli import entry

if __name__ == "__main__":
    entry()

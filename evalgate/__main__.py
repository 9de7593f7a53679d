"""``python -m evalgate``."""

from __future__ import annotations

import sys

from evalgate.cli import main

if __name__ == "__main__":
    sys.exit(main())

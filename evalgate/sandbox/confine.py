"""``$CONFINE``: the command a task check puts before the agent's programs it runs.

The check and the agent's programs run as one uid in one sandbox; run through ``$CONFINE``
(``$CONFINE sh backup.sh``, unquoted so that it splits into words), a program is in a Landlock
domain and cannot ptrace, or write through ``/proc/PID/mem``, any process of the check (see
``_confine.py``, which runs inside the sandbox).

The value carries the helper's source itself (hex, so that it splits into exactly four words
and holds no glob character): no file the agent's program could rewrite between two runs, and
nothing to mount, so every backend gets it alike.
"""

from __future__ import annotations

import functools
from pathlib import Path

__all__ = ["confine_command"]


@functools.cache
def confine_command() -> str:
    source = Path(__file__).with_name("_confine.py").read_bytes()
    return f"python3 -IS -c exec(bytes.fromhex('{source.hex()}').decode()) --"

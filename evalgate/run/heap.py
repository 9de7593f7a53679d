"""Give the C heap's free pages back to the system after reading a large run.

Reading a journal allocates and frees a record (a dict, its prompt and completion) per line
while the run's columns grow beside them, and numpy's temporaries come and go: glibc's malloc
then holds tens of MB of free pages inside its heap (it returns only the heap's top on
``free``), 45-65 MiB for each run of a million rollouts that `evalgate compare` reads
(bench/compare_scale.py). ``malloc_trim(0)`` releases every whole free page, wherever it is
(glibc 2.8+), in milliseconds; setting the allocator's thresholds instead cost seconds of page
faults in the statistics' temporaries. Elsewhere (another libc, another system) nothing is done.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

__all__ = ["trim"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # on the first trim, not at every run's import

    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # no such symbol: musl, or a static build
        return None


def trim() -> None:
    """Return the heap's free pages to the system (a no-op where malloc_trim is missing)."""
    release = _malloc_trim()
    if release is not None:
        release(0)

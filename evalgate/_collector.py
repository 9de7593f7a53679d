"""The cyclic garbage collector held off while a run starts (issue #36).

A run's start-up (pydantic's validators, jinja2, aiohttp, the config) allocates some 80,000
objects that live as long as the process, and almost no garbage: the collector's passes over
them found ~2,000 objects for ~15 ms of a 1-item run. So the console entry holds the collector
off, and the run releases it once started: what start-up made is frozen (``gc.freeze``: never
scanned again, and its few cycles of garbage, a few hundred KB, never freed) and the collector
runs again, for the run's own cyclic garbage (asyncio's futures, tracebacks). A command that
does not release it itself gets it back before its module is imported (:func:`evalgate.cli`).
Only the console entry holds it: a caller of ``evalgate.cli.main`` in its own process (tests)
keeps its collector as it is.
"""

from __future__ import annotations

import gc

__all__ = ["hold", "release"]

_held = False


def hold() -> None:
    """No collection until :func:`release` (the console entry only)."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def release(*, freeze: bool) -> None:
    """The collector runs again; with ``freeze``, not over what exists now. No-op unless held."""
    global _held
    if _held:
        if freeze:
            gc.freeze()
        gc.enable()
        _held = False

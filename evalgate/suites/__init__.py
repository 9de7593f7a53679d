"""Benchmark kinds: each turns a resolved benchmark config into items and scored rollouts."""

from __future__ import annotations

from evalgate.suites.base import Item, Outcome, Suite, build_suite, build_suites

__all__ = ["Item", "Outcome", "Suite", "build_suite", "build_suites"]

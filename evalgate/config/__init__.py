"""Stage 1, config: evals.yaml → a validated, frozen :class:`Config`.

``spec/`` holds the schema (pydantic models), ``load`` the layering and validation (benchmark YAML <
evals.yaml < command-line overrides), ``overrides`` the dotted ``--a.b=c`` flags, ``benchmarks`` the
registry of ``benchmarks/*.yaml`` and ``_yamlio`` YAML with line numbers.
"""

from __future__ import annotations

from evalgate.config.load import Config, EvalsFile, load_config

__all__ = ["Config", "EvalsFile", "load_config"]

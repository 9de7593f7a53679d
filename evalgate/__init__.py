"""evalgate: gate pull requests on LLM evaluation results."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]

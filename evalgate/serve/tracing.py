"""Optional Langfuse tracing of model calls, through LiteLLM's own callbacks.

Off unless both Langfuse keys are in the environment. When on, the LiteLLM proxy that evalgate
starts (the ``litellm`` backend) gets ``success_callback`` / ``failure_callback: ["langfuse"]``
in its generated config, and reads the keys and ``LANGFUSE_HOST`` from its own environment: they
never land in the config file. LiteLLM's ``langfuse`` callback needs the v2 SDK in the proxy's
interpreter (``pip install 'langfuse>=2.59.7,<3'``; v3+ is LiteLLM's separate ``langfuse_otel``).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Mapping

from evalgate.config.routes import LANGFUSE_KEYS
from evalgate.errors import ConfigError

__all__ = [
    "LANGFUSE_ENV",
    "LANGFUSE_INSTALL_HINT",
    "LANGFUSE_KEYS",
    "langfuse_enabled",
    "litellm_callback_settings",
]

# Keys that switch tracing on, then the optional host (Langfuse's SDK defaults to its cloud).
LANGFUSE_ENV = (*LANGFUSE_KEYS, "LANGFUSE_HOST")
LANGFUSE_INSTALL_HINT = "pip install 'langfuse>=2.59.7,<3'"


def langfuse_enabled(environ: Mapping[str, str]) -> bool:
    """True when both Langfuse keys are set (non-empty)."""
    return all(environ.get(name) for name in LANGFUSE_KEYS)


def _langfuse_installed(environ: Mapping[str, str]) -> bool:
    """Whether the proxy's interpreter has the SDK: the callback runs in the proxy, which may be
    a side venv (EVALGATE_LITELLM_PYTHON), not in this process."""
    from evalgate.serve.litellm import litellm_python

    python = litellm_python(environ) or sys.executable
    if python == sys.executable:
        return importlib.util.find_spec("langfuse") is not None
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('langfuse') is None)"
    try:
        return (
            subprocess.run([python, "-c", probe], capture_output=True, timeout=60).returncode == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def litellm_callback_settings(environ: Mapping[str, str]) -> dict[str, list[str]]:
    """The ``litellm_settings`` entries that turn tracing on; empty when it is off.

    Raises ConfigError when the keys are set but the SDK is missing: the keys say the user wants
    traces, and LiteLLM would otherwise only log the failure deep in the proxy's log.
    """
    if not langfuse_enabled(environ):
        return {}
    if not _langfuse_installed(environ):
        raise ConfigError(
            "LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY are set, so calls would be traced, but "
            f"the langfuse package is not installed: {LANGFUSE_INSTALL_HINT} (or unset the keys)"
        )
    # Failures too: an errored rollout is exactly the call one wants to look at.
    return {"success_callback": ["langfuse"], "failure_callback": ["langfuse"]}

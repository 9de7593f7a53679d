"""API keys read from the environment, checked once where they enter.

A key pasted from a file or a secret store often ends in a newline. Sent as is, it makes the
``Authorization`` header invalid and the HTTP library raise deep inside a request (a crash, exit
4, after the server started). Surrounding whitespace is never part of a key: it is stripped; a
control character inside one is a one-line error naming the variable (the value never printed).
"""

from __future__ import annotations

from collections.abc import Mapping

from evalgate.errors import ConfigError

__all__ = ["api_key_from_env", "check_api_key"]


def check_api_key(key: str, *, where: str) -> str:
    """``key`` without surrounding whitespace; ConfigError if a control character remains."""
    key = key.strip()
    if any(ord(c) < 32 or ord(c) == 127 for c in key):
        raise ConfigError(
            f"{where}: the API key contains a line break or another control character; "
            "set it to the key alone"
        )
    return key


def api_key_from_env(environ: Mapping[str, str], name: str, *, model: str) -> str:
    """The key in ``$name``, stripped; '' when unset or blank (the caller says what is needed)."""
    return check_api_key(environ.get(name) or "", where=f"model {model!r}: ${name}")

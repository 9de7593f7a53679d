"""Running git for the stores: a clean environment, a timeout, a token kept out of sight.

Every call is ``subprocess.run([...], check=False, capture_output=True)``; a failure becomes a
:class:`~evalgate.store.base.StoreError` whose one-line message quotes git's first error line,
with the token (and any password in a URL) masked. The token reaches git as an HTTP header
through ``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n`` — the environment form of
``git -c`` — so it is never in an argument list, where other processes could read it in ``ps``.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from evalgate.store.base import StoreError

__all__ = ["Git", "GitFailed"]

# Inherited variables that would point git somewhere else than the repository we name with -C
# (they are set, for example, while a git hook runs).
_REDIRECTS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_COMMON_DIR",
)

IDENTITY = {
    # Runners often have no git identity; result commits should not borrow the user's anyway.
    "GIT_AUTHOR_NAME": "evalgate",
    "GIT_AUTHOR_EMAIL": "evalgate@users.noreply.github.com",
    "GIT_COMMITTER_NAME": "evalgate",
    "GIT_COMMITTER_EMAIL": "evalgate@users.noreply.github.com",
}

_URL_PASSWORD = re.compile(r"(://[^/\s:@]*:)[^@\s/]+@")


class GitFailed(Exception):
    """git exited non-zero; ``stderr`` and ``stdout`` are decoded and masked."""

    def __init__(self, args: Sequence[str], returncode: int, stdout: str, stderr: str) -> None:
        self.git_args = list(args)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        super().__init__(first_error_line(stderr) or f"exit code {returncode}")


def first_error_line(stderr: str) -> str:
    """The line that says what went wrong: the first ``fatal:``/``error:`` line, else the first."""
    lines = [" ".join(line.split()) for line in stderr.splitlines()]
    lines = [line for line in lines if line]
    for line in lines:
        if line.startswith(("fatal:", "error:")):
            return line[:300]
    return lines[0][:300] if lines else ""


class Git:
    """git in one repository, with a fixed environment and optional token."""

    def __init__(
        self,
        repo: os.PathLike[str] | str,
        *,
        environ: Mapping[str, str] | None = None,
        token: str | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.repo = os.fspath(repo)
        self.timeout = timeout
        self._token = token or None
        self._secrets = [s for s in (self._token, _basic(self._token)) if s]
        env = dict(os.environ if environ is None else environ)
        for name in _REDIRECTS:
            env.pop(name, None)
        env.update(IDENTITY)
        env["GIT_TERMINAL_PROMPT"] = "0"  # never wait for a password nobody will type
        env["GCM_INTERACTIVE"] = "never"  # Git Credential Manager's own prompt
        env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
        env["LC_ALL"] = "C"  # stable messages: we match a few of them
        env.pop("LANGUAGE", None)
        # Our fetches should not start housekeeping (gc, commit-graph) in the user's repository.
        _add_config(env, [("gc.auto", "0"), ("maintenance.auto", "false")])
        self.env = env

    def mask(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return _URL_PASSWORD.sub(r"\1***@", text)

    def use_token_for(self, url: str) -> None:
        """Send the token as an ``Authorization`` header to ``url``'s host (http(s) only).

        The header is set for ``http.{scheme}://{host}/.extraheader`` after an empty value for
        that key: the empty value clears the header actions/checkout persisted for the same
        key, so GitHub never receives two Authorization headers (it rejects that).
        """
        if self._token is None:
            return
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return  # ssh or a local path: the token means nothing there
        host = parts.hostname + (f":{parts.port}" if parts.port else "")
        key = f"http.{parts.scheme}://{host}/.extraheader"
        _add_config(self.env, [(key, ""), (key, f"AUTHORIZATION: basic {_basic(self._token)}")])

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> str:
        """stdout of ``git -C repo ARGS`` as text; GitFailed on a non-zero exit."""
        out = self.run_bytes(*args, input=input, timeout=timeout, env=env)
        return out.decode("utf-8", errors="replace")

    def run_bytes(
        self,
        *args: str,
        input: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> bytes:
        argv = ["git", "-C", self.repo, *args]
        limit = self.timeout if timeout is None else timeout
        try:
            proc = subprocess.run(
                argv,
                input=input,
                check=False,
                capture_output=True,
                timeout=limit,
                env={**self.env, **env} if env else self.env,
            )
        except FileNotFoundError as exc:
            raise StoreError("git is not installed or not on PATH; install git") from exc
        except subprocess.TimeoutExpired as exc:
            raise StoreError(
                f"git {args[0]} timed out after {limit:.0f} s; check the network and the remote"
            ) from exc
        if proc.returncode != 0:
            raise GitFailed(
                args,
                proc.returncode,
                self.mask(proc.stdout.decode("utf-8", errors="replace")),
                self.mask(proc.stderr.decode("utf-8", errors="replace")),
            )
        return proc.stdout


def _basic(token: str | None) -> str | None:
    # How actions/checkout authenticates: basic auth with the user "x-access-token".
    if not token:
        return None
    return base64.b64encode(f"x-access-token:{token}".encode()).decode("ascii")


def _add_config(env: dict[str, str], items: Sequence[tuple[str, str]]) -> None:
    """Append ``git -c`` style settings to ``env``, after any the caller's environment had."""
    try:
        count = int(env.get("GIT_CONFIG_COUNT", "0") or 0)
    except ValueError:
        count = 0
    for key, value in items:
        env[f"GIT_CONFIG_KEY_{count}"] = key
        env[f"GIT_CONFIG_VALUE_{count}"] = value
        count += 1
    env["GIT_CONFIG_COUNT"] = str(count)

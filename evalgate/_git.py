"""The one way evalgate runs git: a clean environment, a timeout, a token kept out of sight.

Used by the result store (:mod:`evalgate.store.git_branch`) and by the Action's questions about
the checkout (:mod:`evalgate.action.git`), so both behave the same. It lives at the top of the
package, beside :mod:`evalgate.errors`, because it belongs to no stage: ``store/`` and ``action/``
both import it and it imports nothing of evalgate but the errors.

Every call is ``subprocess.run([...], check=False, capture_output=True)``. A non-zero exit raises
:class:`GitFailed`, whose one-line message quotes git's first error line with the token (and any
password in a URL) masked; git missing or too slow raises the caller's ``error`` class (an
:class:`~evalgate.errors.InfraError` by default). The token reaches git as an HTTP header through
``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n`` — the environment form of
``git -c`` — so it is never in an argument list, where other processes could read it in ``ps``.

``safe.directory``: GitHub runs a docker action as root on a checkout that belongs to the
runner's user (uid 1001), and git refuses such a repository ("detected dubious ownership").
Each :class:`Git` marks as safe the repository it was pointed at — the folder and its ancestors,
since ``repo`` may be a subfolder of the checkout — and :meth:`Git.trust` a local remote; nothing
else (not ``*``), so a repository git merely comes across is still checked.
"""

from __future__ import annotations

import base64
import os
import re
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypedDict, Unpack
from urllib.parse import urlsplit

from evalgate.errors import EvalgateError, InfraError

__all__ = ["IDENTITY", "Git", "GitFailed", "first_error_line"]


class _RunOptions(TypedDict, total=False):
    """What a git call may set besides its arguments (:meth:`Git.run_bytes` spells them out)."""

    input: bytes | None
    timeout: float | None
    env: Mapping[str, str] | None


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
        error: type[EvalgateError] = InfraError,
    ) -> None:
        self.repo = os.fspath(repo)
        self.timeout = timeout
        self._error = error
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
        self.trust(self.repo, enclosing=True)
        self._local_remote: str | None = None

    def use_remote(self, remote: str) -> str:
        """Get ready to fetch from and push to ``remote`` (a remote's name, a URL or a path):
        the token as a header for its host, and trust when it is a folder on this machine.
        Returns its URL."""
        try:
            url = self.run("remote", "get-url", "--", remote).strip()
        except GitFailed:
            url = remote  # not a configured remote: git takes it as a URL or path
        self.use_token_for(url)
        local = _local_path(url, self.repo)
        if local is not None:  # git checks a local remote's owner too (its upload-pack does)
            self.trust_local_remote(local)
        return url

    def trust(self, path: os.PathLike[str] | str, *, enclosing: bool = False) -> None:
        """Let git use the repository at ``path`` whoever owns it (``safe.directory``).

        git compares the value with the repository's real top-level folder, so ``enclosing``
        also names every ancestor of ``path``: one of them is the top level when ``path`` is a
        folder inside the checkout.
        """
        real = Path(os.path.realpath(path))
        folders = [real, *real.parents] if enclosing else [real]
        _add_config(self.env, [("safe.directory", str(folder)) for folder in folders])

    def trust_local_remote(self, path: os.PathLike[str] | str) -> None:
        """Let fetch and push use a remote at ``path`` on this machine whoever owns it.

        git runs a local remote's upload-pack/receive-pack with the ``git -c`` settings of the
        environment removed, so ``safe.directory`` must be on their own command line:
        :meth:`pack_args` gives the options that put it there.
        """
        self._local_remote = os.path.realpath(path)

    def pack_args(self, command: str) -> list[str]:
        """Options for ``fetch``/``push`` that carry :meth:`trust_local_remote` to the remote."""
        if self._local_remote is None:
            return []
        program = {"fetch": "upload-pack", "push": "receive-pack"}[command]
        safe = shlex.quote(f"safe.directory={self._local_remote}")
        return [f"--{program}=git -c {safe} {program}"]

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

    def run(self, *args: str, **options: Unpack[_RunOptions]) -> str:
        """stdout of ``git -C repo ARGS`` as text; GitFailed on a non-zero exit."""
        return self.run_bytes(*args, **options).decode("utf-8", errors="replace")

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
            raise self._error("git is not installed or not on PATH; install git") from exc
        except subprocess.TimeoutExpired as exc:
            raise self._error(
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


def _local_path(url: str, repo: str) -> str | None:
    """The folder a remote URL names on this machine, or None for a network remote."""
    if url.startswith("file://"):
        return urlsplit(url).path
    if "://" in url or re.match(r"[^/]+:", url):  # a URL, or scp-like ``host:path`` (ssh)
        return None
    return os.path.join(repo, url)  # relative to the repository; an absolute path wins


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

"""Every call that reaches Modal, behind one seam, each failure mapped to a one-line error.

Modal's own exceptions name neither the cause a user can act on nor the exit code evalgate
promises, so each call runs under :func:`modal_errors`:

- no token anywhere (environment or ``~/.modal.toml``) → ConfigError before any network call;
- ``AuthError`` / ``PermissionDeniedError`` / ``InvalidError`` (a rejected or malformed token,
  an environment the token may not use, a bad argument) → ConfigError, exit 2, with the fix;
- the server cannot be reached → InfraError, exit 3. Modal's client retries a refused connection
  for about a minute before it says so; a TCP connect to the server first answers in
  milliseconds when nothing listens there;
- anything else of Modal's → InfraError with its first line.

``stop --all`` stops apps by **app id**: an ephemeral app (``app.run()``, a killed CI job's
leftover) has no deployment name, and a lookup by name cannot find it.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from evalgate.errors import ConfigError, InfraError

if TYPE_CHECKING:
    import types

    import modal

__all__ = [
    "FUNCTION_NAME",
    "MANAGED_TAG",
    "ModalOps",
    "first_line",
    "modal_errors",
    "modal_token_source",
]

FUNCTION_NAME = "serve"
MANAGED_TAG = ("managed-by", "evalgate")
DEFAULT_SERVER_URL = "https://api.modal.com"
TOKEN_FIX = (
    "set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET (create a token with `modal token new`; in CI, "
    "repository secrets passed as env), and MODAL_ENVIRONMENT if not the default environment"
)
_CONNECT_TIMEOUT_S = 10.0


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def modal_token_source(environ: Mapping[str, str]) -> str | None:
    """Where Modal would take a token from, or None when there is none."""
    if environ.get("MODAL_TOKEN_ID") and environ.get("MODAL_TOKEN_SECRET"):
        return "MODAL_TOKEN_ID / MODAL_TOKEN_SECRET"
    path = Path(environ.get("MODAL_CONFIG_PATH") or Path(environ.get("HOME", "~")) / ".modal.toml")
    try:
        text = path.expanduser().read_text(encoding="utf-8")
    except OSError:
        return None
    return str(path) if "token_id" in text and "token_secret" in text else None


def _server_url(environ: Mapping[str, str]) -> str:
    return environ.get("MODAL_SERVER_URL") or DEFAULT_SERVER_URL


@contextlib.contextmanager
def modal_errors(
    modal: types.ModuleType, doing: str, server_url: str = DEFAULT_SERVER_URL
) -> Iterator[None]:
    """Map Modal's exceptions raised while ``doing`` to ConfigError (2) or InfraError (3)."""
    exc_mod = modal.exception
    try:
        yield
    except (exc_mod.AuthError, exc_mod.PermissionDeniedError) as exc:
        raise ConfigError(
            f"Modal rejected the credentials while {doing}: {first_line(exc)}", hint=TOKEN_FIX
        ) from exc
    except exc_mod.InvalidError as exc:
        raise ConfigError(f"Modal refused the request while {doing}: {first_line(exc)}") from exc
    except exc_mod.ConnectionError as exc:
        raise InfraError(
            f"cannot reach Modal at {server_url} while {doing}: {first_line(exc)}",
            hint="check this machine's network access to Modal (MODAL_SERVER_URL if set)",
        ) from exc
    except exc_mod.Error as exc:
        raise InfraError(f"Modal failed while {doing}: {first_line(exc)}") from exc


def _reachable(server_url: str) -> str | None:
    """None when a TCP connection to the server opens, else why not."""
    parts = urlsplit(server_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=_CONNECT_TIMEOUT_S):
            return None
    except OSError as exc:
        return str(exc) or type(exc).__name__


def _served_at(app: modal.App, url: str | None) -> str:
    """The started app's web URL; Modal giving none is its failure, not a URL of None."""
    if not url:
        raise InfraError(f"Modal started the app {app.name} but gave no web URL for it")
    return url


class ModalOps:
    """Every call that reaches Modal. Credentials come from ``environ`` (MODAL_TOKEN_ID and
    MODAL_TOKEN_SECRET, MODAL_ENVIRONMENT), else from modal's own configuration file."""

    def __init__(self, environ: Mapping[str, str], *, show_output: bool = True) -> None:
        from evalgate.serve.modal_vllm import import_modal

        self.modal = import_modal()
        if modal_token_source(environ) is None:
            raise ConfigError("no Modal token found", hint=TOKEN_FIX)
        self.environment: str | None = environ.get("MODAL_ENVIRONMENT") or None
        self.server_url = _server_url(environ)
        self.show_output = show_output  # Modal's build and container logs, as they come
        self._token = (environ.get("MODAL_TOKEN_ID"), environ.get("MODAL_TOKEN_SECRET"))
        self._client: modal.Client | None = None

    def _errors(self, doing: str) -> contextlib.AbstractContextManager[None]:
        return modal_errors(self.modal, doing, self.server_url)

    @property
    def client(self) -> modal.Client:
        if self._client is None:
            why = _reachable(self.server_url)
            if why is not None:
                raise InfraError(
                    f"cannot reach Modal at {self.server_url}: {why}",
                    hint="check this machine's network access to Modal (MODAL_SERVER_URL if set)",
                )
            with self._errors("connecting"):
                if all(self._token):
                    self._client = self.modal.Client.from_credentials(*self._token)
                else:  # the token of ~/.modal.toml (or MODAL_CONFIG_PATH)
                    self._client = self.modal.Client.from_env()
        return self._client

    def _output(self, stack: contextlib.ExitStack) -> None:
        if self.show_output:
            stack.enter_context(self.modal.enable_output())

    def run_ephemeral(
        self, app: modal.App, function: modal.Function, stack: contextlib.ExitStack
    ) -> str:
        """Start ``app`` until ``stack`` closes; its web URL. Modal's image build and the
        container's start-up (weights, compile) stream to the console while it runs."""
        client = self.client
        self._output(stack)
        with self._errors(f"starting the app {app.name}"):
            stack.enter_context(app.run(client=client, environment_name=self.environment))
            url = function.get_web_url()
        return _served_at(app, url)

    def deploy(self, app: modal.App, function: modal.Function) -> str:
        client = self.client
        with contextlib.ExitStack() as stack, self._errors(f"deploying {app.name}"):
            self._output(stack)
            app.deploy(environment_name=self.environment, client=client)
            url = function.get_web_url()
        return _served_at(app, url or (self.web_url(app.name) if app.name else None))

    def web_url(self, app_name: str) -> str | None:
        """The deployed app's URL, or None when no such app is deployed."""
        client = self.client
        with self._errors(f"looking up {app_name}"):
            fn = self.modal.Function.from_name(
                app_name, FUNCTION_NAME, environment_name=self.environment, client=client
            )
            try:
                return fn.get_web_url()
            except self.modal.exception.NotFoundError:
                return None

    def tags(self, app_name: str) -> dict[str, str] | None:
        client = self.client
        with self._errors(f"looking up {app_name}"):
            try:
                app = self.modal.App.lookup(
                    app_name, environment_name=self.environment, client=client
                )
                return app.get_tags(client=client)
            except self.modal.exception.NotFoundError:
                return None

    def stop(self, app: str) -> bool:
        """Stop an app given by deployment name or by app id (``ap-…``, ephemeral apps)."""
        client = self.client
        with self._errors(f"stopping {app}"):
            try:
                found = self.modal.App.lookup(app, environment_name=self.environment, client=client)
            except self.modal.exception.NotFoundError:
                return False
            found.stop(client=client)
        return True

    def managed_apps(self) -> list[tuple[str, str, dict[str, str]]]:
        """(app id, name or description, tags) of every live app evalgate created in the
        environment, ephemeral ones (no name) included."""
        client = self.client
        with self._errors("listing apps"):
            env = (
                self.modal.Environment.from_name(self.environment, client=client)
                if self.environment
                else self.modal.Environment.from_context(client=client)
            )
            found = []
            for app in env.apps.list():
                tags = app.get_tags(client=client)
                if tags.get(MANAGED_TAG[0]) == MANAGED_TAG[1]:
                    label = app.name or app.description or app.app_id
                    found.append((app.app_id, label, tags))
        return found

    def close(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
            self._client = None

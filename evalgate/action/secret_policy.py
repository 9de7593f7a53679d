"""Where a PR may send a secret: only where the base's config sends it (and never the job's own
credentials). The routes are walked by :func:`evalgate.config.routes.routes`, on what runs."""

from __future__ import annotations

from evalgate.action.exam_merge import merge
from evalgate.config.load import Config
from evalgate.config.routes import routes
from evalgate.errors import ConfigError

__all__ = ["check_secret_routes", "secret_routes"]

# The job's own credentials: never a model's key, whatever the base says (the first PR too).
_JOB_SECRETS = ("INPUT_", "ACTIONS_", "RUNNER_")


def secret_routes(config: Config) -> set[tuple[str, str]]:
    """Every (secret, destination) pair a config sends (:func:`evalgate.config.routes.routes`)."""
    return {(r.secret, r.dest) for r in routes(config)}


def check_secret_routes(base: Config | None, pr: Config, config_name: str) -> None:
    """Refuse, in one line, a secret the run would send where the base config never sends it
    (``base`` None: no base config, the first adoption: only the job's own credentials).

    The routes walked are those of what runs: the PR's models with the base's exam laid over
    the PR's config (:func:`merge`), so a judge, grader or LiteLLM endpoint of a benchmark only
    the PR has is checked like a model, and a base benchmark's judge stays the base's."""
    run = merge(base, pr) if base is not None else pr
    allowed = secret_routes(base) if base is not None else None
    for route in routes(run):
        head = f"{config_name}: {route.where}: {route.field}"
        if route.secret.startswith(_JOB_SECRETS):
            raise ConfigError(
                f"{head}: {route.secret} is the job's own credential, never a model's key; refused"
            )
        if allowed is not None and (route.secret, route.dest) not in allowed:
            raise ConfigError(
                f"{head}: this PR would send {route.secret} to {route.dest}, where the base "
                "branch never sends it; refused (a secret goes only where the base's config "
                "sends it: land the change on the base branch first)"
            )

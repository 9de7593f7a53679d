"""Paths in evals.yaml stay inside the repository: a PR's config cannot point the run at a host
path (``/root/.ssh``) or, through a symlink, out of the checkout."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from evalgate.config.load import Config
from evalgate.config.spec import Benchmark
from evalgate.errors import ConfigError

__all__ = ["check_paths"]


def check_paths(config: Config, root: Path, config_name: str) -> None:
    """Refuse, in one line, a path in ``config`` that leads out of the repository at ``root``
    (a host path like ``/root/.ssh``, or a symlink out of it)."""
    top = root.resolve()
    for what, value in _config_paths(config):
        real = Path(os.path.realpath(os.path.expanduser(value)))
        if real != top and top not in real.parents:
            raise ConfigError(
                f"{config_name}: {what}: {value} is outside the repository (resolves to "
                f"{real}); paths in {config_name} must stay inside it"
            )


def _config_paths(config: Config) -> Iterator[tuple[str, str]]:
    for bench in config.benchmarks:
        yield from _bench_paths(bench)
    for model in config.models:
        if template := getattr(model, "chat_template", None):
            full = Path(config.path).parent / Path(template).expanduser()
            if os.sep in template or full.exists():  # else a built-in template's name
                yield f"models.{model.name}: chat_template", str(full)


def _bench_paths(bench: Benchmark) -> Iterator[tuple[str, str]]:
    for name in ("path", "tasks", "env_path", "task"):  # made absolute by the loader
        value = getattr(bench, name, None)
        if isinstance(value, str) and (name != "task" or ".py" in value):
            yield f"{bench.name}: {name}", value.partition("@")[0]
    files = getattr(bench, "data_files", None)
    for value in [files] if isinstance(files, str) else files or []:
        if Path(value).is_absolute():  # anchored by the loader next to evals.yaml
            yield f"{bench.name}: data_files", value
    if bench.kind == "hf" and Path(bench.dataset).is_absolute():  # a local folder
        yield f"{bench.name}: dataset", bench.dataset
    if bench.kind != "agent":
        return
    for variant in bench.variants:
        for name in ("skills_dir", "mcp_config"):
            if (value := getattr(variant, name)) is not None:
                yield f"{bench.name}: variants.{variant.name}.{name}", value
    command = bench.agent.command
    if command and os.sep in command[0]:  # a bare name is a program on PATH
        yield f"{bench.name}: agent.command (a bare program name is looked up on PATH)", command[0]

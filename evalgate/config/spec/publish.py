"""Where results go besides the output folder: opt-in publishing (`publish:` in evals.yaml)."""

# Annotations are objects, not strings: see _base.

from pydantic import Field

from evalgate.config.spec._base import Strict

__all__ = ["HFHubSettings", "PublishSettings"]


class HFHubSettings(Strict):
    """A Hugging Face dataset repository that collects runs, one folder per run."""

    repo: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Dataset repository `ORG/NAME`; created (private unless `private: false`) if missing."""
    private: bool = True
    """Create the repository private (an existing repository's visibility is left alone)."""


class PublishSettings(Strict):
    """Opt-in destinations for a finished run's results (the token comes from `HF_TOKEN`)."""

    hf_hub: HFHubSettings | None = None
    """Upload results.jsonl, metadata.json, run_config.json and the scorecard to this dataset
    repository after each `evalgate local` run (as `evalgate push` does)."""

"""Subcommands that are more than a call into the pipeline: ``doctor``, ``runs``/``show``."""

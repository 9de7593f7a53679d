"""The ``vllm serve`` flags that evals.yaml sets through fields of their own.

Owned here, by the configuration, so that loading evals.yaml refuses ``extra_args`` that would
override a field (``--tensor-parallel-size`` next to ``tensor_parallel_size``) before anything
starts; the serving layer's command builder applies the same check to what it is given.
"""

from __future__ import annotations

from evalgate.errors import ConfigError

__all__ = ["OWNED_FLAGS", "check_extra_args"]

# Flags evalgate sets itself; a duplicate in extra_args would silently win (argparse keeps the
# last), so it is refused unless it is one of the documented escape hatches below.
OWNED_FLAGS = frozenset(
    {
        "--served-model-name",
        "--host",
        "--port",
        "--revision",
        "--tokenizer-revision",
        "--dtype",
        "--tensor-parallel-size",
        "-tp",
        "--data-parallel-size",
        "-dp",
        "--max-model-len",
        "--gpu-memory-utilization",
        "--enable-prefix-caching",
        "--no-enable-prefix-caching",
        "--trust-remote-code",
        "--chat-template",
        "--api-key",
    }
)


def check_extra_args(extra: list[str]) -> None:
    """A flag evalgate sets from its own field is refused in ``extra_args``."""
    for arg in extra:
        flag = arg.split("=", 1)[0]
        if flag in OWNED_FLAGS:
            raise ConfigError(
                f"extra_args: {flag} is set from its own field (e.g. tensor_parallel_size, "
                "chat_template); set it there instead"
                + ("; the API key comes from the environment" if flag == "--api-key" else "")
            )

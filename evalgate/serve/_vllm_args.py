"""The ``vllm serve`` command line, built from :class:`~evalgate.config.spec.VLLMOptions`.

One builder for both backends (a subprocess here, a container on Modal), so the server a run
measured is the same whichever machine ran it; tests assert on the exact list. Flags are always
spelled out, defaults included, so the log shows every setting that shaped the numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from evalgate.config.vllm_flags import check_extra_args

if TYPE_CHECKING:
    from evalgate.config.spec.models import VLLMOptions

__all__ = ["gpus_needed", "serve_args", "serve_command"]


def gpus_needed(opts: VLLMOptions) -> int:
    """GPUs one server uses: tensor-parallel ranks times data-parallel replicas."""
    return int(opts.tensor_parallel_size) * int(opts.data_parallel_size)


def _flags(extra: Iterable[object]) -> set[str]:
    return {str(arg).split("=", 1)[0] for arg in extra}


def serve_args(
    opts: VLLMOptions,
    *,
    served_model_name: str,
    host: str,
    port: int,
    chat_template: str | None = None,
) -> list[str]:
    """Everything after ``vllm serve``: the model, then one flag per option, then extra_args."""
    check_extra_args(list(opts.extra_args))
    args = [opts.model, "--served-model-name", served_model_name, "--host", host]
    args += ["--port", str(port)]
    if opts.revision:
        # The tokenizer (and its chat template) must come from the same commit as the weights.
        args += ["--revision", opts.revision, "--tokenizer-revision", opts.revision]
    args += ["--dtype", opts.dtype]
    args += ["--tensor-parallel-size", str(opts.tensor_parallel_size)]
    args += ["--data-parallel-size", str(opts.data_parallel_size)]
    if opts.max_model_len is not None:
        args += ["--max-model-len", str(opts.max_model_len)]
    args += ["--gpu-memory-utilization", f"{opts.gpu_memory_utilization:g}"]
    args.append(
        "--enable-prefix-caching" if opts.enable_prefix_caching else "--no-enable-prefix-caching"
    )
    if opts.trust_remote_code:
        args.append("--trust-remote-code")
    # vLLM would otherwise apply the repository's generation_config.json (top_k, repetition
    # penalty, …) on top of what evals.yaml asks for; a revision bump could then move scores
    # without any visible change. `extra_args: [--generation-config, auto]` restores it, in
    # place of this default rather than after it (vLLM warns on a duplicate flag).
    if "--generation-config" not in _flags(opts.extra_args):
        args += ["--generation-config", "vllm"]
    if chat_template is not None:
        args += ["--chat-template", chat_template]
    return args + list(opts.extra_args)


def serve_command(
    opts: VLLMOptions,
    *,
    served_model_name: str,
    host: str,
    port: int,
    chat_template: str | None = None,
    executable: str = "vllm",
) -> list[str]:
    """The full argv: ``[executable, "serve", MODEL, --flags…]``."""
    return [
        executable,
        "serve",
        *serve_args(
            opts,
            served_model_name=served_model_name,
            host=host,
            port=port,
            chat_template=chat_template,
        ),
    ]

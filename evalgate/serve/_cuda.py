"""The CUDA of the Modal image, derived from the vLLM release it installs: in one place.

vLLM's wheel pins one torch, and that torch's wheels link one CUDA major (``libcudart.so.13``
for torch 2.11+ on Linux). The image's toolkit (nvcc and headers, for the kernels vLLM and
FlashInfer compile at start-up) must be that CUDA, or JIT kernels build with the wrong one. The
table is read off the wheels' metadata (tests/data/vllm_cuda_metadata.json, checked by
tests/test_modal_cuda.py); a vLLM release not in it is refused rather than guessed.
"""

from __future__ import annotations

from evalgate.errors import ConfigError

__all__ = ["CUDA_IMAGES", "VLLM_TORCH_CUDA", "cuda_image"]

# vLLM release → (the torch it pins, the CUDA major.minor that torch's Linux wheels require).
VLLM_TORCH_CUDA: dict[str, tuple[str, str]] = {
    "0.11.0": ("2.8.0", "12.8"),
    "0.20.0": ("2.11.0", "13.0"),
    "0.25.0": ("2.11.0", "13.0"),
    "0.33.0": ("2.14.0", "13.0"),
}

# CUDA major.minor → the devel image (pinned tags: an image that changes under a tag would
# change what a baseline measured).
CUDA_IMAGES: dict[str, str] = {
    "12.8": "nvidia/cuda:12.8.1-devel-ubuntu22.04",
    "13.0": "nvidia/cuda:13.0.1-devel-ubuntu22.04",
}


def cuda_image(vllm_version: str) -> str:
    """The devel image whose CUDA matches what ``vllm==vllm_version``'s torch links."""
    known = VLLM_TORCH_CUDA.get(vllm_version)
    if known is None:
        raise ConfigError(
            f"vllm_version {vllm_version!r}: the CUDA its torch needs is not recorded in this "
            f"evalgate (known: {', '.join(VLLM_TORCH_CUDA)}); use one of those"
        )
    return CUDA_IMAGES[known[1]]

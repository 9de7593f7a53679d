"""The Modal image's CUDA follows the vLLM release it installs: the table in serve/_cuda.py
agrees with the wheels' own metadata (tests/data/vllm_cuda_metadata.json, read off the index
by tests/data/vllm_cuda_metadata.py: vLLM's torch pin, that torch's CUDA requirement)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evalgate.config.spec import ModalVLLMModel
from evalgate.errors import ConfigError
from evalgate.serve._cuda import CUDA_IMAGES, VLLM_TORCH_CUDA, cuda_image
from evalgate.serve.chat_template import ChatTemplate
from evalgate.serve.modal_vllm import describe

METADATA = json.loads(
    (Path(__file__).parent / "data" / "vllm_cuda_metadata.json").read_text(encoding="utf-8")
)


def _image_cuda(image: str) -> str:
    match = re.fullmatch(r"nvidia/cuda:(\d+)\.(\d+)\.\d+-devel-ubuntu\d+\.\d+", image)
    assert match, image
    return f"{match[1]}.{match[2]}"


@pytest.mark.parametrize("version", sorted(METADATA))
def test_the_image_cuda_is_the_one_the_pinned_torch_links(version: str) -> None:
    record = METADATA[version]
    torch = record["vllm_requires_torch"].split("==")[1].split(";")[0].strip()
    (cuda_req,) = record["torch_requires_cuda"]
    cuda = re.search(r"==(\d+)\.(\d+)", cuda_req)
    assert cuda is not None
    assert VLLM_TORCH_CUDA[version] == (torch, f"{cuda[1]}.{cuda[2]}")
    assert _image_cuda(cuda_image(version)) == f"{cuda[1]}.{cuda[2]}"


def test_every_recorded_release_is_backed_by_metadata() -> None:
    assert set(VLLM_TORCH_CUDA) == set(METADATA)
    assert all(_image_cuda(image) == cuda for cuda, image in CUDA_IMAGES.items())


def test_the_default_vllm_gets_a_cuda_13_image() -> None:
    model = ModalVLLMModel(name="q", backend="modal-vllm", model="Qwen/Qwen3-8B", gpu="H100")
    template = ChatTemplate(source="tokenizer", path="/hub/tokenizer_config.json", sha256="t" * 64)
    spec = describe(model, chat_template=template)
    assert spec.packages == (f"vllm=={model.vllm_version}",)
    assert _image_cuda(spec.base_image) == "13.0"  # vllm 0.33.0 → torch 2.14.0 → CUDA 13.0


def test_an_unrecorded_vllm_release_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError) as info:
        cuda_image("0.0.1")
    assert "0.0.1" in str(info.value) and "0.33.0" in str(info.value)
    assert "\n" not in str(info.value)

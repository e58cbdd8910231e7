"""Will a candidate fit its GPUs? Weights from the model's ``config.json``, KV cache at the utilization.

Pipeline position: ``doctor`` (:mod:`launch.preflight`), before anything is launched. A rough, documented
estimate, not vLLM's profiler: it names a candidate that cannot fit by a wide margin (a 284B model on too
few GPUs, a utilization that leaves no room for one ``max_model_len`` sequence), not one that is tight.
Pure::

    shape = model_shape(json.loads(config_text), weight_bytes=None)
    fit(shape, tp=2, dp=4, ep=True, gpu_gib=79.6, utilization=0.81, max_model_len=131072,
        kv_cache_dtype="fp8").problem   # None, or "weights ~ ... GiB per GPU + ..."
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GIB = 1024**3
#: Bytes per element of a checkpoint's dtype (config.json ``torch_dtype``/``dtype``).
DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "float8": 1, "fp8": 1}
#: Room vLLM needs besides weights and KV cache (activations, CUDA graphs, the sampler), in GiB per GPU.
#: Deliberately small: the estimate flags what cannot fit, it does not promise that the rest does.
RESERVE_GIB = 1.0


@dataclass(frozen=True)
class ModelShape:
    """What memory a model needs: weights (dense and expert parts) and KV cache per token."""

    weight_bytes: float
    #: Fraction of the weights in routed experts (split over every GPU with expert parallelism).
    expert_fraction: float
    #: KV cache bytes per token per layer stack, before tensor parallelism splits the heads.
    kv_elements_per_token: float
    kv_heads: int
    #: MLA (DeepSeek): one latent per token, replicated on every tensor-parallel rank.
    latent_kv: bool
    dtype_bytes: int


def _dtype_bytes(config: Mapping[str, Any]) -> int:
    quant = config.get("quantization_config") or {}
    if isinstance(quant, Mapping) and "fp8" in str(quant.get("quant_method", "")).lower():
        return 1
    name = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16").removeprefix("torch.")
    return DTYPE_BYTES.get(name, 2)


def _int(config: Mapping[str, Any], *names: str, default: int = 0) -> int:
    for name in names:
        value = config.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return int(value)
    return default


def model_shape(config: Mapping[str, Any], weight_bytes: float | None = None) -> ModelShape:
    """The memory shape of a Hugging Face ``config.json`` (Llama/Qwen/Mistral/DeepSeek-like fields).

    ``weight_bytes``: the checkpoint's own total (``model.safetensors.index.json`` metadata), which wins
    over the parameter count estimated here.
    """
    config = config.get("text_config", config) if isinstance(config.get("text_config"), Mapping) else config
    hidden = _int(config, "hidden_size", "d_model")
    layers = _int(config, "num_hidden_layers", "n_layer", "num_layers")
    heads = _int(config, "num_attention_heads", "n_head", default=1) or 1
    kv_heads = _int(config, "num_key_value_heads", default=heads) or heads
    head_dim = _int(config, "head_dim", default=hidden // heads)
    vocab = _int(config, "vocab_size")
    inter = _int(config, "intermediate_size", "ffn_dim")
    experts = _int(config, "n_routed_experts", "num_local_experts", "num_experts")
    moe_inter = _int(config, "moe_intermediate_size", default=inter)
    shared = _int(config, "n_shared_experts", "num_shared_experts")
    dense_layers = _int(config, "first_k_dense_replace") if experts else layers
    kv_lora = _int(config, "kv_lora_rank")
    rope_dim = _int(config, "qk_rope_head_dim")
    attention = hidden * heads * head_dim * 2 + 2 * hidden * kv_heads * head_dim
    dense_mlp = 3 * hidden * inter
    expert_params = (layers - dense_layers) * experts * 3 * hidden * moe_inter if experts else 0
    shared_params = (layers - dense_layers) * shared * 3 * hidden * moe_inter if experts else 0
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings") else 2)
    params = layers * attention + dense_layers * dense_mlp + expert_params + shared_params + embeddings
    dtype_bytes = _dtype_bytes(config)
    total = weight_bytes if weight_bytes else params * dtype_bytes
    latent = kv_lora > 0
    per_token = layers * (kv_lora + rope_dim) if latent else 2 * layers * kv_heads * head_dim
    return ModelShape(
        weight_bytes=float(total),
        expert_fraction=expert_params / params if params else 0.0,
        kv_elements_per_token=float(per_token),
        kv_heads=kv_heads,
        latent_kv=latent,
        dtype_bytes=dtype_bytes,
    )


@dataclass(frozen=True)
class Fit:
    """The estimate for one candidate, per GPU, in GiB."""

    weights_gib: float
    kv_one_sequence_gib: float
    budget_gib: float

    @property
    def needed_gib(self) -> float:
        return self.weights_gib + self.kv_one_sequence_gib + RESERVE_GIB

    @property
    def problem(self) -> str | None:
        if self.needed_gib <= self.budget_gib:
            return None
        return (
            f"cannot fit: weights ~{self.weights_gib:.1f} GiB per GPU + KV cache for one max_model_len "
            f"sequence ~{self.kv_one_sequence_gib:.1f} GiB + {RESERVE_GIB:g} GiB reserve > "
            f"{self.budget_gib:.1f} GiB (gpu_memory_utilization x GPU memory)"
        )


def fit(
    shape: ModelShape,
    *,
    tp: int,
    dp: int,
    ep: bool,
    gpu_gib: float,
    utilization: float,
    max_model_len: int,
    kv_cache_dtype: str,
    pp: int = 1,
) -> Fit:
    """Weights and one full-length sequence's KV cache per GPU against ``utilization x gpu_gib``.

    Tensor parallelism splits every weight and the KV heads; with expert parallelism the routed experts
    are split over all TP x DP GPUs (vLLM's EP), the rest over TP. Pipeline parallelism (``pp``) splits
    the layers over its stages, one GPU each: the weights and the KV cache per GPU are 1/PP of that.
    """
    experts = shape.weight_bytes * shape.expert_fraction
    dense = shape.weight_bytes - experts
    weights = (dense / tp + (experts / (tp * dp) if ep else experts / tp)) / pp
    kv_bytes = 1 if kv_cache_dtype.startswith("fp8") else shape.dtype_bytes
    if shape.latent_kv:
        per_gpu_elements = shape.kv_elements_per_token  # MLA's latent is replicated on every TP rank
    else:
        per_gpu_elements = shape.kv_elements_per_token * math.ceil(shape.kv_heads / tp) / shape.kv_heads
    kv = per_gpu_elements * kv_bytes * max_model_len / pp
    return Fit(weights_gib=weights / GIB, kv_one_sequence_gib=kv / GIB, budget_gib=utilization * gpu_gib)

"""The simulator's shipped profile and the case study's baseline engine config, shared by the sim tests."""

from __future__ import annotations

from launch.sim.model import EngineConfig
from launch.sim.profile import load_profile

PROFILE = load_profile("h100x8_deepseek_v4_flash")
#: TP2 x DP4 with expert parallelism, DSpark 7 tokens, 0.81 memory, 16K budget: the retained service.
BASE = EngineConfig(
    tensor_parallel_size=2,
    data_parallel_size=4,
    enable_expert_parallel=True,
    speculative_method="dspark",
    num_speculative_tokens=7,
    gpu_memory_utilization=0.81,
    max_num_batched_tokens=16384,
    max_model_len=131072,
    kv_cache_dtype="fp8",
)

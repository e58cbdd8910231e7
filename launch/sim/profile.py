"""Simulation profiles: the simulated hardware and model as data (``launch/sim/profiles/*.json``).

Pipeline position: read once at simulator startup; every number the engine model (:mod:`launch.sim.model`)
uses comes from here, so a profile is the whole "what-if" surface. See ``docs/simulator.md`` for the
meaning of each field; the JSON files carry a ``_comment`` next to the non-obvious ones.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

PROFILE_DIR = Path(__file__).with_name("profiles")


class ProfileError(ValueError):
    """A profile is missing, unreadable or has a bad field (the simulator exits with code 2)."""


@dataclass(frozen=True)
class GpuSpec:
    """The GPUs of the simulated host."""

    name: str  # as NVML reports it
    count: int  # GPUs on the host
    total_gib: float  # memory per GPU, GiB
    compute_capability: str  # "major.minor"
    # The stated power model (simulated energy, GET /sim/energy): a GPU draws idle_w, plus
    # (tdp_w - idle_w) while its replica runs a step. H100 SXM: 700 W board power; idle is an estimate.
    idle_w: float = 70.0
    tdp_w: float = 700.0


@dataclass(frozen=True)
class ModelSpec:
    """The served model's size and KV footprint."""

    hf_id: str  # the checkpoint this profile describes
    num_layers: int  # transformer layers (per-step communication rounds)
    expert_weights_gib: float  # MoE expert weights, whole model: divided by EP size (or TP without EP)
    dense_weights_gib: float  # attention, dense layers, embeddings: divided by TP, replicated per replica
    kv_bytes_per_token: dict[str, float]  # KV bytes per token per GPU, by --kv-cache-dtype
    kv_replicated_across_tp: bool  # MLA: every TP rank holds the whole latent cache
    block_size: int  # tokens per KV block
    is_moe: bool  # MoE: DP replicas step in lockstep
    max_model_len: int  # the checkpoint's context length (the default of --max-model-len)


@dataclass(frozen=True)
class MemorySpec:
    """GPU memory outside the KV cache."""

    activation_gib_per_1k_batched_tokens: float  # peak of the profiling run, inside the budget
    cuda_context_gib: float  # CUDA context and allocator slack, outside the budget
    cuda_graphs_gib: float  # captured graphs, outside the budget (0 with --enforce-eager)
    ep_buffers_gib: float  # expert-parallel all-to-all buffers, outside the budget (with EP only)


@dataclass(frozen=True)
class TopologySpec:
    """Step-cost figures of one tensor-parallel width."""

    fixed_ms: float  # per-step cost independent of the batch (launches, sync, per-layer latency)
    speedup: float  # compute speed-up over one GPU (sub-linear)
    per_seq_ms: float  # communication/synchronisation cost per sequence in the step
    max_running_seqs: int | None  # calibrated cap on sequences running at once per replica (None = none)


@dataclass(frozen=True)
class CostSpec:
    """Per-token compute cost on one GPU (divided by the topology's speed-up)."""

    prefill_us_per_token: float  # prompt tokens
    decode_us_per_token: float  # decode and draft-verification tokens
    attention_ns_per_token_pair: float  # per (query token x attended context token)
    draft_ms_per_step: float  # the drafter's own pass, once per step with decodes (speculative only)
    eager_factor: float  # step-time multiplier with --enforce-eager (no CUDA graphs)
    max_prefill_chunk_tokens_per_step: int | None  # None = only max_num_batched_tokens limits prefill


@dataclass(frozen=True)
class LengthDist:
    """Lognormal length in tokens: median x exp(sigma x z), clipped to [min, max]."""

    median: float
    sigma: float
    min: int = 1
    max: int = 1_000_000


@dataclass(frozen=True)
class ReasoningSpec:
    """How long a request reasons before its visible answer, and how long that answer is."""

    max_reasoning_min_max_tokens: int  # max_tokens >= this and no ignore_eos: a "max reasoning" request
    prompt_salt: str  # mixed into the per-prompt draw (with the server seed and the prompt's text)
    normal: LengthDist  # hidden reasoning of ordinary requests
    max_reasoning: dict[str, LengthDist]  # hidden reasoning of max-reasoning requests, by draft method
    answer: LengthDist  # visible answer after the reasoning (ordinary and max reasoning)
    max_answer: LengthDist  # visible answer of max-reasoning requests


@dataclass(frozen=True)
class SpeculativeSpec:
    """Acceptance model of speculative decoding."""

    acceptance: dict[str, float]  # per-position acceptance probability, by draft_sample_method
    methods: list[str]  # speculative methods this model supports


@dataclass(frozen=True)
class Refusal:
    """A configuration the hardware or model refuses at startup, with vLLM's log lines."""

    when: dict[str, Any]  # flag -> value that triggers it (all must match)
    unless_min_compute_capability: str | None  # refused only below this compute capability
    log: list[str]  # the root-cause lines, as vLLM prints them


@dataclass(frozen=True)
class Profile:
    """One simulated host: GPUs, model, memory, costs, reasoning and refusals."""

    name: str
    description: str
    vllm_version: str
    gpu: GpuSpec
    model: ModelSpec
    memory: MemorySpec
    cost: CostSpec
    topology: dict[int, TopologySpec]
    speculative: SpeculativeSpec
    reasoning: ReasoningSpec
    default_max_num_seqs: int
    default_max_num_batched_tokens: int
    refusals: list[Refusal] = field(default_factory=list)

    def topo(self, tp: int) -> TopologySpec:
        try:
            return self.topology[tp]
        except KeyError:
            raise ProfileError(
                f"profile {self.name!r} has no step costs for --tensor-parallel-size {tp} "
                f"(it has {sorted(self.topology)})"
            ) from None


def _build(kind: type[Any], data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ProfileError(f"{where}: expected an object, got {type(data).__name__}")
    names = {f.name for f in fields(kind)}
    unknown = sorted(k for k in data if k not in names and not k.startswith("_"))
    if unknown:
        raise ProfileError(f"{where}: unknown field(s) {unknown}; allowed: {sorted(names)}")
    try:
        return kind(**{k: v for k, v in data.items() if k in names})
    except TypeError as exc:
        raise ProfileError(f"{where}: {exc}") from exc


def parse_profile(data: dict[str, Any], *, source: str = "<profile>") -> Profile:
    """Build a :class:`Profile` from its JSON object; every field is required unless it has a default."""
    try:
        reasoning = data["reasoning"]
        return Profile(
            name=data["name"],
            description=data.get("description", ""),
            vllm_version=data["vllm_version"],
            gpu=_build(GpuSpec, data["gpu"], f"{source}: gpu"),
            model=_build(ModelSpec, data["model"], f"{source}: model"),
            memory=_build(MemorySpec, data["memory"], f"{source}: memory"),
            cost=_build(CostSpec, data["cost"], f"{source}: cost"),
            topology={
                int(tp): _build(TopologySpec, spec, f"{source}: topology.{tp}")
                for tp, spec in data["topology"].items()
                if not tp.startswith("_")
            },
            speculative=_build(SpeculativeSpec, data["speculative"], f"{source}: speculative"),
            reasoning=ReasoningSpec(
                max_reasoning_min_max_tokens=int(reasoning["max_reasoning_min_max_tokens"]),
                prompt_salt=str(reasoning["prompt_salt"]),
                normal=_build(LengthDist, reasoning["normal"], f"{source}: reasoning.normal"),
                max_reasoning={
                    method: _build(LengthDist, dist, f"{source}: reasoning.max_reasoning.{method}")
                    for method, dist in reasoning["max_reasoning"].items()
                    if not method.startswith("_")
                },
                answer=_build(LengthDist, reasoning["answer"], f"{source}: reasoning.answer"),
                max_answer=_build(LengthDist, reasoning["max_answer"], f"{source}: reasoning.max_answer"),
            ),
            default_max_num_seqs=int(data["default_max_num_seqs"]),
            default_max_num_batched_tokens=int(data["default_max_num_batched_tokens"]),
            refusals=[
                _build(Refusal, item, f"{source}: refusals[{i}]") for i, item in enumerate(data["refusals"])
            ],
        )
    except KeyError as exc:
        raise ProfileError(f"{source}: missing field {exc}") from None


def available_profiles(directory: Path = PROFILE_DIR) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.json"))


def load_profile(name_or_path: str, directory: Path = PROFILE_DIR) -> Profile:
    """A shipped profile by name (``h100x8_deepseek_v4_flash``) or a JSON file by path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = directory / f"{name_or_path}.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ProfileError(
            f"no simulation profile {name_or_path!r} (shipped: {', '.join(available_profiles(directory))})"
        ) from None
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{path}: not valid JSON ({exc})") from None
    return parse_profile(data, source=str(path))

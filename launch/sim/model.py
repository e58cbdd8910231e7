"""The simulator's cost model (pure): startup checks, memory and KV capacity, step time, speculative
acceptance, reasoning lengths and the tokenizer.

Pipeline position: :mod:`launch.sim.engine` calls these functions for every scheduler step; the server
(:mod:`launch.sim.server`) calls :func:`check_startup` once before it binds its port. Nothing here touches
a clock, a socket or a process. The equations are documented in ``docs/simulator.md``.
"""

from __future__ import annotations

import hashlib
import math
import random
from bisect import bisect_right
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from launch.sim.pipeline import micro_batches, pipeline_hops_ms
from launch.sim.profile import LengthDist, Profile

GIB = float(1 << 30)

#: Tokens the chat template adds: BOS once, a role marker per message, and the generation prompt.
TEMPLATE_BOS_TOKENS = 1
TEMPLATE_TOKENS_PER_MESSAGE = 1
TEMPLATE_GENERATION_PROMPT_TOKENS = 2
#: A word longer than this many characters counts one token per started block of it.
CHARS_PER_LONG_WORD_TOKEN = 12


@dataclass(frozen=True)
class EngineConfig:
    """The vLLM settings the model reads (from the command line), plus the simulation-only ones."""

    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    #: --pipeline-parallel-size: each replica's TP x PP workers, one GPU each, the layers split over the
    #: PP stages (weights and KV cache per GPU / PP; the step time: launch.sim.pipeline).
    pipeline_parallel_size: int = 1
    enable_expert_parallel: bool = False
    enable_eplb: bool = False
    speculative_method: str | None = None
    num_speculative_tokens: int = 0
    draft_sample_method: str = "greedy"
    moe_backend: str = "auto"
    gpu_memory_utilization: float = 0.9
    max_num_batched_tokens: int | None = None  # None = the profile's default
    max_num_seqs: int | None = None  # None = the profile's default
    max_model_len: int = 131072
    kv_cache_dtype: str = "auto"
    enforce_eager: bool = False
    seed: int = 0
    speed: float = 1.0  # --sim-speed: host speed factor (0.8 = every step 1/0.8 longer)

    def flag_values(self) -> dict[str, Any]:
        """Flag name -> value, for matching a profile's refusals."""
        return {
            "tensor-parallel-size": self.tensor_parallel_size,
            "data-parallel-size": self.data_parallel_size,
            "enable-expert-parallel": self.enable_expert_parallel,
            "enable-eplb": self.enable_eplb,
            "speculative-method": self.speculative_method,
            "draft-sample-method": self.draft_sample_method,
            "moe-backend": self.moe_backend,
            "kv-cache-dtype": self.kv_cache_dtype,
            "enforce-eager": self.enforce_eager,
        }


class StartupError(Exception):
    """The simulated engine refuses to start; ``log`` holds vLLM's root-cause lines."""

    def __init__(self, kind: str, log: list[str]) -> None:
        super().__init__(log[-1] if log else kind)
        self.kind = kind
        self.log = log


@dataclass(frozen=True)
class MemoryPlan:
    """Per-GPU memory after warmup, and the KV capacity of one replica."""

    total_gib: float
    budget_gib: float  # total x gpu_memory_utilization
    weights_gib: float
    activation_gib: float
    kv_gib: float  # what is left of the budget for the KV cache
    outside_gib: float  # CUDA context, graphs, communication buffers: outside vLLM's budget
    used_gib: float
    free_gib: float
    kv_bytes_per_token: float  # per GPU
    block_size: int
    num_gpu_blocks: int  # per replica
    kv_tokens: int  # num_gpu_blocks x block_size


def _cc(value: str) -> tuple[int, ...]:
    return tuple(int(part) for part in value.split("."))


def _refusal_matches(when: dict[str, Any], flags: dict[str, Any]) -> bool:
    return all(flags.get(key) == value for key, value in when.items())


def plan_memory(profile: Profile, cfg: EngineConfig) -> MemoryPlan:
    """Weights, activations and KV per GPU; raises :class:`StartupError` with vLLM's messages."""
    tp, dp, pp = cfg.tensor_parallel_size, cfg.data_parallel_size, cfg.pipeline_parallel_size
    model, mem = profile.model, profile.memory
    total = profile.gpu.total_gib
    ep_size = tp * dp if cfg.enable_expert_parallel else tp
    weights = (model.expert_weights_gib / ep_size + model.dense_weights_gib / tp) / pp
    batched = cfg.max_num_batched_tokens or profile.default_max_num_batched_tokens
    activation = mem.activation_gib_per_1k_batched_tokens * batched / 1000.0
    budget = total * cfg.gpu_memory_utilization
    kv_gib = budget - weights - activation
    outside = mem.cuda_context_gib + (0.0 if cfg.enforce_eager else mem.cuda_graphs_gib)
    if cfg.enable_expert_parallel:
        outside += mem.ep_buffers_gib
    try:
        kv_bytes = model.kv_bytes_per_token[cfg.kv_cache_dtype]
    except KeyError:
        raise StartupError(
            "bad-args",
            [
                f"ValueError: Unsupported KV cache dtype {cfg.kv_cache_dtype!r} for this model "
                f"(supported: {sorted(model.kv_bytes_per_token)})"
            ],
        ) from None
    if not model.kv_replicated_across_tp:
        kv_bytes /= tp
    kv_bytes /= pp  # a GPU holds its stage's layers' KV cache
    if weights > budget:
        raise StartupError(
            "out-of-memory",
            [
                "torch.OutOfMemoryError: CUDA out of memory. "
                f"Tried to allocate {weights - budget + 1:.2f} GiB. GPU 0 has a total capacity of "
                f"{total:.2f} GiB of which {total - budget:.2f} GiB is free. "
                f"Loading the model weights needs {weights:.2f} GiB per GPU "
                f"(budget {budget:.2f} GiB at gpu_memory_utilization={cfg.gpu_memory_utilization})."
            ],
        )
    if kv_gib <= 0:
        raise StartupError(
            "out-of-memory",
            [
                "ValueError: No available memory for the cache blocks. Try increasing "
                "`gpu_memory_utilization` when initializing the engine."
            ],
        )
    block = model.block_size
    num_blocks = int(kv_gib * GIB / (kv_bytes * block))
    kv_tokens = num_blocks * block
    if kv_tokens < cfg.max_model_len:
        needed = cfg.max_model_len * kv_bytes / GIB
        raise StartupError(
            "out-of-memory",
            [
                f"ValueError: To serve at least one request with the models's max seq len "
                f"({cfg.max_model_len}), ({needed:.2f} GiB KV cache is needed, which is larger than the "
                f"available KV cache memory ({kv_gib:.2f} GiB). Based on the available memory, the "
                f"estimated maximum model length is {kv_tokens}. Try increasing `gpu_memory_utilization` "
                f"or decreasing `max_model_len` when initializing the engine."
            ],
        )
    free = total - budget - outside
    if free < 0:
        raise StartupError(
            "out-of-memory",
            [
                f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {outside:.2f} GiB. GPU 0 has "
                f"a total capacity of {total:.2f} GiB of which {total - budget:.2f} GiB is free. "
                f"Of the allocated memory {budget:.2f} GiB is reserved by vLLM's KV cache and weights "
                f"(gpu_memory_utilization={cfg.gpu_memory_utilization}); CUDA graphs and communication "
                f"buffers need {outside:.2f} GiB outside it."
            ],
        )
    return MemoryPlan(
        total_gib=total,
        budget_gib=budget,
        weights_gib=weights,
        activation_gib=activation,
        kv_gib=kv_gib,
        outside_gib=outside,
        used_gib=total - free,
        free_gib=free,
        kv_bytes_per_token=kv_bytes,
        block_size=block,
        num_gpu_blocks=num_blocks,
        kv_tokens=kv_tokens,
    )


def check_startup(profile: Profile, cfg: EngineConfig) -> MemoryPlan:
    """Everything vLLM checks before it serves: GPUs, refusals, speculative method, topology, memory."""
    pp = cfg.pipeline_parallel_size
    gpus = cfg.tensor_parallel_size * pp * cfg.data_parallel_size
    if cfg.tensor_parallel_size < 1 or cfg.data_parallel_size < 1 or pp < 1:
        raise StartupError(
            "bad-args", ["ValueError: tensor, pipeline and data parallel sizes must be at least 1"]
        )
    if gpus > profile.gpu.count:
        stages = f" x pipeline_parallel_size {pp}" if pp != 1 else ""
        raise StartupError(
            "init-failed",
            [
                f"ValueError: The number of required GPUs ({gpus} = tensor_parallel_size "
                f"{cfg.tensor_parallel_size}{stages} x data_parallel_size {cfg.data_parallel_size}) exceeds "
                f"the {profile.gpu.count} GPUs available on this host."
            ],
        )
    if not 0.0 < cfg.gpu_memory_utilization <= 1.0:
        raise StartupError(
            "bad-args",
            [f"ValueError: gpu_memory_utilization must be in (0, 1], got {cfg.gpu_memory_utilization}"],
        )
    flags = cfg.flag_values()
    for refusal in profile.refusals:
        if not _refusal_matches(refusal.when, flags):
            continue
        minimum = refusal.unless_min_compute_capability
        if minimum is not None and _cc(profile.gpu.compute_capability) >= _cc(minimum):
            continue
        raise StartupError("incompatible" if minimum else "init-failed", list(refusal.log))
    if cfg.speculative_method is not None:
        if cfg.speculative_method not in profile.speculative.methods:
            raise StartupError(
                "init-failed",
                [
                    f"ValueError: speculative method {cfg.speculative_method!r} is not supported for this "
                    f"model (supported: {profile.speculative.methods})"
                ],
            )
        if cfg.draft_sample_method not in profile.speculative.acceptance:
            raise StartupError(
                "bad-args",
                [
                    f"ValueError: draft_sample_method must be one of "
                    f"{sorted(profile.speculative.acceptance)}, got {cfg.draft_sample_method!r}"
                ],
            )
    try:
        profile.topo(cfg.tensor_parallel_size)
    except ValueError as exc:
        raise StartupError("init-failed", [f"ValueError: {exc}"]) from None
    return plan_memory(profile, cfg)


@dataclass(frozen=True)
class StepCost:
    """Step-time coefficients of one replica, in seconds (already divided by speed-up and host speed)."""

    fixed_s: float
    prefill_s_per_token: float
    decode_s_per_token: float
    attention_s_per_pair: float
    per_seq_s: float
    draft_s: float
    #: Pipeline stages (--pipeline-parallel-size): the work is spread over the micro-batches in flight.
    stages: int = 1

    def seconds(self, prefill: int, decode: int, pairs: float, seqs: int, decoding: bool) -> float:
        """Duration of one step: fixed + (prefill + decode + attention + per-sequence) / the micro-batches
        the pipeline runs at once (:func:`launch.sim.pipeline.micro_batches`) (+ drafter)."""
        work = (
            prefill * self.prefill_s_per_token
            + decode * self.decode_s_per_token
            + pairs * self.attention_s_per_pair
            + seqs * self.per_seq_s
        )
        return self.fixed_s + work / micro_batches(self.stages, seqs) + (self.draft_s if decoding else 0.0)


def step_cost(profile: Profile, cfg: EngineConfig) -> StepCost:
    """One replica's step coefficients: its TP width's topology, its layers split over the pipeline's
    stages (launch.sim.pipeline: the hops of a round, the micro-batches in flight)."""
    topo = profile.topo(cfg.tensor_parallel_size)
    hops_s = pipeline_hops_ms(cfg.pipeline_parallel_size) / 1e3
    cost = profile.cost
    slow = (cost.eager_factor if cfg.enforce_eager else 1.0) / cfg.speed
    return StepCost(
        fixed_s=topo.fixed_ms / 1e3 * slow + hops_s,  # the network's hops are not the host's speed
        prefill_s_per_token=cost.prefill_us_per_token / 1e6 / topo.speedup * slow,
        decode_s_per_token=cost.decode_us_per_token / 1e6 / topo.speedup * slow,
        attention_s_per_pair=cost.attention_ns_per_token_pair / 1e9 / topo.speedup * slow,
        per_seq_s=topo.per_seq_ms / 1e3 * slow,
        draft_s=(cost.draft_ms_per_step / 1e3 * slow) if cfg.speculative_method else 0.0,
        stages=cfg.pipeline_parallel_size,
    )


def acceptance_table(p: float, k: int) -> list[float]:
    """Cumulative P(accepted drafts <= j), j = 0..k: each draft accepted with p until the first rejection."""
    cumulative, total = [], 0.0
    for j in range(k + 1):
        total += (p**j) * (1.0 - p) if j < k else p**k
        cumulative.append(total)
    cumulative[-1] = 1.0
    return cumulative


def expected_tokens_per_step(p: float, k: int) -> float:
    """Mean tokens one decode step advances a sequence: (1 - p^(k+1)) / (1 - p)."""
    return float(k + 1) if p >= 1.0 else (1.0 - p ** (k + 1)) / (1.0 - p)


def sample_accepted(cumulative: list[float], rng: random.Random) -> int:
    return bisect_right(cumulative, rng.random())


# ---------------------------------------------------------------------------------------------- tokenizer


def count_text_tokens(text: str) -> int:
    """One token per whitespace-separated word; a word over 12 characters counts one per 12 started."""
    words = text.split()
    extra = 0
    for word in words:
        if len(word) > CHARS_PER_LONG_WORD_TOKEN:
            extra += (len(word) - 1) // CHARS_PER_LONG_WORD_TOKEN
    return len(words) + extra


def message_text(content: Any) -> str:
    """The text of a chat message's content (a string or OpenAI content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def count_chat_tokens(messages: list[dict[str, Any]], *, add_generation_prompt: bool = True) -> int:
    """Prompt tokens of a chat: BOS + per message (1 role marker + its words) + 2 (generation prompt)."""
    total = TEMPLATE_BOS_TOKENS
    for message in messages:
        total += TEMPLATE_TOKENS_PER_MESSAGE + count_text_tokens(message_text(message.get("content")))
    if add_generation_prompt:
        total += TEMPLATE_GENERATION_PROMPT_TOKENS
    return total


def token_ids(text: str) -> list[int]:
    """Deterministic ids for /tokenize (one per counted token; a cheap stand-in for a vocabulary)."""
    out: list[int] = []
    for word in text.split():
        base = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little") % 120_000
        n = 1 + (len(word) - 1) // CHARS_PER_LONG_WORD_TOKEN if len(word) > CHARS_PER_LONG_WORD_TOKEN else 1
        out.extend(base + i for i in range(n))
    return out


def chat_text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(f"{m.get('role', '')}: {message_text(m.get('content'))}" for m in messages)


# ---------------------------------------------------------------------------------------- output lengths


@dataclass(frozen=True)
class OutputPlan:
    """What one request will generate: ``target`` tokens, the first ``reasoning`` of them hidden."""

    target: int
    reasoning: int
    finish_reason: str  # "stop" or "length"
    max_reasoning: bool


def _draw(dist: LengthDist, z: float) -> int:
    value = dist.median * math.exp(dist.sigma * z)
    return int(min(max(round(value), dist.min), dist.max))


def request_rng(seed: int, digest: str, occurrence: int, request_seed: int | None) -> random.Random:
    """The request's own generator: same server seed, prompt and occurrence -> same draws."""
    key = f"{seed}:{digest}:{occurrence}:{request_seed}"
    return random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little"))


def plan_output(
    profile: Profile,
    cfg: EngineConfig,
    *,
    prompt_digest: str,
    max_tokens: int,
    min_tokens: int,
    ignore_eos: bool,
    rng: random.Random,
) -> OutputPlan:
    """Reasoning and answer lengths of one request (see docs/simulator.md, "Reasoning").

    A request is *max reasoning* when it may stop on its own (no ``ignore_eos``) and allows at least
    ``reasoning.max_reasoning_min_max_tokens`` tokens. Its reasoning length depends on the prompt and the
    server seed only (the same z for every draft method), so one prompt keeps its rank across candidates.
    """
    spec = profile.reasoning
    max_mode = (not ignore_eos) and max_tokens >= spec.max_reasoning_min_max_tokens
    key = f"{spec.prompt_salt}:{cfg.seed}:{prompt_digest}"
    prompt_rng = random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little"))
    z_reason = NormalDist().inv_cdf(min(max(prompt_rng.random(), 1e-9), 1 - 1e-9))
    z_answer = NormalDist().inv_cdf(min(max(prompt_rng.random(), 1e-9), 1 - 1e-9))
    if max_mode:
        dist = spec.max_reasoning.get(cfg.draft_sample_method) or spec.max_reasoning["greedy"]
        reasoning = _draw(dist, z_reason)
        answer = _draw(spec.max_answer, z_answer)
    else:
        # Ordinary requests vary per request too (sampling), not only per prompt.
        reasoning = _draw(spec.normal, rng.gauss(0.0, 1.0))
        answer = _draw(spec.answer, rng.gauss(0.0, 1.0))
    natural = reasoning + answer
    if ignore_eos:
        return OutputPlan(max_tokens, min(reasoning, max_tokens), "length", max_mode)
    target = max(natural, min_tokens)
    if target >= max_tokens:
        return OutputPlan(max_tokens, min(reasoning, max_tokens), "length", max_mode)
    return OutputPlan(target, reasoning, "stop", max_mode)


def prompt_digest(messages_text: str) -> str:
    return hashlib.sha256(messages_text.encode()).hexdigest()[:16]

"""The simulator's runs of the decision-quality benchmark: a candidate's engine configuration, a profile's
requests, and the pool of replays computed once per (engine, profile, index) by the simulator's engine
model in virtual time (:func:`launch.sim.replay.replay_closed_loop`), each with its own server seed and
prompts. The noise comes later (:mod:`benchmarks.decision.synthetic_sweep`).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks.decision.scenarios import ANSWER_PROFILE, SIM_PROFILE
from contracts.schema import CandidateConfig, GauntletConfig, LengthConfig, ServiceConfig, WorkloadConfig
from launch.sim.model import EngineConfig, StartupError, chat_text, check_startup
from launch.sim.profile import load_profile
from launch.sim.replay import ReplayRequest, ReplayResult, replay_closed_loop
from orchestrator.config.compose import load

ROOT = Path(__file__).resolve().parents[2]


def derived_seed(*parts: object) -> int:
    """A seed drawn from the parts' text (the same parts, the same seed, in every process)."""
    return int.from_bytes(hashlib.sha256(":".join(map(str, parts)).encode()).digest()[:4], "big")


def engine_config(service: ServiceConfig, cand: CandidateConfig, *, seed: int, speed: float) -> EngineConfig:
    spec = cand.speculative
    return EngineConfig(
        tensor_parallel_size=cand.tensor_parallel_size,
        data_parallel_size=cand.data_parallel_size,
        enable_expert_parallel=cand.enable_expert_parallel,
        enable_eplb=cand.enable_eplb,
        speculative_method=spec.method if spec else None,
        num_speculative_tokens=spec.num_speculative_tokens if spec else 0,
        draft_sample_method=spec.draft_sample_method if spec else "greedy",
        moe_backend=cand.moe_backend,
        gpu_memory_utilization=cand.gpu_memory_utilization,
        max_num_batched_tokens=cand.max_num_batched_tokens,
        max_num_seqs=cand.max_num_seqs,
        max_model_len=service.max_model_len,
        kv_cache_dtype=cand.kv_cache_dtype or service.kv_cache_dtype,
        seed=seed,
        speed=speed,
    )


def _lengths(dist: LengthConfig, n: int, rng: np.random.Generator) -> list[int]:
    if dist.kind == "fixed":
        return [dist.mean] * n
    if dist.kind == "uniform":
        return [int(v) for v in rng.integers(dist.min, dist.max + 1, n)]
    sigma = math.sqrt(math.log(1 + (dist.std / dist.mean) ** 2))
    mu = math.log(dist.mean) - sigma**2 / 2
    return [int(min(max(v, dist.min), dist.max or v)) for v in rng.lognormal(mu, sigma, n)]


def requests_for(
    wl: WorkloadConfig, scale: float, key: str, repeat: int
) -> tuple[list[ReplayRequest], list[ReplayRequest], int]:
    n = max(2, round(wl.num_requests * scale))
    concurrency = max(1, min(wl.concurrency, n)) if wl.concurrency > 1 else 1
    rng = np.random.default_rng(derived_seed(key, wl.seed))  # one workload per sweep, as the load runner
    total = n + wl.warmup_requests
    prompts = _lengths(wl.prompt_tokens, total, rng)
    outputs = _lengths(wl.output_tokens, total, rng)
    reqs = [
        ReplayRequest(
            prompt_tokens=prompts[i],
            max_tokens=outputs[i],
            min_tokens=outputs[i] if wl.ignore_eos else 0,
            ignore_eos=wl.ignore_eos,
            prompt_key=f"{key}:r{repeat}:{i}",  # a repeat re-sends prompts: fresh draws in the sim
        )
        for i in range(total)
    ]
    return reqs[wl.warmup_requests :], reqs[: wl.warmup_requests], concurrency


@dataclass
class ReplayPool:
    """Replays computed once per (engine, profile, index), each with its own server seed and prompts."""

    cfg: GauntletConfig
    scale: float
    seed: int
    size: int
    cache: dict[tuple[str, float, str, int], tuple[ReplayResult, list[ReplayRequest], int]] = field(
        default_factory=dict
    )
    candidates: dict[str, CandidateConfig] = field(default_factory=dict)
    started: dict[str, bool] = field(default_factory=dict)

    def candidate(self, name: str) -> CandidateConfig:
        if name not in self.candidates:
            composed = load([f"candidate={name}"])[0].candidate
            self.candidates[name] = self.cfg.baseline if name == "baseline" else composed
        return self.candidates[name]

    def starts(self, name: str) -> bool:
        if name not in self.started:
            try:
                check_startup(load_profile(SIM_PROFILE), self.engine(name, 1.0, 0))
                self.started[name] = True
            except StartupError:
                self.started[name] = False
        return self.started[name]

    def engine(self, name: str, speed: float, index: int) -> EngineConfig:
        return engine_config(
            self.cfg.service,
            self.candidate(name),
            seed=derived_seed(self.seed, name, speed, index),
            speed=speed,
        )

    def get(
        self, name: str, speed: float, profile: str, index: int
    ) -> tuple[ReplayResult, list[ReplayRequest], int]:
        key = (name, speed, profile, index)
        if key not in self.cache and profile == ANSWER_PROFILE:
            self.cache[key] = self._answers(name, speed)
        if key not in self.cache:
            wl = self.cfg.workloads[profile]
            reqs, warmup, concurrency = requests_for(wl, self.scale, f"{self.seed}:{profile}:{index}", index)
            sim = load_profile(SIM_PROFILE)
            result = replay_closed_loop(
                sim, self.engine(name, speed, index), reqs, concurrency, warmup=warmup
            )
            self.cache[key] = (result, reqs, concurrency)
        return self.cache[key]

    def _answers(self, name: str, speed: float) -> tuple[ReplayResult, list[ReplayRequest], int]:
        """The answer gate's fixed prompts, deterministic on the simulator (server seed 0): the same
        visible answers in every sweep, as on the demo."""
        wl = self.cfg.workloads[ANSWER_PROFILE]
        prompts = json.loads((ROOT / "conf" / "workload" / str(wl.prompts_file)).read_text())
        reqs = [
            ReplayRequest(
                wl.prompt_tokens.mean,
                wl.output_tokens.mean,
                0,
                False,
                chat_text([{"role": "user", "content": p}]),
            )
            for p in prompts
        ]
        engine = engine_config(self.cfg.service, self.candidate(name), seed=0, speed=speed)
        return (
            replay_closed_loop(load_profile(SIM_PROFILE), engine, reqs, wl.concurrency),
            reqs,
            wl.concurrency,
        )

"""The simulated engine: DP replicas doing continuous batching in virtual time (pure, no clock).

Pipeline position: the server's runtime (:mod:`launch.sim.runtime`) and the in-process replay
(:mod:`launch.sim.replay`) drive a :class:`Host` by calling :meth:`Host.advance` with a virtual time; the
host plans and completes scheduler steps up to that time and hands each step's tokens to the requests'
sinks. Same seed, same arrivals -> same steps, same chunks.

One step, per replica, follows vLLM V1's scheduler: running requests first (a decode schedules
1 + k speculative tokens, a prefill a chunk of what is left), preempting the newest running request
(recompute) when the KV cache has no free block; then waiting requests in arrival order while token
budget, ``max_num_seqs`` and free blocks allow. MoE replicas step in lockstep (EP all-to-all), so the
host's step lasts as long as its slowest replica's.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from launch.sim.model import (
    EngineConfig,
    MemoryPlan,
    OutputPlan,
    StepCost,
    acceptance_table,
    plan_output,
    request_rng,
    sample_accepted,
    step_cost,
)
from launch.sim.profile import Profile

#: vLLM's histogram buckets (seconds).
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
    960.0, 1920.0, 7680.0,
)  # fmt: skip

#: sink(virtual_time, reasoning_tokens, content_tokens, finish_reason or None)
Sink = Callable[[float, int, int, "str | None"], None]


def _ignore(_t: float, _r: int, _c: int, _f: str | None) -> None:
    return None


class SimRequest:
    """One request inside the engine."""

    __slots__ = (
        "arrival",
        "blocks",
        "computed",
        "engine",
        "finish_reason",
        "first_scheduled",
        "first_token_at",
        "generated",
        "max_reasoning",
        "prompt_tokens",
        "reasoning",
        "rid",
        "rng",
        "scheduled",
        "sink",
        "target",
    )

    def __init__(
        self,
        rid: str,
        prompt_tokens: int,
        plan: OutputPlan,
        *,
        arrival: float,
        rng: random.Random,
        sink: Sink,
    ) -> None:
        self.rid = rid
        self.prompt_tokens = prompt_tokens
        self.target = plan.target
        self.reasoning = plan.reasoning
        self.finish_reason = plan.finish_reason
        self.max_reasoning = plan.max_reasoning
        self.arrival = arrival
        self.rng = rng
        self.sink = sink
        self.computed = 0  # tokens whose KV is in the cache
        self.generated = 0  # output tokens sampled so far
        self.blocks = 0  # KV blocks held
        self.scheduled = 0  # tokens scheduled in the step in flight
        self.engine = -1
        self.first_scheduled: float | None = None
        self.first_token_at: float | None = None


@dataclass
class Histogram:
    """Cumulative-bucket histogram as Prometheus exposes it."""

    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * len(self.buckets)

    def observe(self, value: float) -> None:
        self.total += value
        self.n += 1
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
                break

    def cumulative(self) -> list[int]:
        out, running = [], 0
        for count in self.counts:
            running += count
            out.append(running)
        return out


@dataclass
class EngineStats:
    """Counters and histograms of one replica (exposed per ``engine`` label on /metrics)."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    preemptions: int = 0
    success: dict[str, int] = field(default_factory=lambda: {"stop": 0, "length": 0, "abort": 0})
    spec_drafts: int = 0
    spec_draft_tokens: int = 0
    spec_accepted: int = 0
    spec_accepted_per_pos: list[int] = field(default_factory=list)
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))
    queue: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))
    steps: int = 0


class Replica:
    """One DP replica's scheduler and KV cache."""

    def __init__(self, index: int, profile: Profile, cfg: EngineConfig, memory: MemoryPlan) -> None:
        self.index = index
        self.running: list[SimRequest] = []
        self.waiting: deque[SimRequest] = deque()
        self.total_blocks = memory.num_gpu_blocks
        self.free_blocks = memory.num_gpu_blocks
        self.block_size = memory.block_size
        self.budget = cfg.max_num_batched_tokens or profile.default_max_num_batched_tokens
        topo_cap = profile.topo(cfg.tensor_parallel_size).max_running_seqs
        seqs = cfg.max_num_seqs or profile.default_max_num_seqs
        self.max_seqs = min(seqs, topo_cap) if topo_cap else seqs
        self.max_model_len = cfg.max_model_len
        self.k = cfg.num_speculative_tokens if cfg.speculative_method else 0
        p = profile.speculative.acceptance.get(cfg.draft_sample_method, 0.0) if self.k else 0.0
        self.accept_cdf = acceptance_table(p, self.k) if self.k else [1.0]
        self.cost: StepCost = step_cost(profile, cfg)
        self.stats = EngineStats(spec_accepted_per_pos=[0] * self.k)
        self.last_end = 0.0
        self.busy_s = 0.0  # virtual seconds of completed steps (the power model's busy time)
        self._step_s = 0.0  # the duration of the step in flight

    @property
    def load_score(self) -> int:
        """vLLM's DP load balancing: waiting x 4 + running, lowest wins."""
        return len(self.waiting) * 4 + len(self.running)

    def kv_usage(self) -> float:
        return 1.0 - self.free_blocks / self.total_blocks if self.total_blocks else 0.0

    def _blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def _preempt(self, victim: SimRequest) -> None:
        self.running.remove(victim)
        self.free_blocks += victim.blocks
        victim.blocks = 0
        victim.computed = 0
        victim.scheduled = 0
        self.waiting.appendleft(victim)
        self.stats.preemptions += 1

    def schedule(self, now: float) -> float:
        """Pick this step's work (sets ``scheduled`` on requests); returns the step's duration (0 = idle)."""
        budget = self.budget
        prefill = decode = seqs = 0
        pairs = 0.0
        decoding = False
        k = self.k
        i = 0
        running = self.running
        while i < len(running) and budget > 0:
            req = running[i]
            need = req.prompt_tokens + req.generated - req.computed
            if req.generated and need == 1:
                n = 1 + min(k, req.target - req.generated - 1)
                n = min(n, budget)
                is_decode = True
            else:
                n = min(need, budget)
                is_decode = False
            extra = self._blocks_for(req.computed + n) - req.blocks
            preempted_self = False
            while extra > self.free_blocks:
                victim = running[-1]
                self._preempt(victim)
                if victim is req:
                    preempted_self = True
                    break
            if preempted_self:
                break
            self.free_blocks -= extra
            req.blocks += extra
            req.scheduled = n
            budget -= n
            seqs += 1
            pairs += n * (req.computed + n * 0.5)
            if is_decode:
                decode += n
                decoding = True
            else:
                prefill += n
            i += 1
        waiting = self.waiting
        while waiting and budget > 0 and len(running) < self.max_seqs:
            req = waiting[0]
            if req.arrival > now:
                break
            need = req.prompt_tokens + req.generated - req.computed
            n = min(need, budget)
            blocks = self._blocks_for(n)
            if blocks > self.free_blocks:
                break
            waiting.popleft()
            self.free_blocks -= blocks
            req.blocks = blocks
            req.scheduled = n
            if req.first_scheduled is None:
                req.first_scheduled = now
                self.stats.queue.observe(now - req.arrival)
            running.append(req)
            budget -= n
            seqs += 1
            prefill += n
            pairs += n * (req.computed + n * 0.5)
        if not seqs:
            return 0.0
        self.stats.steps += 1
        self._step_s = self.cost.seconds(prefill, decode, pairs, seqs, decoding)
        return self._step_s

    def complete(self, end: float) -> None:
        """Apply the step's results at virtual time ``end`` and hand the new tokens to the sinks."""
        self.busy_s += self._step_s
        self._step_s = 0.0
        stats = self.stats
        finished: list[SimRequest] = []
        cdf = self.accept_cdf
        for req in self.running:
            n = req.scheduled
            if not n:
                continue
            req.scheduled = 0
            before = req.generated
            if req.generated and req.prompt_tokens + req.generated - req.computed == 1:
                drafts = n - 1
                accepted = sample_accepted(cdf, req.rng) if drafts else 0
                accepted = min(accepted, drafts)
                if drafts:
                    stats.spec_drafts += 1
                    stats.spec_draft_tokens += drafts
                    stats.spec_accepted += accepted
                    per_pos = stats.spec_accepted_per_pos
                    for pos in range(accepted):
                        per_pos[pos] += 1
                req.computed += 1 + accepted
                req.generated += 1 + accepted
            else:
                req.computed += n
                if req.computed < req.prompt_tokens + req.generated:
                    continue  # prefill (or recompute) not finished yet: no token this step
                if req.first_token_at is None:
                    req.first_token_at = end
                    stats.prompt_tokens += req.prompt_tokens
                    stats.ttft.observe(end - req.arrival)
                req.generated += 1
            req.generated = min(req.generated, req.target)
            new = req.generated - before
            stats.generation_tokens += new
            reasoning_end = req.reasoning
            r = 0
            if before < reasoning_end:
                r = min(req.generated, reasoning_end) - before
            done = req.generated >= req.target
            if done:
                finished.append(req)
            req.sink(end, r, new - r, req.finish_reason if done else None)
        for req in finished:
            self.running.remove(req)
            self.free_blocks += req.blocks
            req.blocks = 0
            stats.success[req.finish_reason] = stats.success.get(req.finish_reason, 0) + 1
            stats.e2e.observe(end - req.arrival)

    def abort(self, req: SimRequest, now: float) -> bool:
        """Drop a request (client went away); True when it was still here."""
        if req in self.running:
            self.running.remove(req)
        elif req in self.waiting:
            self.waiting.remove(req)
        else:
            return False
        self.free_blocks += req.blocks
        req.blocks = 0
        req.scheduled = 0
        self.stats.success["abort"] = self.stats.success.get("abort", 0) + 1
        self.stats.e2e.observe(now - req.arrival)
        return True


class Host:
    """All DP replicas of one simulated server, stepping in virtual time."""

    def __init__(self, profile: Profile, cfg: EngineConfig, memory: MemoryPlan) -> None:
        self.profile = profile
        self.cfg = cfg
        self.memory = memory
        self.replicas = [Replica(i, profile, cfg, memory) for i in range(cfg.data_parallel_size)]
        self.lockstep = profile.model.is_moe and cfg.data_parallel_size > 1
        self.last_end = 0.0
        #: end time of the step in flight per replica (lockstep: all equal); None = idle
        self.in_flight: list[float | None] = [None] * len(self.replicas)
        self._rr = 0
        self._occurrences: dict[str, int] = {}

    def new_request(
        self,
        rid: str,
        *,
        prompt_tokens: int,
        digest: str,
        max_tokens: int,
        min_tokens: int = 0,
        ignore_eos: bool = False,
        request_seed: int | None = None,
        arrival: float,
        sink: Sink = _ignore,
        plan: OutputPlan | None = None,
    ) -> SimRequest:
        """Build a request with its output plan (``plan``: one already made, a labelled item's) and its own
        seeded generator (not yet queued)."""
        occurrence = self._occurrences.get(digest, 0)
        self._occurrences[digest] = occurrence + 1
        rng = request_rng(self.cfg.seed, digest, occurrence, request_seed)
        plan = plan or plan_output(
            self.profile,
            self.cfg,
            prompt_digest=digest,
            max_tokens=max_tokens,
            min_tokens=min_tokens,
            ignore_eos=ignore_eos,
            rng=rng,
        )
        return SimRequest(rid, prompt_tokens, plan, arrival=arrival, rng=rng, sink=sink)

    def add(self, req: SimRequest) -> None:
        """Queue a request on the least loaded replica (ties go round-robin)."""
        n = len(self.replicas)
        best, best_score = 0, None
        for j in range(n):
            idx = (self._rr + j) % n
            score = self.replicas[idx].load_score
            if best_score is None or score < best_score:
                best, best_score = idx, score
        self._rr = (best + 1) % n
        req.engine = best
        self.replicas[best].waiting.append(req)

    def abort(self, req: SimRequest, now: float) -> bool:
        if req.engine < 0:
            return False
        return self.replicas[req.engine].abort(req, now)

    def _has_work(self, replica: Replica, now: float) -> float | None:
        """Earliest time this replica can start a step, or None when it has nothing to do."""
        if replica.running:
            return 0.0
        if replica.waiting:
            return replica.waiting[0].arrival
        return None

    def next_end(self) -> float | None:
        ends = [e for e in self.in_flight if e is not None]
        return min(ends) if ends else None

    def next_start(self) -> float | None:
        """When the next step can start if none is in flight (None = nothing to do)."""
        starts = [s for s in (self._has_work(r, 0.0) for r in self.replicas) if s is not None]
        if not starts:
            return None
        return max(self.last_end, min(starts))

    def advance(self, now: float) -> None:
        """Plan and complete every step that starts and ends by virtual time ``now``."""
        if self.lockstep:
            self._advance_lockstep(now)
        else:
            for i in range(len(self.replicas)):
                self._advance_one(i, now)

    def _advance_lockstep(self, now: float) -> None:
        while True:
            end = self.in_flight[0]
            if end is None:
                start = self.next_start()
                if start is None or start > now:
                    return
                duration = max(r.schedule(start) for r in self.replicas)
                if duration <= 0.0:
                    return
                end = start + duration
                self.in_flight = [end] * len(self.replicas)
            if end > now:
                return
            for replica in self.replicas:
                replica.complete(end)
            self.last_end = end
            self.in_flight = [None] * len(self.replicas)

    def _advance_one(self, i: int, now: float) -> None:
        replica = self.replicas[i]
        while True:
            end = self.in_flight[i]
            if end is None:
                earliest = self._has_work(replica, now)
                if earliest is None:
                    return
                start = max(replica.last_end, earliest)
                if start > now:
                    return
                duration = replica.schedule(start)
                if duration <= 0.0:
                    return
                end = start + duration
                self.in_flight[i] = end
            if end > now:
                return
            replica.complete(end)
            replica.last_end = end
            self.in_flight[i] = None

    def energy_mj(self, now: float) -> list[int]:
        """Each GPU's simulated energy counter (mJ) at virtual time ``now``, by the profile's stated power
        model: ``idle_w`` all along plus ``tdp_w - idle_w`` for its replica's busy seconds (its completed
        steps); the host's GPUs no replica uses stay idle."""
        gpu = self.profile.gpu
        workers = self.cfg.tensor_parallel_size * self.cfg.pipeline_parallel_size  # a replica's GPUs
        busy = [r.busy_s for r in self.replicas for _ in range(workers)]
        busy += [0.0] * max(0, gpu.count - len(busy))
        return [round((gpu.idle_w * now + (gpu.tdp_w - gpu.idle_w) * b) * 1000) for b in busy]

    @property
    def idle(self) -> bool:
        return all(e is None for e in self.in_flight) and not any(
            r.running or r.waiting for r in self.replicas
        )

"""Decision quality of the gates, measured on the simulator under messy noise: how often does each kind
of candidate get the verdict it deserves, and how much measurement do adaptive repeats save?

Scenarios (candidate against the baseline, same engine, ``sim-speed`` scales every step):

- ``identical`` (``sim-speed 1.0``): kept at most 2.5% AND rejected at most 5%;
- ``regression_10`` / ``regression_20`` (0.9 / 0.8): rejected at least 85% (log-normal and Student-t
  noise) / 90% (every noise model);
- ``gain_10`` / ``gain_15`` (1/0.9 / 1/0.85: TTFT 10% / 15% lower, no regression): kept (reported) /
  kept at least 85%;
- non-uniform effects on the candidate's runs (issue 21): ``loaded_ttft_30`` (only loaded TTFT 30%
  worse) and ``high_concurrency_20`` (only decode_heavy, the highest concurrency, 20% slower): rejected
  at least 90% and kept at most 2.5%, as a uniform 20% regression and the identical candidate;
  ``serial_gain_loaded_loss`` (serial 15% faster, loaded TTFT 30% worse): kept at most 2.5% ("never"
  cannot be shown by sampling: the identical candidate's bar);

each under every noise model of :mod:`benchmarks.noise_models` (log-normal, Student-t, outlier run,
drift, per-request tails), over ``--seeds`` seeds (40 by default), with the Wilson interval of each rate.
A bar is judged on that interval, not on the count (:func:`benchmarks.noise_models.judge_rate`): PASS
when the interval lies wholly on the allowed side, FAIL when wholly beyond, UNDECIDED when it straddles
the bar (the table says how many seeds would decide it at the observed rate). Exit status: 0 when every
bar passes (and the demo mix meets its own), 1 when one fails, 2 when none fails but one is undecided.
Then the demo's candidate mix (``spec_probabilistic``, ``tp4_dp2``: their own engine configurations;
``eplb`` and ``mega_moe`` do not start and cost no measurement in either mode) is measured with fixed
repeats and with adaptive repeats (:mod:`gates.sequential`) on the same noise draws: the measurement time
(simulated seconds of the candidates' runs) and the verdicts of both.

Each sweep is a complete sweep directory (baseline, candidate, recovery: the layout of
:mod:`contracts.results`) judged by :func:`gates.evaluate_sweep`, as a sweep does. Runs come from the
simulator's engine model driven in-process in virtual time (:func:`launch.sim.replay.replay_closed_loop`).
Replays are drawn from a pool (``--pool`` distinct replays per engine configuration and profile, each
with its own server seed and prompts, computed once) so that thousands of sweeps stay affordable; a
sweep never uses one replay twice, and the noise model's draws are fresh for every run of every sweep.
The replay's own sampling noise is therefore shared between seeds; the run-level noise, which dominates,
is not (docs/gates.md says what that leaves out).

    .venv/bin/python benchmarks/decision_quality.py                     # 40 seeds, every model (~15 min)
    .venv/bin/python benchmarks/decision_quality.py --seeds 10 --model lognormal --scenario identical
    .venv/bin/python benchmarks/decision_quality.py --fixed             # every candidate: run.repeats
    .venv/bin/python benchmarks/decision_quality.py --mode fixed --mode adaptive   # both, one table
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.noise_models import (  # noqa: E402
    NOISE_MODELS,
    OUTLIER_SIDES,
    NoiseModel,
    RateBar,
    judge_rate,
    seeds_to_decide,
    wilson_interval,
)
from contracts.layout import block_root, candidate_root  # noqa: E402
from contracts.metrics import censored_median, stats  # noqa: E402
from contracts.results import (  # noqa: E402
    CandidateRun,
    ClientHealth,
    HostProbe,
    ProfileSummary,
    RequestRecord,
    ServerMetrics,
    StartupRecord,
    write_jsonl,
    write_model,
)
from contracts.schema import (  # noqa: E402
    CandidateConfig,
    GatesConfig,
    GauntletConfig,
    LengthConfig,
    ServiceConfig,
    WorkloadConfig,
)
from contracts.sweepdir import load_results  # noqa: E402
from gates import evaluate_sweep  # noqa: E402
from gates.confirm import to_confirm  # noqa: E402
from gates.sequential import SequentialPlan, loop_decision  # noqa: E402
from launch.sim.model import EngineConfig, StartupError, chat_text, check_startup  # noqa: E402
from launch.sim.profile import load_profile  # noqa: E402
from launch.sim.replay import ReplayRequest, ReplayResult, replay_closed_loop  # noqa: E402
from orchestrator.config.compose import load  # noqa: E402

#: Closed-loop profiles of the case study the in-process replay can drive (mixed is open-loop; the answer
#: gate's reasoning lengths are redrawn with every seed, see docs/gates.md).
PROFILES = ("serial", "short", "prefill_10k", "decode_heavy")
#: The demo mix also runs the answer gate (one repeat per side, as the demo: its prompts are deterministic).
ANSWER_PROFILE = "answer_gate"
SIM_PROFILE = "h100x8_deepseek_v4_flash"


@dataclass(frozen=True)
class Scenario:
    """A candidate and the verdict it deserves; ``required`` = least (or most) count per 20 sweeps."""

    name: str
    speed: float  # --sim-speed of the candidate (the baseline's engine otherwise)
    expected: str  # the verdict it deserves
    #: noise model ("*" = every) -> the least share of sweeps with the expected verdict
    required: dict[str, float] = field(default_factory=dict)
    #: decision -> noise model -> the largest share of sweeps with that verdict
    at_most: dict[str, dict[str, float]] = field(default_factory=dict)
    #: profile -> (clock factor, TTFT-only factor) on the candidate's runs: effects that do not move
    #: every profile together
    effects: dict[str, tuple[float, float]] = field(default_factory=dict)


ALL = "*"
LOADED_TTFT_30 = {p: (1.0, 1.3) for p in ("short", "prefill_10k", "decode_heavy")}
#: Issue 21's acceptance as shares of the sweeps: identical rejected <= 5% (2/40) and kept <= 2.5%
#: (1/40), 20% regression rejected >= 90% (36/40), 15% gain kept >= 85% (34/40); a serial gain with a
#: loaded loss never kept, judged as kept <= 2.5% (no number of seeds shows "never"). The non-uniform
#: regressions (30% loaded TTFT, 20% at the highest concurrency: several times the 5% tolerances) are held
#: to the uniform 20% regression's bar, and kept no more often than the identical candidate.
NEVER_KEPT = {"keep": {ALL: 0.025}}
SCENARIOS = (
    Scenario("identical", 1.0, "neutral", at_most={"keep": {ALL: 0.025}, "reject": {ALL: 0.05}}),
    Scenario("regression_10", 0.9, "reject", required={"lognormal": 0.85, "student_t": 0.85}),
    Scenario("regression_20", 0.8, "reject", required={ALL: 0.9}),
    Scenario("gain_10", 1 / 0.9, "keep"),
    Scenario("gain_15", 1 / 0.85, "keep", required={ALL: 0.85}),
    Scenario(
        "loaded_ttft_30", 1.0, "reject", required={ALL: 0.9}, at_most=NEVER_KEPT, effects=LOADED_TTFT_30
    ),
    Scenario(
        "high_concurrency_20",
        1.0,
        "reject",
        required={ALL: 0.9},
        at_most=NEVER_KEPT,
        effects={"decode_heavy": (1.25, 1.0)},
    ),
    Scenario(
        "serial_gain_loaded_loss",
        1.0,
        "reject",
        at_most=NEVER_KEPT,
        effects={"serial": (0.85, 1.0), **LOADED_TTFT_30},
    ),
)
#: The demo's measured candidates (eplb and mega_moe fail to start: no measurement in either mode).
DEMO_MIX = ("spec_probabilistic", "tp4_dp2", "eplb", "mega_moe")


def _seed(*parts: object) -> int:
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
    rng = np.random.default_rng(_seed(key, wl.seed))  # one workload per sweep, as the load runner
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


def write_profile(
    directory: Path,
    result: ReplayResult,
    reqs: Sequence[ReplayRequest],
    *,
    candidate: str,
    profile: str,
    repeat: int,
    clock: float = 1.0,
    request_factors: Sequence[float] | None = None,
    concurrency: int = 1,
    ttft_factor: float = 1.0,
    lag_p99: float = 0.0,
) -> float:
    """Write the run's records and summary; returns the run's duration (simulated seconds).

    ``clock`` scales every timestamp of the run (run-level noise); ``request_factors`` (by record
    order) scale one request's latencies on top (per-request tails: in a closed loop of ``concurrency``
    slots the run lasts the added request-seconds / ``concurrency`` longer). ``ttft_factor`` scales the
    first token and the first visible answer only (a prefill wave later; the end stays, at least the
    first token); ``lag_p99`` is the client's p99 dispatch lag the summary records.
    """
    records = []
    extra = 0.0  # request-seconds added by per-request slowdowns
    for pos, rec in enumerate(sorted(result.records, key=lambda r: r.index)):
        spec = reqs[rec.index]
        f = clock * (request_factors[pos] if request_factors else 1.0)

        def at(t: float | None, f: float = f) -> float | None:
            return None if t is None else t * f

        last = rec.chunks[-1][0] if rec.chunks else None
        end = at(rec.end if rec.end is not None else last)
        first = at(rec.ttft)
        shown = at(rec.first_visible)
        if ttft_factor != 1.0:
            first = None if first is None else first * ttft_factor
            shown = None if shown is None else shown * ttft_factor
            end = None if end is None else max(end, first or 0.0, shown or 0.0)
        extra += (end or 0.0) - (end or 0.0) * clock / f
        records.append(
            RequestRecord(
                index=rec.index,
                warmup=False,
                target_prompt_tokens=spec.prompt_tokens,
                target_output_tokens=spec.max_tokens,
                scheduled_s=rec.sent * clock,
                sent_s=rec.sent * clock,
                ttft_s=first,
                first_visible_s=shown,
                end_s=end,
                prompt_tokens=spec.prompt_tokens,
                completion_tokens=rec.completion_tokens,
                finish_reason=rec.finish_reason,
                http_status=200,
            )
        )
    write_jsonl(directory / "records.jsonl", records)
    duration = result.duration * clock + extra / concurrency
    prompt_total = sum(r.prompt_tokens or 0 for r in records)
    output_total = sum(r.completion_tokens or 0 for r in records)
    visible = [r.first_visible_s for r in records]
    summary = ProfileSummary(
        candidate=candidate,
        profile=profile,
        repeat=repeat,
        fingerprint="sha256:" + "0" * 64,
        backend="sim",
        host="sim (in-process replay)",
        time_scale=1.0,
        started_at="1970-01-01T00:00:00Z",
        duration_s=duration,
        num_requests=len(records),
        completed=sum(r.ok for r in records),
        failed=sum(not r.ok for r in records),
        errors={},
        prompt_tokens=prompt_total,
        output_tokens=output_total,
        prompt_tps=prompt_total / duration,
        output_tps=output_total / duration,
        ttft=stats([r.ttft_s for r in records if r.ttft_s is not None]),
        first_visible=stats([v for v in visible if v is not None]),
        first_visible_censored=censored_median(visible),
        itl=stats([]),
        e2e=stats([r.end_s for r in records if r.end_s is not None]),
        client=ClientHealth(
            dispatch_lag_p50_s=lag_p99 / 2,
            dispatch_lag_p99_s=lag_p99,
            dispatch_lag_max_s=lag_p99,
            chunks_per_read_p99=1.0,
            client_cpu_percent=0.0,
            saturated=False,
            notes=["in-process replay: no client" + (" (lag drawn by the noise model)" if lag_p99 else "")],
        ),
        server=ServerMetrics(
            scrapes=0,
            preemptions=float(result.preemptions),
            prompt_tokens=float(prompt_total),
            generation_tokens=float(output_total),
            request_success={},
            peak_waiting=0.0,
            peak_running=0.0,
            peak_kv_cache_usage=0.0,
            waiting_at_end=0.0,
            running_at_end=0.0,
            restart_detected=False,
            token_mismatch=False,
        ),
    )
    write_model(directory / "summary.json", summary)
    return duration


# ------------------------------------------------------------------------------------------ replay pool


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
            self.cfg.service, self.candidate(name), seed=_seed(self.seed, name, speed, index), speed=speed
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


# ------------------------------------------------------------------------------------------ one sweep


@dataclass(frozen=True)
class Run:
    """One run of the sweep's measuring order."""

    side: str  # "baseline", "candidate", "block" (the baseline again after the candidate) or "recovery"
    profile: str
    repeat: int  # from 0


@dataclass
class SweepRunner:
    """Writes one benchmark sweep run by run in measuring order, with the noise model's draws."""

    pool: ReplayPool
    model: NoiseModel
    sweep: Path
    key: str  # seed of the noise draws (the same in fixed and adaptive mode: paired)
    planned: int  # runs in the longest plan (for the drift position)
    picks: dict[tuple[str, float, str], list[int]] = field(default_factory=dict)
    rounds: dict[tuple[str, float, str], int] = field(default_factory=dict)
    position: int = 0
    outliers: dict[str, int | None] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    time_s: dict[str, float] = field(default_factory=dict)
    effects: dict[str, tuple[float, float]] = field(default_factory=dict)  # the candidate's runs only
    drift_log: float = 0.0  # the AR(1) drift's state along the measuring order
    #: per (group, profile): which runs the model made an outlier (group: baseline, candidate, later)
    slow: dict[tuple[str, str], list[bool]] = field(default_factory=dict)

    def masked(self) -> tuple[str, ...]:
        """The groups and profiles most of whose runs the model made outliers (3x slower): no rule can
        tell those runs from a real 3x change of that profile (one slow run in three can be set aside;
        two cannot). ``candidate``: consistent with a regression; ``later`` (block and recovery): with a
        drift; ``baseline``: with a candidate 3x better."""
        return tuple(
            f"{group} {profile} {sum(flags)}/{len(flags)}"
            for (group, profile), flags in sorted(self.slow.items())
            if 2 * sum(flags) > len(flags)
        )

    def pick(self, engine: tuple[str, float], profile: str) -> int:
        """A pool index not used by this sweep for this engine and profile yet (once the pool is used up,
        by confirmation runs at 5 repeats per side, a new permutation of it: replays come round again)."""
        key = (engine[0], engine[1], profile)
        if not self.picks.get(key):
            rounds = self.rounds[key] = self.rounds.get(key, -1) + 1
            tag = ("picks",) if rounds == 0 else ("picks", rounds)
            order = np.random.default_rng(_seed(self.key, *key, *tag)).permutation(self.pool.size)
            self.picks[key] = [int(i) for i in order]
        return self.picks[key].pop()

    def outlier(self, side: str, runs: int) -> int | None:
        if side not in OUTLIER_SIDES:
            return None
        if side not in self.outliers:
            rng = np.random.default_rng(_seed(self.key, self.model.name, side, "outlier"))
            self.outliers[side] = self.model.outlier_run(rng, runs)
        return self.outliers[side]

    def run(self, run: Run, engine: tuple[str, float], *, side_runs: int) -> None:
        result, reqs, concurrency = self.pool.get(*engine, run.profile, self.pick(engine, run.profile))
        rng = np.random.default_rng(_seed(self.key, self.model.name, run.side, run.profile, run.repeat))
        nth = self.counts[run.side]
        side_outlier = self.outlier(run.side, side_runs) == nth
        clock = self.model.run_factor(
            rng, position=self.position / max(self.planned - 1, 1), outlier=side_outlier
        )
        factors = self.model.request_factors(rng, len(result.records)) if self.model.tail_rate else None
        # The measured models' draws come after the older models' (their numbers stay reproducible).
        self.drift_log = self.model.ar_step(rng, self.drift_log)
        run_outlier = self.model.run_outlier(rng)
        clock *= math.exp(self.drift_log) * (self.model.outlier_factor if run_outlier else 1.0)
        if run.profile in PROFILES:
            group = "later" if run.side in ("block", "recovery") else run.side
            self.slow.setdefault((group, run.profile), []).append(side_outlier or run_outlier)
        loaded = run.profile in PROFILES and run.profile != "serial"
        ttft = self.model.ttft_factor(rng, loaded=loaded, profile=run.profile)
        lag = self.model.lag_p99(rng, loaded=loaded, profile=run.profile)
        if run.side == "candidate":
            effect_clock, effect_ttft = self.effects.get(run.profile, (1.0, 1.0))
            clock, ttft = clock * effect_clock, ttft * effect_ttft
        root = _root(run.side)
        self.time_s[run.side] = self.time_s.get(run.side, 0.0) + write_profile(
            self.sweep / root / run.profile / f"r{run.repeat}",
            result,
            reqs,
            candidate="baseline" if run.side != "candidate" else "candidate",
            profile=run.profile,
            repeat=run.repeat,
            clock=clock,
            request_factors=factors,
            concurrency=concurrency,
            ttft_factor=ttft,
            lag_p99=lag,
        )
        self.counts[run.side] += 1
        self.position += 1


def _root(side: str) -> str:
    """Where a side's runs go in the sweep directory (contracts.sweepdir's layout)."""
    if side == "recovery":
        return "recovery"
    if side == "block":
        return block_root(candidate_root("baseline"), "candidate")
    return candidate_root(side)


def write_run_json(sweep: Path, side: str, profiles: Sequence[str], *, started: bool = True) -> None:
    root = _root(side)
    write_model(
        sweep / root / "run.json",
        CandidateRun(
            candidate="baseline" if side != "candidate" else "candidate",
            fingerprint="sha256:" + "0" * 64,
            backend="sim",
            host="sim (in-process replay)",
            is_baseline=side != "candidate",
            phase="baseline" if side == "block" else side,  # type: ignore[arg-type]
            startup=StartupRecord(ok=started, time_to_ready_s=0.0 if started else None),
            probe=HostProbe(driver=False, reason="simulated host", simulated=True),
            profiles=list(profiles),
            follows="candidate" if side == "block" else None,
        ),
    )


@dataclass(frozen=True)
class Outcome:
    decision: str
    reason: str
    repeats: int  # candidate repeats measured
    time_s: float  # simulated seconds of the candidate's runs
    masked: tuple[str, ...] = ()  # SweepRunner.masked: profiles most of whose runs were outliers


def judge_sweep_once(
    pool: ReplayPool,
    model: NoiseModel,
    engine: tuple[str, float],
    sweep: Path,
    *,
    key: str,
    baseline_repeats: int,
    plan: SequentialPlan,
    gates: GatesConfig,
    recovery_profiles: Sequence[str],
    interleave_repeats: int = 0,
    answers: bool = False,
    effects: dict[str, tuple[float, float]] | None = None,
    confirm_runs: int = 0,
) -> Outcome:
    """Measure baseline, then the candidate repeat by repeat (looks per ``plan``), then (``interleave``)
    the baseline block after it, then recovery; judge. ``answers``: both sides also run the answer gate
    once (in their first repeat). ``confirm_runs``: after a side's fixed repeats, the profiles whose runs
    disagree get up to that many more runs (:mod:`gates.confirm`, as the sweep does)."""
    shutil.rmtree(sweep, ignore_errors=True)
    blocks = len(recovery_profiles) * interleave_repeats
    planned = (baseline_repeats + plan.max_repeats) * len(PROFILES) + blocks + len(recovery_profiles)
    runner = SweepRunner(pool, model, sweep, key, planned, effects=dict(effects or {}))
    base = ("baseline", 1.0)
    written: list[str] = []
    for k in range(baseline_repeats):
        for profile in PROFILES:
            runner.run(Run("baseline", profile, k), base, side_runs=baseline_repeats * len(PROFILES))
            written.append(f"{profile}/r{k}")
        if answers and k == 0:
            runner.run(Run("baseline", ANSWER_PROFILE, 0), base, side_runs=baseline_repeats * len(PROFILES))
            written.append(f"{ANSWER_PROFILE}/r0")
    write_run_json(sweep, "baseline", written)
    if confirm_runs:
        written += confirm(runner, "baseline", base, baseline_repeats, confirm_runs)
        write_run_json(sweep, "baseline", written)
    if not pool.starts(engine[0]):
        write_run_json(sweep, "candidate", [], started=False)
        verdict = evaluate_sweep(sweep, gates, baseline="baseline")
        return Outcome(verdict.verdicts[0].decision, verdict.verdicts[0].reason, 0, 0.0)
    decision: str | None = None
    repeats = 0
    cand: list[str] = []
    more = True
    while more and plan.next_repeat(repeats, decision):  # type: ignore[arg-type]
        for profile in PROFILES:
            runner.run(Run("candidate", profile, repeats), engine, side_runs=plan.max_repeats * len(PROFILES))
            cand.append(f"{profile}/r{repeats}")
        if answers and repeats == 0:
            runner.run(
                Run("candidate", ANSWER_PROFILE, 0), engine, side_runs=plan.max_repeats * len(PROFILES)
            )
            cand.append(f"{ANSWER_PROFILE}/r0")
        repeats += 1
        write_run_json(sweep, "candidate", cand)
        if repeats >= plan.min_repeats and plan.adaptive:
            look = evaluate_sweep(sweep, gates, baseline="baseline", plan=plan)
            decision, more = loop_decision(look.verdicts[0], plan.max_repeats - repeats)
    if confirm_runs and repeats >= plan.max_repeats:  # fixed, or an adaptive loop run to its last look
        cand += confirm(runner, "candidate", engine, repeats, confirm_runs)
        write_run_json(sweep, "candidate", cand)
    block: list[str] = []
    for k in range(1, interleave_repeats + 1):
        for profile in recovery_profiles:
            runner.run(Run("block", profile, k), base, side_runs=blocks)
            block.append(f"{profile}/r{k}")
    if block:
        write_run_json(sweep, "block", block)
    for profile in recovery_profiles:
        runner.run(Run("recovery", profile, 0), base, side_runs=len(recovery_profiles))
    write_run_json(sweep, "recovery", [f"{p}/r0" for p in recovery_profiles])
    verdict = evaluate_sweep(sweep, gates, baseline="baseline", plan=plan)
    only = verdict.verdicts[0]
    return Outcome(only.decision, only.reason, repeats, runner.time_s.get("candidate", 0.0), runner.masked())


def confirm(runner: SweepRunner, side: str, engine: tuple[str, float], repeats: int, extra: int) -> list[str]:
    """The sweep's confirmation runs of one side (:func:`gates.confirm.to_confirm`): one more run of each
    profile whose runs disagree, again until none does or ``extra`` more ran; the runs written."""
    written: list[str] = []
    name = "baseline" if side != "candidate" else "candidate"
    while todo := to_confirm(
        load_results(runner.sweep, _root(side), name), PROFILES, repeats=repeats, extra=extra
    ):
        for found in todo:
            runner.run(Run(side, found.profile, found.next_repeat), engine, side_runs=repeats * len(PROFILES))
            written.append(f"{found.profile}/r{found.next_repeat}")
    return written


# --------------------------------------------------------------------------------------------- driver


@dataclass(frozen=True)
class Task:
    """Every sweep of one seed under one noise model (a unit of parallel work)."""

    model: str
    seed: int
    scenarios: tuple[str, ...]
    mix: bool
    fixed: bool
    args: tuple[int, float, int, int, int, int, int]  # base seed, scale, pool, repeats, min, max, resamples
    #: ``--client-lag-ms``: the loaded runs' p99 dispatch lag range (s) of the models that draw one
    client_lag_s: tuple[float, float] | None = None
    confirm_runs: int | None = None  # ``--confirm-runs``; None: the config's run.confirm_runs


_POOLS: dict[tuple[float, int, int], ReplayPool] = {}


def _pool(scale: float, seed: int, size: int) -> ReplayPool:
    key = (scale, seed, size)
    if key not in _POOLS:
        _POOLS[key] = ReplayPool(load([])[0], scale, seed, size)
    return _POOLS[key]


def run_task(task: Task) -> list[tuple[str, str, str, Outcome]]:
    """(group, candidate, mode, outcome) for every sweep of the task."""
    base_seed, scale, size, repeats, min_r, max_r, resamples = task.args
    pool = _pool(scale, base_seed, size)
    cfg = pool.cfg
    gates = replace(
        cfg.gates,
        loaded_profiles=[p for p in cfg.gates.loaded_profiles if p in PROFILES],
        bootstrap_resamples=resamples,
    )
    model = NOISE_MODELS[task.model]
    if task.client_lag_s is not None and model.lag_p99_s[1] > 0:
        model = replace(model, lag_p99_s=task.client_lag_s, lag_by_profile=())
    fixed = SequentialPlan(repeats, repeats)
    adaptive = SequentialPlan(min_r, max_r)
    out: list[tuple[str, str, str, Outcome]] = []
    with tempfile.TemporaryDirectory(prefix="gauntlet-dq-") as tmp:
        common = {
            "baseline_repeats": repeats,
            "gates": gates,
            "recovery_profiles": cfg.run.recovery_profiles,
            "interleave_repeats": cfg.run.interleave_repeats if cfg.run.interleave else 0,
            "confirm_runs": cfg.run.confirm_runs if task.confirm_runs is None else task.confirm_runs,
        }
        for name in task.scenarios:
            scenario = next(s for s in SCENARIOS if s.name == name)
            plan = fixed if task.fixed else adaptive
            key = f"{base_seed}:{task.seed}:{name}"
            outcome = judge_sweep_once(
                pool,
                model,
                ("baseline", scenario.speed),
                Path(tmp) / "s",
                key=key,
                plan=plan,
                effects=scenario.effects,
                **common,  # type: ignore[arg-type]
            )
            out.append(("scenario", name, "fixed" if task.fixed else "adaptive", outcome))
        if task.mix:
            for name in DEMO_MIX:
                key = f"{base_seed}:{task.seed}:{name}"
                for mode, plan in (("fixed", fixed), ("adaptive", adaptive)):
                    outcome = judge_sweep_once(
                        pool,
                        model,
                        (name, 1.0),
                        Path(tmp) / "s",
                        key=key,
                        plan=plan,
                        answers=True,
                        **common,  # type: ignore[arg-type]
                    )
                    out.append(("mix", name, mode, outcome))
    return out


@dataclass(frozen=True)
class Row:
    group: str
    candidate: str
    mode: str
    model: str
    outcome: Outcome


def _rate(count: int, n: int) -> str:
    low, high = wilson_interval(count, n)
    return f"{count}/{n} [{low:.0%}, {high:.0%}]"


def bars(scenario: Scenario, model: str) -> list[RateBar]:
    """The bars the issue sets this scenario under this noise model (none: its rates are reported)."""
    out: list[RateBar] = []
    need = scenario.required.get(model, scenario.required.get(ALL))
    if need is not None:
        out.append(RateBar(scenario.expected, need, at_least=True))
    for decision, limits in scenario.at_most.items():
        most = limits.get(model, limits.get(ALL))
        if most is not None:
            out.append(RateBar(decision, most, at_least=False))
    return out


def judge_row(row_bars: Sequence[RateBar], decisions: Counter[str], n: int) -> tuple[str, list[str]]:
    """A row's result over its bars (FAIL over UNDECIDED over PASS; ``-`` without a bar) and, per bar, what
    it asks with its result (and, undecided, how many seeds would decide it at the observed rate)."""
    checks: list[str] = []
    results: list[str] = []
    for bar in row_bars:
        result = judge_rate(bar, decisions[bar.decision], n)
        results.append(result)
        more = seeds_to_decide(bar, decisions[bar.decision], n) if result == "UNDECIDED" else None
        checks.append(f"{bar}: {result}" + (f" (~{more} seeds would decide)" if more else ""))
    if not results:
        return "-", ["(reported)"]
    overall = "FAIL" if "FAIL" in results else "UNDECIDED" if "UNDECIDED" in results else "PASS"
    return overall, checks


def scenario_table(results: Sequence[Row], models: Sequence[str]) -> tuple[list[str], Counter[str]]:
    """Markdown rows: per scenario, model and mode, the rates with Wilson intervals, each bar's result and
    the row's; with the count of rows per result."""
    lines = [
        "| scenario | noise | mode | seeds | kept | rejected | other | mostly-slow runs (cand/later/base) "
        "| repeats (mean) | required [95% Wilson] | result |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    tally: Counter[str] = Counter()
    for scenario, model, mode in (
        (s, m, d) for s in SCENARIOS for m in models for d in ("fixed", "adaptive")
    ):
        got = [
            r
            for r in results
            if r.group == "scenario" and r.candidate == scenario.name and r.model == model and r.mode == mode
        ]
        if not got:
            continue
        n = len(got)
        decisions = Counter(o.outcome.decision for o in got)
        result, checks = judge_row(bars(scenario, model), decisions, n)
        tally[result] += 1
        other = ", ".join(f"{d} {c}" for d, c in decisions.most_common() if d not in ("keep", "reject"))
        mean_repeats = sum(o.outcome.repeats for o in got) / n
        masked = "/".join(
            str(sum(any(m.startswith(f"{g} ") for m in o.outcome.masked) for o in got))
            for g in ("candidate", "later", "baseline")
        )
        lines.append(
            f"| {scenario.name} | {model} | {mode} | {n} | {_rate(decisions['keep'], n)} | "
            f"{_rate(decisions['reject'], n)} | {other or '-'} | {masked} | {mean_repeats:.2f} | "
            f"{'; '.join(checks)} | {result} |"
        )
    return lines, tally


def scenario_time(results: Sequence[Row]) -> str:
    """Measurement time of the scenarios' candidates, fixed against adaptive on the same draws (both
    modes judged): the saving on a mix that includes the 10% effects, not only the demo's candidates."""
    rows = [r for r in results if r.group == "scenario"]
    totals = {m: sum(r.outcome.time_s for r in rows if r.mode == m) for m in ("fixed", "adaptive")}
    if not totals["fixed"] or not totals["adaptive"]:
        return ""
    names = ", ".join(dict.fromkeys(r.candidate for r in rows))
    models = ", ".join(dict.fromkeys(r.model for r in rows))
    saving = 1 - totals["adaptive"] / totals["fixed"]
    return (
        f"measurement time over the scenarios ({names}; {models}): fixed {totals['fixed']:,.0f} s, "
        f"adaptive {totals['adaptive']:,.0f} s: {abs(saving):.0%} {'less' if saving >= 0 else 'more'} "
        "(required: >= 30% less)"
    )


def mix_table(results: Sequence[Row]) -> tuple[list[str], bool]:
    """The demo mix: measurement time and verdicts, fixed against adaptive, on the same draws."""
    lines = [
        "| candidate | mode | sweeps | verdicts | repeats (mean) | measurement time (mean, sim s) |",
        "|---|---|---|---|---|---|",
    ]
    totals: dict[str, float] = {"fixed": 0.0, "adaptive": 0.0}
    same = True
    verdicts: dict[str, Counter[str]] = {}
    for name in DEMO_MIX:
        for mode in ("fixed", "adaptive"):
            got = [o.outcome for o in results if o.group == "mix" and o.candidate == name and o.mode == mode]
            if not got:
                continue
            decisions = Counter(o.decision for o in got)
            verdicts[f"{name}:{mode}"] = decisions
            spent = sum(o.time_s for o in got)
            totals[mode] += spent
            lines.append(
                f"| {name} | {mode} | {len(got)} | "
                f"{', '.join(f'{d} {c}' for d, c in decisions.most_common())} | "
                f"{sum(o.repeats for o in got) / len(got):.2f} | {spent / len(got):,.1f} |"
            )
        fixed, adaptive = verdicts.get(f"{name}:fixed"), verdicts.get(f"{name}:adaptive")
        if fixed and adaptive:
            same &= fixed.most_common(1)[0][0] == adaptive.most_common(1)[0][0]
    saving = 1 - totals["adaptive"] / totals["fixed"] if totals["fixed"] else 0.0
    lines.append(
        f"\nmeasurement time, whole mix: fixed {totals['fixed']:,.0f} s, "
        f"adaptive {totals['adaptive']:,.0f} s: "
        f"{saving:.0%} less (required >= 30%, same majority verdicts: {'yes' if same else 'NO'})"
    )
    return lines, saving >= 0.30 and same


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", type=int, default=40, help="sweeps per scenario and noise model")
    parser.add_argument(
        "--repeats", type=int, default=3, help="baseline repeats; fixed-mode candidate repeats"
    )
    parser.add_argument("--min-repeats", type=int, default=1, help="adaptive: first look (run.min_repeats)")
    parser.add_argument("--max-repeats", type=int, default=5, help="adaptive: last look (run.max_repeats)")
    parser.add_argument("--fixed", action="store_true", help="scenarios with fixed repeats, not adaptive")
    parser.add_argument(
        "--mode",
        action="append",
        choices=["fixed", "adaptive"],
        help="the scenarios' repeats, once per mode given (default: adaptive, or fixed with --fixed)",
    )
    parser.add_argument("--scale", type=float, default=1.0, help="multiplier on every profile's requests")
    parser.add_argument("--pool", type=int, default=12, help="distinct replays per engine and profile")
    parser.add_argument("--seed", type=int, default=0, help="changes every seed of the benchmark")
    parser.add_argument("--model", action="append", choices=list(NOISE_MODELS))
    parser.add_argument("--scenario", action="append", choices=[s.name for s in SCENARIOS])
    parser.add_argument("--no-mix", action="store_true", help="skip the demo mix (fixed vs adaptive)")
    parser.add_argument(
        "--mix-model",
        action="append",
        choices=list(NOISE_MODELS),
        help="noise models of the demo mix (default: lognormal, student_t)",
    )
    parser.add_argument(
        "--resamples",
        type=int,
        default=500,
        help="gates.bootstrap_resamples (default 500, not the shipped 2000: the throughput interval is the "
        "union with Welch's t, which the resamples do not change; 4x faster)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--verbose", action="store_true", help="print every verdict's reason")
    parser.add_argument(
        "--client-lag-ms",
        type=float,
        nargs=2,
        metavar=("LOW", "HIGH"),
        help="the measured model's client p99 dispatch lag per loaded run, uniform, on every loaded profile "
        "(default: as measured over HTTP at time scale 1 on the shared 2-core machine, per profile: short "
        "1-5 ms, decode_heavy and prefill_10k 15-30 ms; the load runner alone on a quiet machine: 0.1 0.7; "
        "the model's earlier single range: 2 9)",
    )
    parser.add_argument(
        "--confirm-runs",
        type=int,
        default=None,
        help="run.confirm_runs (default: the shipped config's, 2): after fixed repeats, up to N more runs "
        "of a profile whose runs disagree beyond 2x or lost a slow run set aside (gates.confirm); 0: none",
    )
    args = parser.parse_args(argv)
    models = args.model or list(NOISE_MODELS)
    mix_models = args.mix_model or ["lognormal", "student_t"]
    scenarios = tuple(args.scenario or [s.name for s in SCENARIOS])
    started = time.monotonic()
    modes = list(dict.fromkeys(args.mode or (["fixed"] if args.fixed else ["adaptive"])))
    mode = " and ".join(
        f"fixed {args.repeats}" if m == "fixed" else f"adaptive {args.min_repeats}..{args.max_repeats}"
        for m in modes
    )
    print(
        f"decision quality on the simulator ({SIM_PROFILE}, in-process replay, pool {args.pool}): "
        f"{args.seeds} seeds per scenario and noise model; baseline {args.repeats} repeats; candidates "
        f"{mode} "
        f"repeats; scale {args.scale}; profiles {', '.join(PROFILES)}; seed {args.seed}; "
        f"bootstrap resamples {args.resamples}; confirmation runs "
        f"{'as configured' if args.confirm_runs is None else args.confirm_runs}; "
        f"demo mix under {', '.join(mix_models)}"
    )
    for model in models:
        print(f"  noise {model}: {NOISE_MODELS[model].description}")
    if args.client_lag_ms:
        print(f"  client lag p99 per loaded run: {args.client_lag_ms[0]:g}-{args.client_lag_ms[1]:g} ms")
    tasks = [
        Task(
            model,
            k,
            scenarios,
            mix=not args.no_mix and model in mix_models and each == modes[0],
            fixed=each == "fixed",
            args=(
                args.seed,
                args.scale,
                args.pool,
                args.repeats,
                args.min_repeats,
                args.max_repeats,
                args.resamples,
            ),
            client_lag_s=(
                (args.client_lag_ms[0] / 1000, args.client_lag_ms[1] / 1000) if args.client_lag_ms else None
            ),
            confirm_runs=args.confirm_runs,
        )
        for k in range(args.seeds)
        for model in models
        for each in modes
    ]
    rows: list[Row] = []
    if args.jobs > 1:  # replay the pool once; forked workers inherit it
        pool = _pool(args.scale, args.seed, args.pool)
        engines = [("baseline", s.speed) for s in SCENARIOS if s.name in scenarios]
        engines += [] if args.no_mix else [(n, 1.0) for n in DEMO_MIX if pool.starts(n)]
        if not args.no_mix:
            for name in ["baseline", *(n for n in DEMO_MIX if pool.starts(n))]:
                pool.get(name, 1.0, ANSWER_PROFILE, 0)
        for engine in dict.fromkeys(engines):
            for profile in PROFILES:
                for index in range(args.pool):
                    pool.get(*engine, profile, index)
        with ProcessPoolExecutor(args.jobs) as workers:
            done = list(workers.map(run_task, tasks))
    else:
        done = [run_task(t) for t in tasks]
    for task, out in zip(tasks, done, strict=True):
        rows += [Row(g, c, m, task.model, o) for g, c, m, o in out]
        if args.verbose:
            for g, c, m, o in out:
                slow = f" [mostly slow: {', '.join(o.masked)}]" if o.masked else ""
                head = f"  {task.model} seed {task.seed} {g} {c} {m}: {o.repeats} repeats{slow}"
                print(f"{head}: {o.reason[:300]}")
    lines, tally = scenario_table(rows, models)
    print("\n".join(lines))
    print(
        f"rows: {tally['PASS']} PASS, {tally['FAIL']} FAIL, {tally['UNDECIDED']} UNDECIDED (the Wilson "
        f"interval straddles the bar: more seeds decide it), {tally['-']} reported without a bar"
    )
    for scenario in SCENARIOS:
        wrong = [r for r in rows if r.group == "scenario" and r.candidate == scenario.name]
        wrong = [r for r in wrong if r.outcome.decision != scenario.expected]
        for r in wrong[:2]:
            print(f"  e.g. {scenario.name} / {r.model}: {r.outcome.reason[:300]}")
    spent = scenario_time(rows)
    if spent:
        print(spent)
    mix_ok = True
    if not args.no_mix:
        mix, mix_ok = mix_table(rows)
        print("\n".join(mix))
    print(f"[{time.monotonic() - started:.0f} s]")
    if tally["FAIL"] or not mix_ok:
        return 1
    return 2 if tally["UNDECIDED"] else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Decision quality of the gates, measured on the simulator: how often does each kind of candidate get
the verdict it deserves?

Three scenarios, each repeated ``--repetitions`` times (20 by default) with fresh seeds:

- ``identical``: the candidate is the baseline (``sim-speed 1.0``); it must be ``keep`` at most once;
- ``regression``: 20% slower under load (``sim-speed 0.8``); it must be ``reject`` at least 19 times;
- ``ttft_gain``: a real 15% TTFT improvement with no regression (``sim-speed 1/0.85``, every step 15%
  shorter); it must be ``keep`` at least 19 times.

Each repetition writes a complete sweep directory (baseline, candidate, recovery: the layout of
:mod:`contracts.results`) and calls :func:`gates.evaluate_sweep` on it, exactly as a sweep does.
Measurements come from the simulator's engine model driven in-process in virtual time
(:func:`launch.sim.replay.replay_closed_loop`); the HTTP server and the load runner are not in this loop
(see docs/gates.md for what that leaves out). Within a repetition the baseline and the candidate get the
same workload (lengths and prompts: a sweep's workload seed is fixed) but different server seeds, so every
request's sampled draws (speculative acceptance, output plans) differ between them and between repeats;
every repetition has its own workload and seeds. A real sweep also shares the server seed and differs by
timing noise, so this is the noisier case.

Run-level noise: the in-process replay has none of its own (virtual time, no client, no host), yet a real
run is shifted as a whole by scheduling and host noise. So every run (side, profile, repeat) gets its own
clock factor ``exp(N(0, --run-jitter))`` (default 0.03: a run 3% slower or faster, log-sd), applied to
every timestamp of the run: TTFT, latencies and duration, hence its tokens/s too. The gates must not call
that noise a regression, a gain or drift.

    .venv/bin/python benchmarks/decision_quality.py                 # 20 repetitions, full-size profiles
    .venv/bin/python benchmarks/decision_quality.py --repetitions 5 --scale 0.25
    .venv/bin/python benchmarks/decision_quality.py --run-jitter 0      # the replay's own noise only
"""

from __future__ import annotations

import argparse
import hashlib
import math
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

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
    LengthConfig,
    ServiceConfig,
    WorkloadConfig,
)
from gates import evaluate_sweep  # noqa: E402
from launch.sim.model import EngineConfig, check_startup  # noqa: E402
from launch.sim.profile import load_profile  # noqa: E402
from launch.sim.replay import ReplayRequest, ReplayResult, replay_closed_loop  # noqa: E402
from orchestrator.config import load  # noqa: E402

#: Closed-loop profiles of the case study the in-process replay can drive (mixed is open-loop; the answer
#: gate's reasoning lengths are redrawn with every seed, see docs/gates.md).
PROFILES = ("serial", "short", "prefill_10k", "decode_heavy")
SIM_PROFILE = "h100x8_deepseek_v4_flash"


@dataclass(frozen=True)
class Scenario:
    name: str
    speed: float  # --sim-speed of the candidate
    expected: str  # the verdict it deserves
    criterion: str  # what the issue requires, in words
    at_most: bool  # True: count of `expected` <= allowed; False: count >= n - allowed
    allowed: float  # per 20 repetitions (1 of 20), scaled to the number of repetitions

    def passes(self, count: int, n: int) -> bool:
        slack = math.floor(self.allowed * n / 20)
        return count <= slack if self.at_most else count >= n - slack


SCENARIOS = (
    Scenario("identical", 1.0, "keep", "keep at most 1 of 20", at_most=True, allowed=1),
    Scenario("regression", 0.8, "reject", "reject at least 19 of 20", at_most=False, allowed=1),
    Scenario("ttft_gain", 1 / 0.85, "keep", "keep at least 19 of 20", at_most=False, allowed=1),
)


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
) -> None:
    """Write the run's records and summary; ``clock`` scales every timestamp (run-level noise)."""

    def at(t: float | None) -> float | None:
        return None if t is None else t * clock

    records = []
    for rec in sorted(result.records, key=lambda r: r.index):
        spec = reqs[rec.index]
        offsets, elapsed = [], 0.0
        for t, _r, _c in rec.chunks:
            offsets.append(t * clock)
            elapsed = t * clock
        records.append(
            RequestRecord(
                index=rec.index,
                warmup=False,
                target_prompt_tokens=spec.prompt_tokens,
                target_output_tokens=spec.max_tokens,
                scheduled_s=rec.sent * clock,
                sent_s=rec.sent * clock,
                ttft_s=at(rec.ttft),
                first_visible_s=at(rec.first_visible),
                end_s=at(rec.end) if rec.end is not None else elapsed or None,
                chunk_offsets_s=offsets,
                prompt_tokens=spec.prompt_tokens,
                completion_tokens=rec.completion_tokens,
                finish_reason=rec.finish_reason,
                http_status=200,
            )
        )
    write_jsonl(directory / "records.jsonl", records)
    duration = result.duration * clock
    prompt_total = sum(r.prompt_tokens or 0 for r in records)
    output_total = sum(r.completion_tokens or 0 for r in records)
    visible = [r.first_visible_s for r in records]
    itl = [b - a for r in records for a, b in zip(r.chunk_offsets_s, r.chunk_offsets_s[1:], strict=False)]
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
        itl=stats(itl),
        e2e=stats([r.end_s for r in records if r.end_s is not None]),
        client=ClientHealth(
            dispatch_lag_p50_s=0.0,
            dispatch_lag_p99_s=0.0,
            dispatch_lag_max_s=0.0,
            chunks_per_read_p99=1.0,
            client_cpu_percent=0.0,
            saturated=False,
            notes=["in-process replay: no client"],
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


def measure(
    sweep: Path,
    root: str,
    name: str,
    *,
    workloads: dict[str, WorkloadConfig],
    profiles: Sequence[str],
    repeats: int,
    engine: EngineConfig,
    scale: float,
    key: str,
    phase: str,
    run_jitter: float = 0.0,
) -> None:
    """Launch (check startup) and measure every profile ``repeats`` times; write run.json and the profiles.

    Each run's timestamps are scaled by its own factor ``exp(N(0, run_jitter))``: run-level noise.
    """
    sim = load_profile(SIM_PROFILE)
    plan = check_startup(sim, engine)
    written = []
    for profile in profiles:
        for k in range(repeats):
            reqs, warmup, concurrency = requests_for(workloads[profile], scale, f"{key}:{profile}", k)
            result = replay_closed_loop(sim, engine, reqs, concurrency, warmup=warmup)
            jitter = np.random.default_rng(_seed(key, root, profile, k, "run-jitter"))
            clock = math.exp(float(jitter.normal(0.0, run_jitter))) if run_jitter > 0 else 1.0
            write_profile(
                sweep / root / profile / f"r{k}",
                result,
                reqs,
                candidate=name,
                profile=profile,
                repeat=k,
                clock=clock,
            )
            written.append(f"{profile}/r{k}")
    gpus = engine.tensor_parallel_size * engine.data_parallel_size
    write_model(
        sweep / root / "run.json",
        CandidateRun(
            candidate=name,
            fingerprint="sha256:" + "0" * 64,
            backend="sim",
            host="sim (in-process replay)",
            is_baseline=phase != "candidate",
            phase=phase,  # type: ignore[arg-type]
            startup=StartupRecord(ok=True, time_to_ready_s=0.0),
            probe=HostProbe(driver=False, reason="simulated host", simulated=True),
            free_gpu_gib_after_warmup=[plan.free_gib] * gpus,
            profiles=written,
        ),
    )


def run_repetition(
    scenario: Scenario,
    j: int,
    out: Path,
    *,
    repeats: int,
    scale: float,
    seed: int,
    recovery_repeats: int,
    run_jitter: float,
) -> tuple[str, str]:
    cfg, _ = load([])
    sweep = out / scenario.name / f"rep{j:02d}"
    base_key = f"{seed}:{scenario.name}:{j}"
    common = {"workloads": cfg.workloads, "scale": scale, "run_jitter": run_jitter}
    measure(
        sweep, "candidates/baseline", "baseline", profiles=PROFILES, repeats=repeats, phase="baseline",
        engine=engine_config(cfg.service, cfg.baseline, seed=_seed(base_key, "baseline"), speed=1.0),
        key=base_key, **common,  # type: ignore[arg-type]
    )  # fmt: skip
    measure(
        sweep, "candidates/candidate", "candidate", profiles=PROFILES, repeats=repeats, phase="candidate",
        engine=engine_config(
            cfg.service, cfg.baseline, seed=_seed(base_key, "candidate"), speed=scenario.speed
        ),
        key=base_key, **common,  # type: ignore[arg-type]
    )  # fmt: skip
    measure(
        sweep, "recovery", "baseline", profiles=cfg.run.recovery_profiles, repeats=recovery_repeats,
        phase="recovery",
        engine=engine_config(cfg.service, cfg.baseline, seed=_seed(base_key, "recovery"), speed=1.0),
        key=base_key, **common,  # type: ignore[arg-type]
    )  # fmt: skip
    gates = GatesConfig(
        **{**cfg.gates.__dict__, "loaded_profiles": [p for p in cfg.gates.loaded_profiles if p in PROFILES]}
    )
    verdict = evaluate_sweep(sweep, gates, baseline="baseline")
    only = verdict.verdicts[0]
    return only.decision, only.reason


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repetitions", type=int, default=20)
    parser.add_argument(
        "--repeats", type=int, default=3, help="repeats of each profile per candidate (run.repeats)"
    )
    parser.add_argument("--recovery-repeats", type=int, default=1)
    parser.add_argument(
        "--scale", type=float, default=1.0, help="multiplier on every profile's request count"
    )
    parser.add_argument("--seed", type=int, default=0, help="changes every seed of the benchmark")
    parser.add_argument(
        "--run-jitter",
        type=float,
        default=0.03,
        help="log-sd of each run's clock factor (run-level noise the replay lacks); 0 = none",
    )
    parser.add_argument("--out", type=Path, default=None, help="keep the sweep directories here")
    parser.add_argument("--scenario", action="append", choices=[s.name for s in SCENARIOS])
    parser.add_argument("--verbose", action="store_true", help="print every verdict's reason")
    args = parser.parse_args(argv)
    chosen = [s for s in SCENARIOS if not args.scenario or s.name in args.scenario]
    with tempfile.TemporaryDirectory(prefix="gauntlet-dq-") as tmp:
        out = args.out or Path(tmp)
        print(
            f"decision quality on the simulator ({SIM_PROFILE}, in-process replay): "
            f"{args.repetitions} repetitions, {args.repeats} repeats per profile, scale {args.scale}, "
            f"profiles {', '.join(PROFILES)}, seed {args.seed}, run jitter {args.run_jitter:g} (log-sd)"
        )
        failures = 0
        for scenario in chosen:
            started = time.monotonic()
            decisions: Counter[str] = Counter()
            reasons: dict[str, list[str]] = {}
            for j in range(args.repetitions):
                decision, reason = run_repetition(
                    scenario, j, out, repeats=args.repeats, scale=args.scale, seed=args.seed,
                    recovery_repeats=args.recovery_repeats, run_jitter=args.run_jitter,
                )  # fmt: skip
                decisions[decision] += 1
                reasons.setdefault(decision, []).append(reason)
                if args.verbose:
                    print(f"  {scenario.name} rep{j:02d}: {reason}")
            count = decisions[scenario.expected]
            ok = scenario.passes(count, args.repetitions)
            failures += not ok
            spread = ", ".join(f"{d} {c}" for d, c in decisions.most_common())
            print(
                f"{scenario.name:<11} sim-speed {scenario.speed:.3f}: "
                f"{scenario.expected} {count}/{args.repetitions} "
                f"({spread}); required: {scenario.criterion} -> {'PASS' if ok else 'FAIL'} "
                f"[{time.monotonic() - started:.0f} s]"
            )
            for decision, texts in reasons.items():
                if decision != scenario.expected or not ok:
                    print(f"    e.g. {texts[0][:300]}")
        return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())

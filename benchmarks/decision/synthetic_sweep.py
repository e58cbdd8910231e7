"""The synthetic sweep writer: one benchmark sweep written run by run, in the sweep's measuring order, from
the pool's replays with the noise model's draws on top (run clock, per-request tails, drift, outlier runs,
loaded TTFT, the client's dispatch lag), into a complete sweep directory (baseline, candidate, the
baseline's block after it, recovery: :mod:`contracts.layout`), judged by :func:`gates.evaluate_sweep` as a
sweep is, with adaptive looks (:func:`gates.sequential.loop_decision`) and confirmation runs
(:func:`gates.confirm.to_confirm`).
"""

from __future__ import annotations

import math
import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks.decision.capacity_runs import write_capacity
from benchmarks.decision.replays import ReplayPool, derived_seed
from benchmarks.decision.scenarios import ANSWER_PROFILE, PROFILES, CapacityPlan
from benchmarks.noise_models import OUTLIER_SIDES, NoiseModel
from contracts.files import write_jsonl, write_model
from contracts.layout import (
    RECOVERY_ROOT,
    RepeatPaths,
    SweepPaths,
    block_root,
    candidate_root,
    repeat_dir,
    repeat_name,
)
from contracts.metrics import censored_median, percentile, stats
from contracts.results import (
    CandidateRun,
    ClientHealth,
    HostProbe,
    Pricing,
    ProfileSummary,
    RequestRecord,
    ServerMetrics,
    StartupRecord,
)
from contracts.schema import GatesConfig
from contracts.sweepdir import load_results
from gates import evaluate_sweep
from gates.capacity import before_search
from gates.confirm import to_confirm
from gates.sequential import SequentialPlan, loop_decision
from launch.sim.replay import ReplayRequest, ReplayResult


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
    lags: Sequence[float] | None = None,
) -> float:
    """Write the run's records and summary; returns the run's duration (simulated seconds).

    ``clock`` scales every timestamp of the run (run-level noise); ``request_factors`` (by record
    order) scale one request's latencies on top (per-request tails: in a closed loop of ``concurrency``
    slots the run lasts the added request-seconds / ``concurrency`` longer). ``ttft_factor`` scales the
    first token and the first visible answer only (a prefill wave later; the end stays, at least the
    first token); ``lags`` (by record order) is each request's dispatch lateness: it left that long
    after it was scheduled (the summary's lag figures are read from them, as the load runner's are).
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
                scheduled_s=rec.sent * clock - (lags[pos] if lags else 0.0),
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
    write_jsonl(RepeatPaths(directory).records, records)
    late = [max(0.0, r.sent_s - r.scheduled_s) for r in records]
    lag_p99 = percentile(late, 99) or 0.0
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
            dispatch_lag_p50_s=percentile(late, 50) or 0.0,
            dispatch_lag_p99_s=lag_p99,
            dispatch_lag_max_s=max(late, default=0.0),
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
    write_model(RepeatPaths(directory).summary, summary)
    return duration


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
            order = np.random.default_rng(derived_seed(self.key, *key, *tag)).permutation(self.pool.size)
            self.picks[key] = [int(i) for i in order]
        return self.picks[key].pop()

    def outlier(self, side: str, runs: int) -> int | None:
        if side not in OUTLIER_SIDES:
            return None
        if side not in self.outliers:
            rng = np.random.default_rng(derived_seed(self.key, self.model.name, side, "outlier"))
            self.outliers[side] = self.model.outlier_run(rng, runs)
        return self.outliers[side]

    def run(self, run: Run, engine: tuple[str, float], *, side_runs: int) -> None:
        result, reqs, concurrency = self.pool.get(*engine, run.profile, self.pick(engine, run.profile))
        rng = np.random.default_rng(
            derived_seed(self.key, self.model.name, run.side, run.profile, run.repeat)
        )
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
        # Each request's own lateness from a stream of its own: the older draws stay where they were.
        sends = [rec.sent for rec in sorted(result.records, key=lambda r: r.index)]
        lags = self.model.request_lags(
            np.random.default_rng(
                derived_seed(self.key, self.model.name, run.side, run.profile, run.repeat, "lags")
            ),
            lag,
            [s <= min(sends) + 1e-9 for s in sends],
        )
        if run.side == "candidate":
            effect_clock, effect_ttft = self.effects.get(run.profile, (1.0, 1.0))
            clock, ttft = clock * effect_clock, ttft * effect_ttft
        root = side_root(run.side)
        self.time_s[run.side] = self.time_s.get(run.side, 0.0) + write_profile(
            repeat_dir(self.sweep / root, run.profile, run.repeat),
            result,
            reqs,
            candidate="baseline" if run.side != "candidate" else "candidate",
            profile=run.profile,
            repeat=run.repeat,
            clock=clock,
            request_factors=factors,
            concurrency=concurrency,
            ttft_factor=ttft,
            lags=lags,
        )
        self.counts[run.side] += 1
        self.position += 1


def side_root(side: str) -> str:
    """Where a side's runs go in the sweep directory (contracts.sweepdir's layout)."""
    if side == "recovery":
        return RECOVERY_ROOT
    if side == "block":
        return block_root(candidate_root("baseline"), "candidate")
    return candidate_root(side)


def write_run_json(
    sweep: Path, side: str, profiles: Sequence[str], *, started: bool = True, pricing: Pricing | None = None
) -> None:
    root = side_root(side)
    write_model(
        SweepPaths(sweep).at(root).run_file,
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
            pricing=pricing,
        ),
    )


@dataclass(frozen=True)
class Outcome:
    decision: str
    reason: str
    repeats: int  # candidate repeats measured
    time_s: float  # simulated seconds of the candidate's runs
    masked: tuple[str, ...] = ()  # SweepRunner.masked: profiles most of whose runs were outliers
    #: the capacity gate claimed "capacity up beyond noise" (the verdict lists it as a gain), whatever the
    #: decision; None without a capacity search
    capacity_gain: bool | None = None


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
    pricing: Pricing | None = None,
    capacity: CapacityPlan | None = None,
    capacity_in_blocks: bool = True,
) -> Outcome:
    """Measure baseline, then the candidate repeat by repeat (looks per ``plan``), then (``interleave``)
    the baseline block after it, then recovery; judge. ``answers``: both sides also run the answer gate
    once (in their first repeat). ``confirm_runs``: after a side's fixed repeats, the profiles whose runs
    disagree get up to that many more runs (:mod:`gates.confirm`, as the sweep does). ``pricing``: the
    host's prices each launch's run.json records (the cost gate judges only priced launches).
    ``capacity``: each launch's capacity search after its runs, as the sweep does (the block's with
    ``capacity_in_blocks``); the looks judge without the capacity gate
    (:func:`gates.capacity.before_search`)."""
    shutil.rmtree(sweep, ignore_errors=True)
    blocks = len(recovery_profiles) * interleave_repeats
    planned = (baseline_repeats + plan.max_repeats) * len(PROFILES) + blocks + len(recovery_profiles)
    runner = SweepRunner(pool, model, sweep, key, planned, effects=dict(effects or {}))
    base = ("baseline", 1.0)
    written: list[str] = []
    for k in range(baseline_repeats):
        for profile in PROFILES:
            runner.run(Run("baseline", profile, k), base, side_runs=baseline_repeats * len(PROFILES))
            written.append(repeat_name(profile, k))
        if answers and k == 0:
            runner.run(Run("baseline", ANSWER_PROFILE, 0), base, side_runs=baseline_repeats * len(PROFILES))
            written.append(repeat_name(ANSWER_PROFILE, 0))
    write_run_json(sweep, "baseline", written, pricing=pricing)
    if confirm_runs:
        written += confirm(runner, "baseline", base, baseline_repeats, confirm_runs)
        write_run_json(sweep, "baseline", written, pricing=pricing)
    if capacity is not None:
        write_capacity(sweep / side_root("baseline"), capacity, model, key=key, side="baseline", factor=1.0)
    look_gates = before_search(gates) if capacity is not None else gates
    if not pool.starts(engine[0]):
        write_run_json(sweep, "candidate", [], started=False, pricing=pricing)
        verdict = evaluate_sweep(sweep, gates, baseline="baseline")
        return Outcome(verdict.verdicts[0].decision, verdict.verdicts[0].reason, 0, 0.0)
    decision: str | None = None
    repeats = 0
    cand: list[str] = []
    more = True
    while more and plan.next_repeat(repeats, decision):  # type: ignore[arg-type]
        for profile in PROFILES:
            runner.run(Run("candidate", profile, repeats), engine, side_runs=plan.max_repeats * len(PROFILES))
            cand.append(repeat_name(profile, repeats))
        if answers and repeats == 0:
            runner.run(
                Run("candidate", ANSWER_PROFILE, 0), engine, side_runs=plan.max_repeats * len(PROFILES)
            )
            cand.append(repeat_name(ANSWER_PROFILE, 0))
        repeats += 1
        write_run_json(sweep, "candidate", cand, pricing=pricing)
        if repeats >= plan.min_repeats and plan.adaptive:
            look = evaluate_sweep(sweep, look_gates, baseline="baseline", plan=plan)
            decision, more = loop_decision(look.verdicts[0], plan.max_repeats - repeats)
    if confirm_runs and repeats >= plan.max_repeats:  # fixed, or an adaptive loop run to its last look
        cand += confirm(runner, "candidate", engine, repeats, confirm_runs)
        write_run_json(sweep, "candidate", cand, pricing=pricing)
    if capacity is not None:
        write_capacity(
            sweep / side_root("candidate"), capacity, model, key=key, side="candidate", factor=capacity.factor
        )
    block: list[str] = []
    for k in range(1, interleave_repeats + 1):
        for profile in recovery_profiles:
            runner.run(Run("block", profile, k), base, side_runs=blocks)
            block.append(repeat_name(profile, k))
    if block:
        write_run_json(sweep, "block", block, pricing=pricing)
        if capacity is not None and capacity_in_blocks:
            write_capacity(sweep / side_root("block"), capacity, model, key=key, side="block", factor=1.0)
    for profile in recovery_profiles:
        runner.run(Run("recovery", profile, 0), base, side_runs=len(recovery_profiles))
    write_run_json(sweep, "recovery", [repeat_name(p, 0) for p in recovery_profiles], pricing=pricing)
    verdict = evaluate_sweep(sweep, gates, baseline="baseline", plan=plan)
    only = verdict.verdicts[0]
    claimed = any(" capacity at SLO " in gain for gain in only.gains) if capacity is not None else None
    spent = runner.time_s.get("candidate", 0.0)
    return Outcome(only.decision, only.reason, repeats, spent, runner.masked(), claimed)


def confirm(runner: SweepRunner, side: str, engine: tuple[str, float], repeats: int, extra: int) -> list[str]:
    """The sweep's confirmation runs of one side (:func:`gates.confirm.to_confirm`): one more run of each
    profile whose runs disagree, again until none does or ``extra`` more ran; the runs written."""
    written: list[str] = []
    name = "baseline" if side != "candidate" else "candidate"
    while todo := to_confirm(
        load_results(runner.sweep, side_root(side), name), PROFILES, repeats=repeats, extra=extra
    ):
        for found in todo:
            runner.run(Run(side, found.profile, found.next_repeat), engine, side_runs=repeats * len(PROFILES))
            written.append(repeat_name(found.profile, found.next_repeat))
    return written

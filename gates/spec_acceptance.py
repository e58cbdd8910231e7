"""Speculative acceptance: the candidate's draft acceptance not below the baseline's beyond a tolerance.

Pipeline position: reads each run's ``summary.server.speculative`` (the deltas of vLLM's
``vllm:spec_decode_*`` counters over the measured window, :mod:`load.metrics`) on both sides. Acceptance is
a quality and a performance signal at once: an fp8 KV cache or a new kernel that changes the target's
logits shows as drafts rejected (vllm#55557), and each rejected token is a target step spent. Off until
``gates.spec_acceptance_tolerance`` is set; not applicable unless both sides decode speculatively on a
profile. Per profile, the drop (baseline's mean acceptance minus the candidate's, over runs) is judged
with Welch's t-interval at ``gates.confidence`` split over the profiles (Bonferroni):

| the drop | status |
|---|---|
| its lower bound above the tolerance | fail |
| above the tolerance, its lower bound not (or one run a side: no interval) | inconclusive |
| at or below the tolerance | pass |
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from contracts.sweepdir import Results
from contracts.verdicts import Comparison, Evidence, GateResult, GateStatus
from gates.compare import overall_status, summary_evidence
from gates.registry import Gate, GateContext, register

UNIT = "points"


def run_acceptance(results: Results, profile: str) -> list[float]:
    """The acceptance rate (0-1) of each run of ``profile`` that ran to its end and counted drafts."""
    out = []
    for rep in results.samples(profile):
        server = rep.summary.server
        spec = server.speculative if server is not None else None
        if spec is not None and spec.acceptance_rate is not None:
            out.append(spec.acceptance_rate)
    return out


@dataclass(frozen=True)
class Drop:
    """The baseline's mean acceptance minus the candidate's (points, 0-1), with its interval when known."""

    candidate: float
    baseline: float
    low: float | None
    high: float | None

    @property
    def value(self) -> float:
        return self.baseline - self.candidate


def acceptance_drop(cand: Sequence[float], base: Sequence[float], confidence: float) -> Drop:
    """The drop in mean acceptance with Welch's two-sided t-interval at ``confidence``; no interval with
    fewer than two runs a side. Runs that agree exactly give a zero-width interval."""
    from scipy.stats import t as student_t  # noqa: PLC0415  (scipy on first use)

    c, b = statistics.fmean(cand), statistics.fmean(base)
    if len(cand) < 2 or len(base) < 2:
        return Drop(c, b, None, None)
    vc, vb = statistics.variance(cand) / len(cand), statistics.variance(base) / len(base)
    se = math.sqrt(vc + vb)
    if se == 0:
        return Drop(c, b, b - c, b - c)
    df = (vc + vb) ** 2 / (vc**2 / (len(cand) - 1) + vb**2 / (len(base) - 1))
    half = float(student_t.ppf((1 + confidence) / 2, df)) * se
    return Drop(c, b, b - c - half, b - c + half)


def judge_drop(drop: Drop, tolerance: float) -> GateStatus:
    """fail: the drop's lower bound above ``tolerance``; inconclusive: the drop above it, the bound not
    (or no interval); pass otherwise."""
    if drop.value <= tolerance:
        return "pass"
    if drop.low is not None and drop.low > tolerance:
        return "fail"
    return "inconclusive"


def _pct(value: float) -> str:
    return f"{value:.1%}"


def compare_profile(
    profile: str, cand: Sequence[float], base: Sequence[float], tolerance: float, confidence: float
) -> Comparison:
    """One profile's comparison at ``confidence`` (its share of the gate's level)."""
    drop = acceptance_drop(cand, base, confidence)
    status = judge_drop(drop, tolerance)
    if drop.low is None or drop.high is None:
        interval = "one run on a side: no interval"
    else:
        interval = f"{confidence:.1%} CI of the drop [{drop.low * 100:+.1f}, {drop.high * 100:+.1f}] points"
    return Comparison(
        metric="spec_acceptance",
        profile=profile,
        status=status,
        observed=drop.candidate,
        baseline=drop.baseline,
        interval=(drop.low, drop.high) if drop.low is not None and drop.high is not None else None,
        threshold=tolerance,
        unit=UNIT,
        method="Welch t-interval of the difference of run means",
        n_candidate=len(cand),
        n_baseline=len(base),
        message=f"{profile} acceptance {_pct(drop.candidate)} vs {_pct(drop.baseline)} (drop "
        f"{drop.value * 100:+.1f} points, tolerance {tolerance * 100:g}; {interval}; {len(cand)} vs "
        f"{len(base)} runs)",
    )


@register
class SpecAcceptance(Gate):
    """Draft acceptance not below the baseline's by more than ``gates.spec_acceptance_tolerance``."""

    name = "spec_acceptance"
    order = 46
    requirement = "speculative draft acceptance not below the baseline's beyond the tolerance"
    failure = "speculative acceptance"

    def _not_run(self, why: str) -> GateResult:
        return GateResult(
            gate=self.name,
            failure=self.failure,
            role=self.role,
            status="not_run",
            unit=UNIT,
            message=why,
            not_applicable=why,
        )

    def evaluate(self, ctx: GateContext) -> GateResult:
        tolerance = ctx.cfg.spec_acceptance_tolerance
        if tolerance is None:
            return self._not_run("gates.spec_acceptance_tolerance is not set: acceptance not judged")
        profiles = [p for p in ctx.baseline.profiles if ctx.candidate.samples(p)]
        pairs = [
            (p, cand, base)
            for p in profiles
            if (cand := run_acceptance(ctx.candidate, p)) and (base := run_acceptance(ctx.baseline, p))
        ]
        if not pairs:
            return self._not_run(
                "no profile where both sides decode speculatively (vllm:spec_decode_* counters on both): "
                "acceptance not compared"
            )
        level = 1 - (1 - ctx.cfg.confidence) / len(pairs)  # Bonferroni over the profiles compared
        comparisons = [compare_profile(p, c, b, tolerance, level) for p, c, b in pairs]
        status = overall_status([c.status for c in comparisons])
        worst = max(comparisons, key=lambda c: (c.baseline or 0.0) - (c.observed or 0.0))
        evidence = [
            Evidence(file=ctx.candidate.run_file),
            *summary_evidence(*(ctx.candidate.samples(p) for p, _, _ in pairs)),
        ]
        return GateResult(
            gate=self.name,
            failure=self.failure,
            role=self.role,
            status=status,
            observed=worst.observed,
            baseline=worst.baseline,
            threshold=tolerance,
            unit=UNIT,
            message="; ".join(c.message for c in comparisons),
            evidence=evidence,
            comparisons=comparisons,
        )

"""Drift: the baseline measured at the start of the sweep against the restored baseline at the end.

Pipeline position: compares ``<sweep>/candidates/<baseline>/<profile>/r*`` with
``<sweep>/recovery/<profile>/r*`` for every recovery profile (output tokens/s by two-stage bootstrap,
median TTFT by Hodges-Lehmann). Drift beyond the tolerances and beyond noise, in either direction, means
the host changed under the sweep: every measured verdict becomes inconclusive.
"""

from __future__ import annotations

from pathlib import Path

from gates.compare import Measured, latency, overall_status, throughput, ttft_value
from gates.data import Results, load_results
from gates.models import DriftResult, Evidence, GateStatus
from gates.registry import GateContext
from gates.stats import RatioEstimate
from orchestrator.schema import GatesConfig

RECOVERY_ROOT = "recovery"


def judge_drift(est: RatioEstimate, tolerance: float) -> tuple[GateStatus, float]:
    """fail: changed by more than the tolerance either way, beyond noise; inconclusive: within noise."""
    material = est.ratio < 1 - tolerance or est.ratio > 1 + tolerance
    if material:
        return ("fail" if est.excludes_one else "inconclusive"), tolerance
    return "pass", tolerance


def evaluate_drift(sweep_dir: Path, cfg: GatesConfig, baseline: Results) -> DriftResult:
    """Compare the baseline's first measurement with its measurement after the restore."""
    recovery = load_results(sweep_dir, RECOVERY_ROOT, baseline.name)
    if recovery.run is not None and not recovery.run.startup.ok:
        startup = recovery.run.startup
        return DriftResult(
            status="not_run",
            message=(
                f"RECOVERY FAILED TO START ({startup.kind}: {startup.matched_line or 'no log line'}): "
                "drift unknown, and the retained configuration is not validated"
            ),
            evidence=[Evidence(file=recovery.run_file)],
        )
    shared = [p for p in recovery.profiles if baseline.repeats(p)]
    if not shared:
        return DriftResult(
            status="not_run",
            message="no recovery measurement of a profile the baseline ran: drift not checked",
        )
    ctx = GateContext(cfg=cfg, baseline=baseline, candidate=recovery)
    measured: list[Measured] = []
    for profile in shared:
        end, start = recovery.repeats(profile), baseline.repeats(profile)
        measured.append(
            throughput(
                "output_tps",
                profile,
                end,
                start,
                confidence=cfg.confidence,
                resamples=cfg.bootstrap_resamples,
                seed=ctx.seed("drift", profile),
                judge=lambda e: judge_drift(e, cfg.throughput_tolerance),
                label=f"{profile} output tokens/s at the end",
            )
        )
        ttft = latency(
            "ttft_p50",
            profile,
            end,
            start,
            ttft_value,
            confidence=cfg.confidence,
            judge=lambda e: judge_drift(e, cfg.latency_tolerance),
            label=f"{profile} median TTFT at the end",
        )
        if ttft is not None:
            measured.append(ttft)
    comparisons = [m.comparison for m in measured]
    status = overall_status([c.status for c in comparisons])
    if status == "fail":
        drifted = "; ".join(c.message for c in comparisons if c.status == "fail")
        message = (
            f"BASELINE DRIFT beyond noise ({drifted} against the start of the sweep): every measured verdict "
            "is inconclusive; rerun the sweep on a quiet host"
        )
    elif status == "inconclusive":
        maybe = "; ".join(c.message for c in comparisons if c.status == "inconclusive")
        message = f"possible baseline drift within noise ({maybe}); verdicts stand, more repeats would tell"
    else:
        message = "no drift beyond noise: " + "; ".join(c.message for c in comparisons)
    evidence = [e for m in measured if m.comparison.status != "pass" for e in m.evidence]
    return DriftResult(status=status, message=message, comparisons=comparisons, evidence=evidence)

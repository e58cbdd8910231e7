"""Latency gain: serial latency and loaded median TTFT improve on the baseline beyond noise.

Pipeline position: the gain gate (role ``gain``): it decides ``keep`` against ``neutral``, never
``reject``. Metrics: serial median TTFT and median request latency, and median TTFT of every loaded
profile, each judged on its repeats' medians (Welch's t on their logs, so run-to-run variance is in the
interval; a loaded difference within the load client's dispatch lag counts neither as a gain nor as
worse). Their intervals are Bonferroni-adjusted so that the family "some latency improved" keeps the
configured confidence; a gain must reach ``min_gain`` and exclude "no change", and no latency may be
worse beyond ``latency_tolerance`` and noise (the serial/loaded reversal is not a gain).
"""

from __future__ import annotations

from dataclasses import replace

from contracts.metrics import e2e_value, fmt_ratio, ttft_value
from contracts.verdicts import Comparison, GateResult, GateStatus
from gates.compare import Measured, judge_gain, latency, max_more, worse_beyond_noise
from gates.registry import Gate, GateContext, register
from gates.significance import bonferroni


def latency_measurements(ctx: GateContext) -> list[Measured]:
    """Serial TTFT and latency, and loaded median TTFT, each with a family-adjusted interval."""
    cfg = ctx.cfg
    plan: list[tuple[str, str, str]] = []
    if ctx.baseline.repeats(cfg.serial_profile) and ctx.candidate.repeats(cfg.serial_profile):
        plan += [
            (cfg.serial_profile, "serial_ttft_p50", "ttft"),
            (cfg.serial_profile, "serial_e2e_p50", "e2e"),
        ]
    for profile in cfg.loaded_profiles:
        if ctx.baseline.repeats(profile) and ctx.candidate.repeats(profile):
            plan.append((profile, "ttft_p50", "ttft"))
    confidence = bonferroni(cfg.confidence, len(plan))
    out: list[Measured] = []
    for profile, metric, kind in plan:
        label = {
            "serial_ttft_p50": "serial median TTFT",
            "serial_e2e_p50": "serial median latency",
        }.get(metric, f"{profile} median TTFT")
        cand, base = ctx.candidate.repeats(profile), ctx.baseline.repeats(profile)
        measured = latency(
            metric,
            profile,
            cand,
            base,
            ttft_value if kind == "ttft" else e2e_value,
            confidence=confidence,
            judge=lambda e: judge_gain(e, "lower", cfg.min_gain),
            label=label,
            # One request at a time meets no queue: sending it late does not change its latency.
            client_lag=profile != cfg.serial_profile,
        )
        if measured is not None:
            out.append(measured)
    return out


def _worse(m: Measured, tolerance: float) -> bool:
    return worse_beyond_noise(m.estimate, "lower", tolerance)


def lag_bounded(m: Measured, tolerance: float) -> Measured:
    """A loaded comparison that looks **better** by no more than the client's lag: never a gain, but
    undecidable (the verdict incomplete) only when the lag could hide a regression beyond ``tolerance``.

    Lateness only lowers the late runs' TTFT, so the candidate's true value is at most its observed one
    plus its lag resolution, and the baseline's at least its observed one: the worst case is
    ``(candidate + lag) / baseline``. Within ``1 + tolerance`` nothing material can be hidden, and the
    comparison is decided: no gain (``fail`` in this gate, which only counts gains), the message says
    why. Beyond it the comparison stays undecidable.

    >>> from gates.stats import RatioEstimate
    >>> from contracts.verdicts import Comparison
    >>> c = Comparison(metric="ttft_p50", profile="short", status="inconclusive", observed=0.030,
    ...                baseline=0.035, ratio=0.857, undecidable="client_lag", client_lag_s=0.005)
    >>> est = RatioEstimate(0.857, 0.7, 1.05, 0.99, "t", 3, 3, 3)
    >>> lag_bounded(Measured(c, est, [], True, 0.005), 0.05).comparison.status
    'fail'
    >>> lag_bounded(Measured(c.model_copy(update={"client_lag_s": 0.009}), est, [], True, 0.009),
    ...             0.05).comparison.undecidable
    'client_lag'
    """
    c = m.comparison
    if c.undecidable != "client_lag" or c.observed is None or c.baseline is None:
        return m
    if not (c.observed < c.baseline) or c.baseline <= 0:
        return m
    worst = (c.observed + m.client_lag_s) / c.baseline
    if worst > 1 + tolerance:
        return m
    message = (
        f"{c.message}; not counted as a gain: even if the client's lateness made all of the difference, "
        f"the candidate is at most {fmt_ratio(worst)} the baseline (within the {tolerance:.0%} tolerance): "
        "no regression can be hidden"
    )
    comparison = c.model_copy(
        update={"status": "fail", "undecidable": None, "more_repeats": None, "message": message}
    )
    return replace(m, comparison=comparison)


@register
class LatencyGain(Gate):
    """Some latency improves by at least ``min_gain`` beyond noise, and none gets worse beyond noise."""

    name = "latency_gain"
    order = 90
    requirement = "latency gain"
    failure = "no latency gain"
    role = "gain"

    def evaluate(self, ctx: GateContext) -> GateResult:
        tolerance = ctx.cfg.latency_tolerance
        # Worse beyond noise, but by no more than the client's lag: undecidable, never dropped.
        measured = [
            m.undecidable() if m.within_client_lag and _worse(m, tolerance) else lag_bounded(m, tolerance)
            for m in latency_measurements(ctx)
        ]
        comparisons: list[Comparison] = [m.comparison for m in measured]
        if not measured:
            return GateResult(
                gate=self.name,
                role=self.role,
                status="not_run",
                message="no serial or loaded profile measured for both the candidate and the baseline",
            )
        gains = [m for m in measured if m.comparison.status == "pass"]
        # Within the load client's lag a difference is undecidable, worse or better: it is never
        # dropped, and it never counts towards a keep (the verdict is incomplete: gates.verdict).
        undecided = [m for m in measured if m.comparison.undecidable is not None]
        maybe = [m for m in measured if m.comparison.status == "inconclusive" and m not in undecided]
        worse = [
            m for m in measured if worse_beyond_noise(m.estimate, "lower", tolerance) and m not in undecided
        ]
        best = min(measured, key=lambda m: m.estimate.ratio)
        status: GateStatus
        if worse:
            status = "fail"
            better = f"{'; '.join(m.comparison.message for m in gains)} but " if gains else ""
            message = f"{better}worse: {'; '.join(m.comparison.message for m in worse)}"
        elif undecided:
            status = "inconclusive"
            better = f"{'; '.join(m.comparison.message for m in gains)} but " if gains else ""
            message = (
                f"{better}undecidable within the load client's lag: "
                f"{'; '.join(m.comparison.message for m in undecided)}"
            )
        elif gains:
            status = "pass"
            message = "; ".join(m.comparison.message for m in gains)
        elif maybe:
            status = "inconclusive"
            message = "possible gain within noise: " + "; ".join(m.comparison.message for m in maybe)
        else:
            status = "fail"
            message = (
                f"no latency gain of {ctx.cfg.min_gain:.0%} beyond noise (best: {best.comparison.message})"
            )
        deciding = (gains or maybe or worse or undecided or [best])[0]
        evidence = [e for m in (gains or worse or maybe or undecided) for e in m.evidence]
        return GateResult(
            gate=self.name,
            role=self.role,
            status=status,
            observed=deciding.estimate.ratio,
            threshold=1 - ctx.cfg.min_gain,
            baseline=1.0,
            interval=deciding.estimate.interval,
            unit="ratio",
            message=message,
            evidence=evidence,
            comparisons=comparisons,
            more_repeats=max_more(comparisons) if status == "inconclusive" else None,
        )

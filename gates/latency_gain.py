"""Latency gain: serial latency and loaded median TTFT improve on the baseline beyond noise.

Pipeline position: the gain gate (role ``gain``): it decides ``keep`` against ``neutral``, never
``reject``. Metrics: serial median TTFT and median request latency, and median TTFT of every loaded
profile, each judged on its repeats' medians (Welch's t on their logs, so run-to-run variance is in the
interval; a loaded gain counts only as far as it holds with the candidate's own lateness added back,
and a comparison the lag could move across ``latency_tolerance`` counts neither as a gain nor as worse:
:mod:`gates.lag`).
Their intervals are Bonferroni-adjusted so that the family "some latency improved" keeps its share of
the configured confidence (all of it, or half with a capacity search: :mod:`gates.gain_family`); a
gain must reach ``min_gain`` and exclude "no change", and no latency may be worse beyond
``latency_tolerance`` and noise (the serial/loaded reversal is not a gain).

**The serial gain is one test** (:func:`serial_combined`): serial median TTFT and serial median request
latency move together (a run's host slowness scales both), so two Bonferroni slots for them test nearly
the same hypothesis twice. The serial claim is made by one test of their per-request geometric mean,
which keeps the error share the two slots had (``2 / m`` of ``1 - confidence``, m the metrics); the
family of gain claims (that test and one per loaded profile) still spends ``1 - confidence`` in all
(weighted Bonferroni, valid under any dependence). The two serial metrics are still compared, each at
``1 / m`` as before, for the report and for "worse" (which cancels a gain): protection is unchanged.
"""

from __future__ import annotations

import math
from dataclasses import replace

from contracts.metrics import e2e_value, fmt_ratio, fmt_value, ttft_value
from contracts.results import RequestRecord
from contracts.verdicts import Comparison, GateResult, GateStatus
from gates.compare import Measured, fmt_interval, judge_gain, latency, max_more, worse_beyond_noise
from gates.gain_family import latency_family
from gates.registry import Gate, GateContext, register
from gates.settle import settle_range
from gates.significance import bonferroni
from gates.stats import more_repeats


def latency_measurements(ctx: GateContext) -> list[Measured]:
    """Serial TTFT and latency, and loaded median TTFT, each with a family-adjusted interval."""
    cfg = ctx.cfg
    plan: list[tuple[str, str, str]] = []
    if ctx.baseline.samples(cfg.serial_profile) and ctx.candidate.samples(cfg.serial_profile):
        plan += [
            (cfg.serial_profile, "serial_ttft_p50", "ttft"),
            (cfg.serial_profile, "serial_e2e_p50", "e2e"),
        ]
    for profile in cfg.loaded_profiles:
        if ctx.baseline.samples(profile) and ctx.candidate.samples(profile):
            plan.append((profile, "ttft_p50", "ttft"))
    # The latency family's share of "some gain" (the capacity gain has the rest: gates.gain_family).
    confidence = bonferroni(latency_family(ctx), len(plan))
    out: list[Measured] = []
    for profile, metric, kind in plan:
        label = {
            "serial_ttft_p50": "serial median TTFT",
            "serial_e2e_p50": "serial median latency",
        }.get(metric, f"{profile} median TTFT")
        cand, base = ctx.candidate.samples(profile), ctx.baseline.samples(profile)  # runs to their end
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
            lag_limits=(1 + cfg.latency_tolerance,),
            lag_confidence=cfg.confidence,  # the concurrency gate's: one answer to "does the lag decide?"
        )
        if measured is not None:
            out.append(measured)
    return out


#: The combined serial metric's name: ``serial_`` like the two it combines (a serial gain, gates.verdict).
SERIAL_COMBINED = "serial_combined_p50"


def serial_value(record: RequestRecord) -> float:
    """One serial request's TTFT and latency together: their geometric mean (+inf when either is
    censored). Its median per repeat is the combined serial statistic.

    >>> r = RequestRecord(index=0, warmup=False, target_prompt_tokens=1, target_output_tokens=1,
    ...                   scheduled_s=0.0, sent_s=0.0, ttft_s=0.04, first_visible_s=0.04, end_s=0.64,
    ...                   finish_reason="stop")
    >>> round(serial_value(r), 3), serial_value(r.model_copy(update={"ttft_s": None}))
    (0.16, inf)
    """
    ttft, e2e = ttft_value(record), e2e_value(record)
    if math.isinf(ttft) or math.isinf(e2e):
        return math.inf
    return math.sqrt(max(ttft, 0.0) * max(e2e, 0.0))


def serial_combined(ctx: GateContext, metrics: int, serial: list[Measured]) -> Measured | None:
    """The serial gain claim: one test of the serial requests' median geometric mean of TTFT and latency,
    at the error share of the two serial slots (``2 / metrics`` of ``1 - confidence``).

    A gain there counts only when neither serial metric is worse than ``latency_tolerance`` on its own
    point estimate (a TTFT gain bought with a slower request is not a serial gain; the message says so),
    as a serial metric's own gain never counted with the other worse beyond the tolerance. ``serial``: the two
    serial comparisons at their own (one-slot) level."""
    cfg = ctx.cfg
    cand, base = ctx.candidate.samples(cfg.serial_profile), ctx.baseline.samples(cfg.serial_profile)
    if not cand or not base or metrics < 2:
        return None
    alpha = (1 - latency_family(ctx)) * 2 / metrics
    measured = latency(
        SERIAL_COMBINED,
        cfg.serial_profile,
        cand,
        base,
        serial_value,
        confidence=1 - alpha,
        judge=lambda e: judge_gain(e, "lower", cfg.min_gain),
        label="serial median TTFT and latency together (per-request geometric mean; one test for both, "
        f"at the error share of two of the {metrics} gain metrics)",
    )
    if measured is None or measured.comparison.status != "pass":
        return measured
    against = [m for m in serial if m.estimate.ratio > 1 + cfg.latency_tolerance]
    if not against:
        return measured
    message = (
        f"{measured.comparison.message}; not counted as a gain: "
        + "; ".join(f"{m.comparison.message.split(' (')[0]} {fmt_ratio(m.estimate.ratio)}" for m in against)
        + " got worse on its own"
    )
    return replace(
        measured, comparison=measured.comparison.model_copy(update={"status": "fail", "message": message})
    )


def gain_with_the_lag(m: Measured, min_gain: float, tolerance: float) -> Measured:
    """A loaded gain counts only as far as it holds with the candidate's own lateness added back.

    Lateness only lowers the late runs' TTFT (:mod:`gates.lag`), so without it the candidate could be as
    slow as ``(candidate + effect) / baseline`` (:func:`gates.lag.lag_bounds`): the gain is judged on
    the estimate and interval scaled by that factor, exactly as :func:`gates.compare.judge_gain` judges
    any gain. So the decision moves one way as the lag grows, gain, then a gain within noise, then no
    gain, with no step at one lag value: a 0.86x gain whose worst case is 0.975x is no gain (short of
    ``min_gain``), as is one whose worst case is 1.0x. A comparison the lag leaves open across ``1 +
    tolerance`` (:attr:`Measured.lag_open`) is left as it is: never a gain either.

    >>> from gates.stats import RatioEstimate
    >>> from contracts.verdicts import Comparison
    >>> c = Comparison(metric="ttft_p50", profile="short", status="pass", observed=0.344,
    ...                baseline=0.40, ratio=0.86, message="short median TTFT")
    >>> est = RatioEstimate(0.86, 0.84, 0.88, 0.99, "t", 3, 3, 3)
    >>> gain_with_the_lag(Measured(c, est, [], 0.05, (0.86, 0.975)), 0.05, 0.05).comparison.status
    'fail'
    >>> gain_with_the_lag(Measured(c, est, [], 0.02, (0.86, 0.90)), 0.05, 0.05).comparison.status
    'pass'
    """
    c = m.comparison
    if m.lag_bounds is None or m.lag_open or c.status == "fail" or not c.observed or not c.baseline:
        return m
    factor = m.lag_bounds[1] * c.baseline / c.observed  # (c + effect) / c
    if factor <= 1:
        return m
    est = m.estimate
    worst = replace(est, ratio=est.ratio * factor, low=est.low * factor, high=est.high * factor)
    status, _ = judge_gain(worst, "lower", min_gain)
    if status == c.status:
        return m
    effect = m.lag_bounds[1] * c.baseline - c.observed
    added = (
        f"with the candidate's own lateness added back (at most {fmt_value(effect, 's')} on its median; the "
        f"load client's dispatch lag p99 {fmt_value(m.client_lag_s, 's')}) the candidate is at most "
        f"{fmt_ratio(worst.ratio)} the baseline"
    )
    if status == "inconclusive":
        message = f"{c.message}; {added} ({fmt_interval(worst)}): a possible gain within noise"
        more, settle = more_repeats(worst), settle_range(worst, 1 - min_gain)
    else:
        hidden = "; no regression can be hidden" if m.lag_bounds[1] <= 1 + tolerance else ""
        message = (
            f"{c.message}; not counted as a gain: {added}, short of the {min_gain:.0%} minimum gain{hidden}"
        )
        more, settle = None, None
    comparison = c.model_copy(
        update={"status": status, "more_repeats": more, "settle": settle, "message": message}
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
        # A comparison the client's lag leaves open (gates.lag) is never dropped; a gain counts only as
        # far as it holds with the candidate's lateness added back.
        measured = [gain_with_the_lag(m, ctx.cfg.min_gain, tolerance) for m in latency_measurements(ctx)]
        # The serial claim is one test (serial_combined); the two serial metrics stay for "worse".
        serial = [m for m in measured if m.comparison.metric != "ttft_p50"]
        combined = serial_combined(ctx, len(measured), serial) if len(serial) == 2 else None
        claims = [m for m in measured if m not in serial] + ([combined] if combined else serial)
        comparisons: list[Comparison] = [m.comparison for m in measured]
        comparisons += [combined.comparison] if combined else []
        if not measured:
            return GateResult(
                gate=self.name,
                role=self.role,
                status="not_run",
                message="no serial or loaded profile measured for both the candidate and the baseline",
                not_applicable=ctx.not_asked([ctx.cfg.serial_profile, *ctx.cfg.loaded_profiles]),
            )
        gains = [m for m in claims if m.comparison.status == "pass"]
        # Within the load client's lag a difference is undecidable, worse or better: it is never
        # dropped, and it never counts towards a keep (the verdict is incomplete: gates.verdict).
        undecided = [m for m in measured if m.comparison.undecidable is not None]
        # Open across the tolerance by the lag and the noise together: no keep, more repeats may settle it.
        unsettled = [m for m in measured if m.lag_open and m not in undecided]
        maybe = [m for m in claims if m.comparison.status == "inconclusive" and not m.lag_open]
        worse = [m for m in measured if worse_beyond_noise(m.estimate, "lower", tolerance) and not m.lag_open]
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
        elif unsettled:
            status = "inconclusive"
            better = f"{'; '.join(m.comparison.message for m in gains)} but " if gains else ""
            message = (
                f"{better}unsettled within the load client's lag and noise: "
                f"{'; '.join(m.comparison.message for m in unsettled)}"
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
        deciding = (gains or maybe or worse or undecided or unsettled or [best])[0]
        evidence = [e for m in (gains or worse or maybe or undecided or unsettled) for e in m.evidence]
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

"""Comparisons shared by the gates: one metric of one profile, candidate against baseline.

Pipeline position: pure helpers between the numbers (:mod:`gates.stats`, :mod:`gates.bootstrap`,
:mod:`gates.significance`) and the gate modules (the rules). The rules are data: :data:`REQUIREMENT_RULES`
and :data:`GAIN_RULES` say, for each direction of "better", when a ratio is material and when its
interval counts. Extractors, medians and formatting
are the shared vocabulary of :mod:`contracts.metrics`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from contracts.metrics import (
    Better,
    Side,
    by_severity,
    excludes_one,
    fmt_ratio,
    fmt_repeats,
    fmt_value,
    geometric_mean,
    median,
)
from contracts.results import RequestRecord
from contracts.sweepdir import Repeat
from contracts.verdicts import Comparison, Evidence, GateStatus
from gates.bootstrap import RunSample, throughput_ratio
from gates.lag import LagOpen, lag_bounds, lag_effect, lag_open, lag_resolution, open_message, straddled
from gates.set_aside import without_outliers
from gates.settle import settle_range
from gates.significance import holm
from gates.stats import RatioEstimate, latency_ratio, more_repeats, one_sided_p, two_run_guard

Party = Literal["candidate", "baseline"]


@dataclass(frozen=True)
class _Rule:
    threshold: Callable[[float], float]  # tolerance -> the ratio that is material
    material: Callable[[float, float], bool]  # (ratio, threshold) -> beyond it
    side: Side  # the interval must exclude "no change" on this side to count
    counted: GateStatus  # material and beyond noise; material within noise is inconclusive
    otherwise: GateStatus  # not material

    def apply(self, est: RatioEstimate, tolerance: float) -> tuple[GateStatus, float]:
        threshold = self.threshold(tolerance)
        if not self.material(est.ratio, threshold):
            return self.otherwise, threshold
        return (self.counted if excludes_one(est.interval, self.side) else "inconclusive"), threshold


#: A requirement fails when the candidate is worse beyond the tolerance and beyond noise.
REQUIREMENT_RULES: dict[Better, _Rule] = {
    "higher": _Rule(lambda tol: 1 - tol, lambda r, t: r < t, "below", "fail", "pass"),
    "lower": _Rule(lambda tol: 1 + tol, lambda r, t: r > t, "above", "fail", "pass"),
}
#: A gain counts when the candidate is better by at least the minimum and beyond noise.
GAIN_RULES: dict[Better, _Rule] = {
    "higher": _Rule(lambda g: 1 + g, lambda r, t: r >= t, "above", "pass", "fail"),
    "lower": _Rule(lambda g: 1 - g, lambda r, t: r <= t, "below", "pass", "fail"),
}


def judge_requirement(est: RatioEstimate, better: Better, tolerance: float) -> tuple[GateStatus, float]:
    """fail: worse beyond tolerance and noise; inconclusive: worse beyond tolerance within noise."""
    return REQUIREMENT_RULES[better].apply(est, tolerance)


def judge_gain(est: RatioEstimate, better: Better, min_gain: float) -> tuple[GateStatus, float]:
    """pass: better by min_gain and beyond noise; inconclusive: by min_gain within noise; else fail."""
    return GAIN_RULES[better].apply(est, min_gain)


def worse_beyond_noise(est: RatioEstimate, better: Better, tolerance: float) -> bool:
    return judge_requirement(est, better, tolerance)[0] == "fail"


# ----------------------------------------------------------------------------------------- formatting


def fmt_interval(est: RatioEstimate) -> str:
    """An estimate's interval with its level, e.g. ``95% CI [0.114x, 0.124x]``, or why it has none."""
    if est.low <= 0 and math.isinf(est.high):
        censored_runs = bool(est.candidate_values) and est.df is None
        return f"{est.confidence:.0%} CI unbounded ({est.note if censored_runs else 'too few requests'})"
    if math.isinf(est.low) or est.high <= 0:
        return est.note
    return f"{est.confidence:.1%} CI [{fmt_ratio(est.low)}, {fmt_ratio(est.high)}]".replace(".0% CI", "% CI")


# -------------------------------------------------------------------------------------------- samples


def pooled(repeats: Sequence[Repeat], extract: Callable[[RequestRecord], float]) -> list[float]:
    """Every measured request's value, over all repeats."""
    return [extract(r) for rep in repeats for r in rep.records]


def per_repeat(repeats: Sequence[Repeat], extract: Callable[[RequestRecord], float]) -> list[list[float]]:
    """Each repeat's values (repeats with no measured request are left out)."""
    return [vals for rep in repeats if (vals := [extract(r) for r in rep.records])]


def run_medians(repeats: Sequence[Repeat], extract: Callable[[RequestRecord], float]) -> list[float]:
    """Each repeat's right-censored median (+inf when censored); repeats with no measured request are left
    out (:func:`per_repeat`)."""
    return [math.inf if m is None else m for m in (median(run) for run in per_repeat(repeats, extract))]


def throughput_sample(repeat: Repeat, metric: str) -> RunSample:
    """``output_tps`` or ``prompt_tps`` of one repeat with its per-request parts (the bootstrap's input)."""
    value = float(getattr(repeat.summary, metric))
    done = [r for r in repeat.records if r.end_s is not None and r.end_s > 0]
    if metric == "output_tps":
        amounts = [float(r.completion_tokens or 0) for r in done]
    else:
        amounts = [float(r.prompt_tokens or 0) for r in done]
    times = [float(r.end_s or 0.0) for r in done]
    return RunSample(value, np.asarray(amounts, dtype=np.float64), np.asarray(times, dtype=np.float64))


def summary_evidence(*sides: Sequence[Repeat]) -> list[Evidence]:
    return [Evidence(file=rep.summary_file) for side in sides for rep in side]


def records_evidence(
    repeats: Sequence[Repeat], select: Callable[[RequestRecord], bool] | None = None
) -> list[Evidence]:
    out = []
    for rep in repeats:
        chosen = [r.index for r in rep.records if select(r)] if select else []
        if select is None or chosen:
            out.append(Evidence(file=rep.records_file, requests=chosen))
    return out


# --------------------------------------------------------------------------------------- comparisons


@dataclass(frozen=True)
class Measured:
    """A comparison together with the estimate behind it (for rules that need more than the status)."""

    comparison: Comparison
    estimate: RatioEstimate
    evidence: list[Evidence]
    client_lag_s: float = 0.0  # the larger side's dispatch lag, p99 mean over its runs (s; 0: none)
    #: where the ratio lies once the client's lateness is undone (:func:`lag_bounds`), None without lag
    lag_bounds: tuple[float, float] | None = None
    #: the lag can move the ratio across a limit (:mod:`gates.lag`): undecidable, or unsettled by noise
    #: and the lag together; never a failed requirement, never a gain
    lag_open: bool = False

    def undecidable(self, why: str) -> Measured:
        """This comparison marked as left undecidable by the client's lag (status inconclusive), ``why``
        appended to its message."""
        comparison = self.comparison.model_copy(
            update={
                "message": self.comparison.message + why,
                "status": "inconclusive",
                "more_repeats": None,
                "settle": None,
                "undecidable": "client_lag",
                "client_lag_s": self.client_lag_s,
            }
        )
        return replace(self, comparison=comparison, lag_open=True)


Judge = Callable[[RatioEstimate], tuple[GateStatus, float]]


def estimated(
    est: RatioEstimate,
    judge: Judge,
    *,
    metric: str,
    profile: str,
    values: tuple[float | None, float | None],
    counts: tuple[int, int],
    unit: str,
    message: str,
    settles: bool = True,
) -> Comparison:
    """The comparison an estimate gives: judged by ``judge``, with its ratio, interval and method, and
    the repeats that would likely settle it when it is inconclusive (``settles=False``: more repeats do
    not narrow this interval, e.g. a prediction interval for one new run). ``values``: (candidate,
    baseline)."""
    status, threshold = judge(est)
    return Comparison(
        metric=metric,
        profile=profile,
        status=status,
        observed=values[0],
        baseline=values[1],
        ratio=est.ratio,
        interval=est.interval,
        threshold=threshold,
        unit=unit,
        method=est.method,
        n_candidate=counts[0],
        n_baseline=counts[1],
        more_repeats=more_repeats(est) if settles and status == "inconclusive" else None,
        settle=settle_range(est, threshold) if settles and status == "inconclusive" else None,
        message=message,
    )


def throughput(
    metric: str,
    profile: str,
    candidate: Sequence[Repeat],
    baseline: Sequence[Repeat],
    *,
    confidence: float,
    resamples: int,
    seed: int,
    judge: Judge,
    label: str | None = None,
) -> Measured:
    """Aggregate tokens/s (``output_tps`` or ``prompt_tps``), mean over repeats: the two-stage bootstrap
    interval widened to the run-level one (:func:`gates.bootstrap.throughput_ratio`). One outlier run per
    side is set aside where that moves the ratio toward no change (:func:`gates.set_aside.without_outliers`)
    and the message says which."""
    measured = (len(candidate), len(baseline))  # before any outlier run is set aside
    (candidate, baseline), notes, aside = without_outliers(
        (candidate, baseline), lambda reps: [float(getattr(r.summary, metric)) for r in reps], "tok/s"
    )
    est = throughput_ratio(
        [throughput_sample(rep, metric) for rep in candidate],
        [throughput_sample(rep, metric) for rep in baseline],
        confidence=confidence,
        resamples=resamples,
        seed=seed,
    )
    est = two_run_guard(est, measured)  # two runs: both may be outlier runs
    c_val = float(np.mean([float(getattr(rep.summary, metric)) for rep in candidate]))
    b_val = float(np.mean([float(getattr(rep.summary, metric)) for rep in baseline]))
    name = label or f"{profile} {'output' if metric == 'output_tps' else 'prompt'} tokens/s"
    message = (
        f"{name} {fmt_value(c_val, 'tok/s')} vs {fmt_value(b_val, 'tok/s')} "
        f"({fmt_ratio(est.ratio)}, {fmt_interval(est)}; {len(candidate)} vs {len(baseline)} repeats"
        f"{'; ' + est.note if est.note else ''}{''.join('; ' + n for n in notes)})"
    )
    comparison = estimated(
        est,
        judge,
        metric=metric,
        profile=profile,
        values=(c_val, b_val),
        counts=(len(candidate), len(baseline)),
        unit="tok/s",
        message=message,
    ).model_copy(update={"set_aside": aside})
    return Measured(comparison, est, summary_evidence(candidate, baseline))


def latency(
    metric: str,
    profile: str,
    candidate: Sequence[Repeat],
    baseline: Sequence[Repeat],
    extract: Callable[[RequestRecord], float],
    *,
    confidence: float,
    judge: Judge,
    label: str,
    client_lag: bool = False,
    lag_limits: Sequence[float] = (),
    lag_confidence: float | None = None,
) -> Measured | None:
    """Median latency, candidate against baseline, with the repeat as the unit.

    Each repeat's right-censored median; the values compared are the geometric means of those medians
    and the interval is Welch's t on their logs (:func:`gates.stats.latency_ratio`), so it carries
    run-to-run variance. With a single repeat on both sides the pooled requests' Hodges-Lehmann ratio
    is the fallback, and the message says that run-to-run noise was not measured.

    ``client_lag`` (loaded profiles): requests that leave late meet a shorter queue, so under load the
    client's own lateness lowers the TTFT of the runs it was late in (TTFT counts from the send), each
    side's compared value by at most :func:`gates.lag.lag_effect` (its requests' own lateness, over the
    runs this comparison reads). The ratio without the lateness lies within :func:`gates.lag.lag_bounds`,
    both ways (the candidate's effect added to it, the baseline's to the baseline). When those bounds
    straddle one of ``lag_limits`` (the ratios a change is material beyond: ``1 + latency_tolerance``
    for a regression), the comparison is open (:func:`lag_left_open`): undecidable (``inconclusive``,
    marked ``undecidable="client_lag"`` with the lag; the verdict ``incomplete``; a less loaded client
    settles it, more repeats do not) where at the far end of the bounds the change is beyond noise at
    ``lag_confidence`` (default ``confidence``; one level for every gate), else ``inconclusive`` as a
    change within noise. Bounds that lie wholly beyond a limit or wholly inside it decide as any other
    comparison: a regression beyond the tolerance even against the flattered baseline is judged on its
    interval, a difference within it even with the candidate's lateness added is not a regression.
    """
    present = ([r for r in candidate if r.records], [r for r in baseline if r.records])
    counts = [len(present[0]), len(present[1])]  # before any outlier run is set aside
    (candidate, baseline), notes, aside = without_outliers(
        present, lambda reps: run_medians(reps, extract), "s"
    )
    c_runs, b_runs = per_repeat(candidate, extract), per_repeat(baseline, extract)
    if not c_runs or not b_runs:
        return None

    def estimate(level: float) -> RatioEstimate:  # two runs on a side: both may be outlier runs
        return two_run_guard(latency_ratio(c_runs, b_runs, confidence=level), (counts[0], counts[1]))

    est = estimate(confidence)
    c_all = [v for run in c_runs for v in run]
    b_all = [v for run in b_runs for v in run]
    censored = sum(math.isinf(v) for v in c_all)
    note = f", {censored} censored" if censored else ""
    if est.candidate_values:
        c_val, b_val = geometric_mean(est.candidate_values), geometric_mean(est.baseline_values)
        n_c, n_b = len(est.candidate_values), len(est.baseline_values)
        detail = (
            f"{fmt_ratio(est.ratio)}, {fmt_interval(est)}; per-repeat medians "
            f"{fmt_repeats(est.candidate_values, 's')} vs {fmt_repeats(est.baseline_values, 's')}{note}"
        )
    else:
        c_val, b_val = median(c_all), median(b_all)
        n_c, n_b = len(c_all), len(b_all)
        detail = f"HL ratio {fmt_ratio(est.ratio)}, {fmt_interval(est)}; {n_c} vs {n_b} requests{note}"
    if est.note and not fmt_interval(est).endswith(est.note):
        detail += f"; {est.note}"
    detail += "".join(f"; {n}" for n in notes)
    lags = (lag_resolution(candidate), lag_resolution(baseline)) if client_lag else (0.0, 0.0)
    # What the lateness can have done to each side's value: its requests' own lateness (gates.lag).
    effects = (lag_effect(candidate, extract), lag_effect(baseline, extract)) if client_lag else (0.0, 0.0)
    bounds: tuple[float, float] | None = None
    if max(effects) > 0 and c_val is not None and b_val is not None and 0 < b_val < math.inf > c_val > 0:
        bounds = lag_bounds(c_val, b_val, effects)
    limit = straddled(bounds, lag_limits)
    comparison = estimated(
        est,
        judge,
        metric=metric,
        profile=profile,
        values=(c_val, b_val),
        counts=(n_c, n_b),
        unit="s",
        message=f"{label} {fmt_value(c_val, 's')} vs {fmt_value(b_val, 's')} ({detail})",
    ).model_copy(update={"set_aside": aside})
    evidence = records_evidence(candidate) + records_evidence(baseline)
    measured = Measured(comparison, est, evidence, max(lags) if bounds else 0.0, bounds)
    if bounds is None or limit is None or c_val is None or b_val is None:
        return measured
    # One level for "the lag alone decides" in every gate that reads this comparison (their own levels
    # differ: Holm's steps, Bonferroni's share), so the verdict and each gate say the same of it.
    at = est if lag_confidence in (None, confidence) else estimate(lag_confidence)
    return lag_left_open(measured, lag_open(at, c_val / b_val, bounds, limit), lags, effects)


def lag_left_open(
    measured: Measured, found: LagOpen, lags: tuple[float, float], effects: tuple[float, float]
) -> Measured:
    """A comparison whose lag bounds straddle a limit (:mod:`gates.lag`): undecidable when the lag alone
    decides it (at the far end of the bounds a change beyond noise), else a change within noise at the
    far end (``inconclusive``, with the repeats that would settle that end)."""
    sentence = open_message(found, lags, effects)
    if found.undecidable:
        return measured.undecidable(
            f"; {sentence}: requests sent late meet a shorter queue, so the client may have made or hidden "
            "the difference; more repeats will not settle it, a less loaded client will"
        )
    comparison = measured.comparison.model_copy(
        update={
            "status": "inconclusive",
            "more_repeats": more_repeats(found.far),
            "settle": settle_range(found.far, found.limit),
            "message": f"{measured.comparison.message}; {sentence}, where the change is within noise "
            f"({fmt_interval(found.far)}): more repeats may settle it",
        }
    )
    return replace(measured, comparison=comparison, lag_open=True)


@dataclass(frozen=True)
class Planned:
    """One comparison of a family, measurable at any confidence (Holm re-measures at its step's level)."""

    better: Better
    measure: Callable[[float], Measured | None]  # confidence -> the comparison at that level


def requirement_family(planned: Sequence[Planned], confidence: float) -> list[Measured]:
    """A gate's requirement comparisons with Holm's family-wise error control.

    Each comparison is first judged at ``confidence``; its one-sided p-value (candidate worse) enters
    Holm's step-down procedure at the family-wise level ``1 - confidence``: the probability that the
    gate fails a candidate that is not worse on any comparison is at most that. A material regression
    (beyond the tolerance) fails only when Holm rejects "no change" for it; otherwise it is
    inconclusive. The interval of a material comparison is re-computed at its Holm step's level
    (``1 - 2 * level``), so the interval shown is the one the decision rests on, and its method says
    which step of how many it was.
    """
    first = [(p, m) for p in planned if (m := p.measure(confidence)) is not None]
    if not first:
        return []
    alpha = 1 - confidence
    p_values = [one_sided_p(m.estimate, REQUIREMENT_RULES[p.better].side) for p, m in first]
    tests = holm(p_values, alpha)
    ranks = {i: k for k, i in enumerate(sorted(range(len(first)), key=lambda i: p_values[i]))}
    out: list[Measured] = []
    for i, ((plan, measured), (rejected, level)) in enumerate(zip(first, tests, strict=True)):
        if measured.comparison.status not in ("fail", "inconclusive"):
            out.append(measured)
            continue
        again = plan.measure(1 - 2 * level) or measured
        # the client's lag may have made or hidden it (gates.lag): open, never a fail
        status: GateStatus = "fail" if rejected and not again.lag_open else "inconclusive"
        level_text = f"{confidence * 100:.2f}".rstrip("0").rstrip(".") + "%"
        note = (
            f"Holm step {ranks[i] + 1} of {len(first)}, family-wise {level_text}: "
            f"one-sided p {p_values[i]:.2g} {'<=' if rejected else '>'} {level:.2g}"
        )
        comparison = again.comparison.model_copy(
            update={
                "status": status,
                "method": f"{again.comparison.method}; {note}",
                "message": f"{again.comparison.message}; {note}",
                "more_repeats": again.comparison.more_repeats if status == "inconclusive" else None,
            }
        )
        out.append(replace(again, comparison=comparison))
    return out


def missing(metric: str, profile: str, side: str, message: str | None = None) -> Comparison:
    return Comparison(
        metric=metric,
        profile=profile,
        status="inconclusive",
        observed=None,
        baseline=None,
        message=message or f"{profile}: not measured for the {side}",
    )


def overall_status(statuses: Sequence[GateStatus]) -> GateStatus:
    """fail beats inconclusive beats pass; nothing measured is not_run."""
    order: tuple[GateStatus, ...] = ("fail", "inconclusive", "pass")
    for status in order:
        if status in statuses:
            return status
    return "not_run"


def brief(comparisons: Sequence[Comparison], status: GateStatus, most: int = 2) -> str:
    """The most severe comparison with ``status`` of each unit (tok/s, s, ...), at most ``most`` of them,
    with a count of the rest; severity and ties as :func:`contracts.metrics.by_severity` orders them."""
    chosen = by_severity([c for c in comparisons if c.status == status])
    shown: list[Comparison] = []
    for c in chosen:
        if len(shown) < most and all(c.unit != s.unit for s in shown):
            shown.append(c)
    for c in chosen:
        if len(shown) < most and c not in shown:
            shown.append(c)
    text = "; ".join(c.message for c in shown)
    return text + (f" (+{len(chosen) - len(shown)} more)" if len(chosen) > len(shown) else "")


def max_more(comparisons: Sequence[Comparison]) -> int | None:
    values = [c.more_repeats for c in comparisons if c.status == "inconclusive" and c.more_repeats]
    return max(values) if values else None

"""The time bound's finding: a candidate's runs its profile's time bound stopped, judged on their rate.

Pipeline position: the concurrency gate (:mod:`gates.concurrency`) asks :func:`time_bound_comparisons`
for every profile where the time bound (``workloads.<profile>.time_limit_s``) stopped a candidate's run
and the baseline finished each of its runs in time (where it did not, the evidence check names a
``time_bound`` gap: :mod:`gates.evidence`). Pure: reads the results already loaded.

**The rule.** A run the bound stopped is not a throughput sample, but it measured how fast the candidate
completes requests: its completed requests over the time from its first measured send to the bound
(``time_limit_s`` x ``time_scale``, host seconds), against each baseline run's completed requests over its
measured window (:func:`run_rate`). The candidate's runs of the profile (those the bound stopped and those
that ran to their end) are compared with the baseline's by the throughput comparison's rule, with
``throughput_tolerance``: the ratio of the geometric means, a minority of slow runs set aside, the
single-run rule and one run against one run deciding only beyond 4x (:mod:`gates.run_ratio`), and the
comparison is one more of the gate's Holm family. So a bound hit in a minority of runs (one slow run of
three) is not alone a REJECT. Only two ways reject:

- the rate is below ``1 - throughput_tolerance`` beyond noise (Holm rejects "no change" for it), or
- the bound stopped a **majority** of the candidate's runs (two or more, more than half) and their rate
  is below ``1 - throughput_tolerance``: measuring again gives the same (resume does not measure a
  stopped run again), so this needs no interval.

A majority stopped at a rate within the tolerance (a baseline that finished just inside the bound) is
no regression.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from contracts.metrics import fmt_ratio
from contracts.sweepdir import Repeat
from contracts.verdicts import Comparison
from gates.compare import Measured, Planned, estimated, fmt_interval, judge_requirement, summary_evidence
from gates.evidence import finished_in_time, unfinished
from gates.registry import GateContext
from gates.run_ratio import RunValues, guarded_ratio, without_slow_runs

UNIT = "req/s"
METRIC = "request_rate"


def _fmt(value: float) -> str:
    return f"{value:.3g} {UNIT}"


def run_rate(rep: Repeat) -> float:
    """Requests completed per second of one run (host seconds). A run that ran to its end: its completed
    requests over its measured window (``duration_s``, first send to last end). A run the time bound
    stopped: its completed requests over the time from its first measured send to the bound
    (``time_limit_s`` x ``time_scale``; its ``duration_s`` ends at its last completion, which would
    flatter a run that stalled), never less than its ``duration_s``; a summary without its settings
    (written before they were recorded) falls back to ``duration_s``."""
    s = rep.summary
    window = s.duration_s
    if s.time_bound and s.settings is not None:
        first = min((r.sent_s for r in rep.records), default=0.0)
        window = max(window, s.settings.workload.time_limit_s * s.time_scale - first)
    return s.completed / window if window > 0 else 0.0


def stopped_profiles(ctx: GateContext) -> list[str]:
    """The profiles where the time bound stopped a candidate's run and the baseline finished every run."""
    return [
        profile
        for profile, reps in ctx.candidate.profiles.items()
        if any(rep.summary.time_bound for rep in reps) and finished_in_time(ctx.baseline, profile)
    ]


@dataclass(frozen=True)
class _Rates:
    """One profile's runs the rate comparison reads, and what its message says of them."""

    profile: str
    candidate: RunValues
    baseline: RunValues
    stopped: tuple[Repeat, ...]  # the candidate's runs the bound stopped
    longest: float  # the baseline's longest run (s)
    evidence: tuple[Repeat, ...]

    @property
    def majority(self) -> bool:
        """The bound stopped two runs or more, more than half of the candidate's runs."""
        k = len(self.stopped)
        return k >= 2 and 2 * k > len(self.candidate.values)


def _rates(ctx: GateContext, profile: str) -> _Rates:
    # the candidate's runs that ran to their end or that the bound stopped (not those a lost server cut)
    cand = [r for r in ctx.candidate.repeats(profile) if r.summary.time_bound or not r.summary.interrupted]
    base = ctx.baseline.samples(profile)
    return _Rates(
        profile=profile,
        candidate=RunValues(
            "candidate", tuple(f"r{r.summary.repeat}" for r in cand), tuple(run_rate(r) for r in cand)
        ),
        baseline=RunValues(
            "baseline", tuple(f"r{r.summary.repeat}" for r in base), tuple(run_rate(r) for r in base)
        ),
        stopped=tuple(r for r in cand if r.summary.time_bound),
        longest=max(r.summary.duration_s for r in base),
        evidence=(*cand, *base),
    )


def _stopped_text(profile: str, stopped: Sequence[Repeat]) -> str:
    """``decode_heavy r1 did not finish 20 of 64 request(s) within its time bound (600 s)``; several runs:
    ``decode_heavy: its time bound (600 s) stopped r0 (20 of 64 request(s) unfinished), r2 (...)``."""
    if len(stopped) == 1:
        return f"{profile} r{stopped[0].summary.repeat} {unfinished(stopped[0].summary)}"
    settings = stopped[0].summary.settings
    limit = f" ({settings.workload.time_limit_s:g} s)" if settings is not None else ""
    runs = ", ".join(
        f"r{r.summary.repeat} ({r.summary.num_requests - r.summary.completed} of {r.summary.num_requests} "
        "request(s) unfinished)"
        for r in stopped
    )
    return f"{profile}: its time bound{limit} stopped {runs}"


def _gmean(values: Sequence[float]) -> float:
    if any(v <= 0 for v in values):
        return 0.0
    return math.exp(statistics.fmean(math.log(v) for v in values))


def rate_comparison(rates: _Rates, tolerance: float, confidence: float) -> Measured:
    """The candidate's requests completed per second against the baseline's, at ``confidence`` (a Holm
    step's), judged with the throughput tolerance."""
    c, c_note = without_slow_runs(rates.candidate, "lower", _fmt)
    b, b_note = without_slow_runs(rates.baseline, "lower", _fmt)
    est = guarded_ratio(c.values, b.values, confidence=confidence, statistic="requests/s")
    c_val, b_val = _gmean(c.values), _gmean(b.values)
    runs = len(rates.baseline.values)
    notes = "".join(f"; {n}" for n in (est.note, c_note, b_note) if n)
    message = (
        f"{rates.profile} requests completed per second {_fmt(c_val)} vs {_fmt(b_val)} "
        f"({fmt_ratio(est.ratio)}, {fmt_interval(est)}; {len(c.values)} vs {len(b.values)} runs; "
        f"{_stopped_text(rates.profile, rates.stopped)}; the baseline finished each of its {runs} run(s) in "
        f"time (the longest in {rates.longest:.3g} s){notes})"
    )
    comparison = estimated(
        est,
        lambda e: judge_requirement(e, "higher", tolerance),
        metric=METRIC,
        profile=rates.profile,
        values=(c_val, b_val),
        counts=(len(c.values), len(b.values)),
        unit=UNIT,
        message=message,
    )
    return Measured(comparison, est, summary_evidence(rates.evidence))


def time_bound_comparisons(ctx: GateContext) -> tuple[list[Planned], list[Comparison], list[str]]:
    """The time bound's rate comparisons: (those to measure in the gate's Holm family, the majority
    findings that need no statistics, the profiles either covers)."""
    tolerance, confidence = ctx.cfg.throughput_tolerance, ctx.cfg.confidence
    planned: list[Planned] = []
    findings: list[Comparison] = []
    profiles = stopped_profiles(ctx)
    for profile in profiles:
        rates = _rates(ctx, profile)
        if rates.majority:
            at_level = rate_comparison(rates, tolerance, confidence).comparison
            if at_level.ratio is not None and at_level.ratio < 1 - tolerance:
                runs = len(rates.candidate.values)
                why = (
                    f"; the time bound stopped {len(rates.stopped)} of {runs} runs, a majority, at a rate "
                    f"below {fmt_ratio(1 - tolerance)} (1 - throughput_tolerance): measuring again gives "
                    "the same"
                )
                findings.append(
                    at_level.model_copy(
                        update={
                            "status": "fail",
                            "threshold": 1 - tolerance,
                            "more_repeats": None,
                            "message": at_level.message + why,
                        }
                    )
                )
                continue
        planned.append(Planned("higher", partial(rate_comparison, rates, tolerance)))
    return planned, findings, profiles

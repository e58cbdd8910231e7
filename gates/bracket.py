"""A regression must show against the baseline measured on both sides of the candidate in time.

Pipeline position: after Holm's procedure in the concurrency gate
(:func:`gates.concurrency.loaded_measurements`), on every comparison that failed. A sweep measures the
baseline's opening repeats, then the candidate, then (``run.interleave``) the baseline again in a block right
after it (``blocks/after-<candidate>/``). The comparisons read the opening repeats only
(:class:`contracts.sweepdir.Results`: an adaptive look judged before the block existed). When the host drifts
between measurements, the candidate's runs, measured one block after the opening, carry a shift of the host
that the opening's spread does not show (the runs of one side share their stretch of the drift), and Welch's
interval reads that shift as the configuration's.

The block after the candidate is the baseline measured again at the candidate's end; how far its runs moved
from the opening is the host's drift seen by the baseline itself (:func:`host_shift`: each block run's output
tokens/s against the geometric mean of its profile's opening repeats; the shift **all of the block's runs
agree on**, the smallest in size when they move the same way, none when they disagree; a run beyond 2x of its
opening is an outlier run and left out, so slow outlier runs in the block are not taken for drift). The
candidate measured between the two baseline measurements is judged against both: a failed comparison (beyond
the tolerance, and beyond noise against the opening) stays failed only when, against the baseline at the
block's speed (:func:`bracket_ratio`), the candidate is still worse beyond the tolerance
(:func:`bracket_holds`); else it is ``inconclusive``, "within the host's drift", and more repeats do not
settle it (a quieter host or more interleaved blocks do). Tokens/s (and the time bound's requests/s) scale
with the host's speed, TTFT with its inverse. The interval against both ends (:func:`bracket_interval`) is in
the message. Why materiality and not the interval: a first version asked the widened interval to exclude no
change, and on the decision-quality benchmark it cost more true rejects (regressions of 10-20% with a wide
interval at an adaptive look) than it spared false ones (docs/measurements/decision-quality.md, "The drift
bracket").

Without a block after the candidate (``run.interleave: false``, an adaptive look, a block that measured no
opening profile) nothing changes. The rule never makes a comparison fail and never touches a gain: it only
asks more of a REJECT.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from contracts.metrics import Better, fmt_ratio, geometric_mean
from contracts.sweepdir import Results
from gates.compare import Measured


@dataclass(frozen=True)
class HostShift:
    """The baseline's block after a candidate against its opening repeats: the block's speed."""

    speed: float  # block output tokens/s / opening's (< 1: the host slowed down after the opening)
    runs: int  # block runs it rests on
    block: str  # the block's directory (relative to the sweep)


#: A block run more than this factor from its opening is an outlier run (the set-aside rule's 2x,
#: :mod:`gates.set_aside`), not the host's drift: two 3x-slow runs in one block are not a host at 0.4x.
OUTLIER_FACTOR = 2.0


def agreed_shift(ratios: Sequence[float]) -> float:
    """The shift every one of ``ratios`` (later / opening, each > 0) agrees on: the one closest to 1 when
    all lie on the same side of 1, else 1 (no drift all of them show). A ratio beyond ``OUTLIER_FACTOR``
    either way is an outlier run and left out; none left: 1."""
    if any(not (r > 0 and math.isfinite(r)) for r in ratios):
        return 1.0
    logs = [math.log(r) for r in ratios if abs(math.log(r)) <= math.log(OUTLIER_FACTOR)]
    if logs and (all(v > 0 for v in logs) or all(v < 0 for v in logs)):
        return math.exp(min(logs, key=abs))
    return 1.0


def host_shift(baseline: Results, candidate: str) -> HostShift | None:
    """The host's drift as the baseline's block right after ``candidate`` saw it (output tokens/s of each
    block run against the geometric mean of the opening repeats of its profile), or None without such a
    block or without a profile both measured."""
    after = [b for b in baseline.blocks if b.run is not None and b.run.follows == candidate]
    if not after:
        return None
    block = after[-1]
    ratios: list[float] = []
    for profile in block.profiles:
        opening = geometric_mean([float(r.summary.output_tps) for r in baseline.samples(profile)])
        if opening is None or not math.isfinite(opening) or opening <= 0:
            continue
        ratios += [float(r.summary.output_tps) / opening for r in block.samples(profile)]
    if not ratios:
        return None
    return HostShift(agreed_shift(ratios), len(ratios), block.root)


def bracket_interval(interval: tuple[float, float], better: Better, speed: float) -> tuple[float, float]:
    """The interval of candidate / baseline widened to also cover candidate / (the baseline at ``speed``
    of its opening's): a higher-is-better metric (tokens/s) divides by the speed, a lower-is-better one
    (latency) multiplies by it."""
    low, high = interval
    factor = 1 / speed if better == "higher" else speed
    return (min(low, low * factor), max(high, high * factor))


def bracket_ratio(ratio: float, better: Better, speed: float) -> float:
    """candidate / (the baseline at ``speed`` of its opening's): tokens/s divided by the speed, a latency
    multiplied by it."""
    return ratio / speed if better == "higher" else ratio * speed


def bracket_holds(ratio: float, threshold: float, better: Better, speed: float) -> bool:
    """Whether a failed comparison (``ratio`` beyond ``threshold``, the ratio a change is material beyond)
    is still beyond it against the baseline at the block's ``speed``: the candidate materially worse than
    the baseline before it **and** after it."""
    after = bracket_ratio(ratio, better, speed)
    return after < threshold if better == "higher" else after > threshold


def within_drift(measured: Sequence[Measured], shift: HostShift | None) -> list[Measured]:
    """The failed comparisons of a requirement family whose failure the host's drift could explain,
    made ``inconclusive``; the others as they were."""
    if shift is None or shift.speed == 1.0:
        return list(measured)
    out: list[Measured] = []
    for m in measured:
        c = m.comparison
        if c.status != "fail" or c.interval is None or c.ratio is None or c.threshold is None:
            out.append(m)
            continue
        better: Better = "higher" if c.ratio < 1 else "lower"  # a failure lies on the worse side
        if bracket_holds(c.ratio, c.threshold, better, shift.speed):
            out.append(m)
            continue
        low, high = bracket_interval(c.interval, better, shift.speed)
        why = (
            f"; within the host's drift: the baseline's block after the candidate ({shift.block}, "
            f"{shift.runs} run(s)) ran at {fmt_ratio(shift.speed)} of its opening tokens/s; against it the "
            f"candidate is {fmt_ratio(bracket_ratio(c.ratio, better, shift.speed))}, not worse beyond the "
            f"tolerance ({fmt_ratio(c.threshold)}), and against the baseline at both ends the interval is "
            f"[{fmt_ratio(low)}, {fmt_ratio(high)}] (more repeats do not settle a drift; a quieter host or "
            "more interleaved blocks do)"
        )
        update = {"status": "inconclusive", "message": c.message + why, "more_repeats": None, "settle": None}
        comparison = c.model_copy(update=update)
        out.append(replace(m, comparison=comparison))
    return out

"""Outlier runs: which slow runs of a side a comparison sets aside, and only toward "no change".

Pipeline position: pure helpers of :func:`gates.compare.throughput` and :func:`gates.compare.latency` (and
of :mod:`gates.run_ratio`, :mod:`gates.confirm`, :mod:`gates.quiet`, which read the same factor). A host
makes runs slower, never faster, so a side's slow minority of runs (:func:`set_aside_runs`) is set aside
before two sides are compared, and the message says which. A run set aside can only weaken a claim, never
make one (:func:`without_outliers`): a slow *baseline* run set aside makes the baseline look better, and
where the candidate already looks worse that moves the comparison away from "no change" (a false REJECT:
on a loaded machine the simulator's decode_heavy TTFT is bimodal, one prefill wave apart, and with the
baseline's one slow-mode run set aside three fast-mode runs against the candidate's three slow-mode ones
read 2.34x at one-sided p 0.00073; with it kept, p 0.013, no rejection at Holm's level). So each side's
set-aside is applied only when it moves the ratio of the two sides' geometric means toward 1, and a
set-aside left out is said in the message.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from contracts.metrics import Better, fmt_ratio, fmt_value, geometric_mean
from contracts.sweepdir import Repeat
from contracts.verdicts import SetAside

Party = Literal["candidate", "baseline"]

#: A run more than this factor slower than the median of its side's other runs is set aside (a minority
#: of the side's runs at most: one of 3 or 4, two of 5 or 6; only when the runs left agree within the
#: factor): one run in ten 2-3x slower (a cold burst, a busy host; issue 21) is not the configuration,
#: while the prefill-wave clusters of loaded TTFT (up to 1.7x between runs of one configuration) stay in.
#: Only slow runs: a host makes runs slower, never faster, and with two slow runs among three the fast
#: one is the odd one out but the true one (setting it aside kept 4 of 20 identical candidates in the
#: benchmark). Two slow runs of five (8% of sides under one-in-ten outliers) widened the interval so
#: much that 15% gains ended inconclusive at 5 repeats per side (issue 21).
SET_ASIDE_FACTOR = 2.0


def set_aside_runs(
    values: Sequence[float], slow: Better = "higher", factor: float = SET_ASIDE_FACTOR
) -> list[int]:
    """The indices of a side's slow outlier runs to set aside (ascending), or none. ``slow``: which way a
    slow run moves the value (latencies ``higher``, tokens/s ``lower``). The fewest slowest runs, at most
    ``(n - 1) // 2`` of them, such that the runs left agree within ``factor`` and each run set aside is
    beyond ``factor`` from their median.

    >>> set_aside_runs([0.40, 0.41, 0.39, 1.2, 1.25]), set_aside_runs([0.40, 0.41, 1.2, 1.25])
    ([3, 4], [])
    """
    n = len(values)
    if n < 3 or any(not (v > 0 and math.isfinite(v)) for v in values):
        return []
    logs = np.log(np.asarray(values, dtype=np.float64)) * (1.0 if slow == "higher" else -1.0)
    order = [int(i) for i in np.argsort(-logs, kind="stable")]  # slowest first
    limit = math.log(factor)
    for k in range(1, (n - 1) // 2 + 1):
        aside, rest = order[:k], order[k:]
        kept = logs[rest]
        centre = float(np.median(kept))
        if float(kept.max() - kept.min()) <= limit and all(logs[i] - centre > limit for i in aside):
            return sorted(aside)
    return []


def set_aside(
    values: Sequence[float], slow: Better = "higher", factor: float = SET_ASIDE_FACTOR
) -> int | None:
    """The index of the one slow run of a side to set aside (:func:`set_aside_runs` when it sets aside
    exactly one), or None.

    >>> set_aside([0.40, 0.41, 1.25]), set_aside([0.40, 0.41, 0.62]), set_aside([0.4, 1.2])
    (2, None, None)
    >>> set_aside([0.40, 1.20, 1.25]), set_aside([9000.0, 3000.0, 9100.0], "lower")   # only a slow run
    (None, 1)
    """
    runs = set_aside_runs(values, slow, factor)
    return runs[0] if len(runs) == 1 else None


def _described(
    side: Party,
    repeats: Sequence[Repeat],
    values: Sequence[float],
    aside: Sequence[int],
    unit: str,
    *,
    centre: float,
) -> str:
    """ "baseline run r2 (1.64 s, 2.13x the others' median)": the runs ``aside`` of one side, ``centre`` the
    median of its other runs."""
    runs = ", ".join(
        f"r{repeats[k].summary.repeat} ({fmt_value(values[k], unit)}, {fmt_ratio(values[k] / centre)} the "
        "others' median)"
        for k in aside
    )
    return f"{side} run{'s' if len(aside) > 1 else ''} {runs}"


def _central(values: Sequence[float]) -> float | None:
    finite = [v for v in values if v > 0 and math.isfinite(v)]
    return geometric_mean(finite) if finite and len(finite) == len(values) else None


def _toward_no_change(before: float | None, after: float | None) -> bool:
    """Whether a set-aside moves the ratio of the sides' centres toward 1 (or leaves it where it is). With
    a side whose centre is unknown (a censored or failed run), the set-aside is applied as before."""
    if before is None or after is None:
        return True
    return abs(math.log(after)) <= abs(math.log(before)) + 1e-12


def without_outliers(
    sides: tuple[Sequence[Repeat], Sequence[Repeat]],
    values_of: Callable[[Sequence[Repeat]], list[float]],
    unit: str,
) -> tuple[tuple[list[Repeat], list[Repeat]], list[str], list[SetAside]]:
    """Both sides (candidate, baseline) with their slow outlier runs set aside where that moves the
    comparison toward "no change" (:func:`_toward_no_change`); the notes the message carries (a set-aside
    made, or one left out and why) and the runs set aside. ``values_of``: each repeat's value (its
    median latency, or its tokens/s for ``unit`` "tok/s", where a slow run is a low one)."""
    slow: Better = "lower" if unit == "tok/s" else "higher"
    values = (values_of(sides[0]), values_of(sides[1]))
    proposed = (set_aside_runs(values[0], slow), set_aside_runs(values[1], slow))
    centres = (_central(values[0]), _central(values[1]))
    before = centres[0] / centres[1] if centres[0] is not None and centres[1] is not None else None
    kept_sides: list[list[Repeat]] = []
    notes: list[str] = []
    aside: list[SetAside] = []
    parties: tuple[Party, Party] = ("candidate", "baseline")
    for k, party in enumerate(parties):
        repeats, vals, runs = sides[k], values[k], proposed[k]
        if not runs:
            kept_sides.append(list(repeats))
            continue
        rest = [v for i, v in enumerate(vals) if i not in runs]
        moved = list(centres)
        moved[k] = _central(rest)
        after = moved[0] / moved[1] if moved[0] is not None and moved[1] is not None else None
        what = "one outlier run" if len(runs) == 1 else f"{len(runs)} outlier runs of {len(vals)}"
        centre = float(np.median(rest))
        described = _described(party, repeats, vals, runs, unit, centre=centre)
        if not _toward_no_change(before, after):
            kept_sides.append(list(repeats))
            notes.append(
                f"{described} kept, though {what} (beyond {SET_ASIDE_FACTOR:g}x): setting "
                f"{'it' if len(runs) == 1 else 'them'} aside would move the ratio away from no change"
            )
            continue
        for i in runs:
            factor = (centre / vals[i]) if unit == "tok/s" else (vals[i] / centre)
            aside.append(SetAside(side=party, repeat=repeats[i].summary.repeat, value=vals[i], factor=factor))
        kept_sides.append([r for i, r in enumerate(repeats) if i not in runs])
        notes.append(f"{described} set aside as {what} (beyond {SET_ASIDE_FACTOR:g}x)")
    return (kept_sides[0], kept_sides[1]), notes, aside

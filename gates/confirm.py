"""Confirmation runs: which profiles' runs disagree so that more runs, not a rule, must say which are the
outliers.

Pipeline position: between the load runner and the gates. After a launch's fixed repeats (the baseline's
opening, a candidate with fixed repeats) the sweep asks :func:`to_confirm` which profiles need one more
run (:mod:`orchestrator.measure.candidate`), measures it, and asks again, up to ``run.confirm_runs``
more runs per profile. The gates then read every run on disk; a minority of slow runs is set aside there
(:func:`gates.set_aside.set_aside_runs`).

Why: one run in ten 2-3x slower (a cold burst, a busy host; issue 21) is set aside when it is one of
three. When two of three runs of a profile are slow, no rule on those three can tell them from a real 3x
change of the configuration (on a candidate, a regression; on the baseline, a candidate 3x better), so
its comparisons stay undecided and a 15% gain is not kept. Two more runs usually make the slow ones a
minority of five, which the gates set aside; a real 3x change is slow in every run and never disagrees,
so it costs nothing. Pure: reads the runs already loaded.

    >>> disagree([9800.0, 3300.0, 3200.0], "lower"), disagree([9800.0, 9700.0, 3200.0], "lower")
    (True, False)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from contracts.metrics import Better, e2e_value, fmt_value, ttft_value
from contracts.sweepdir import Repeat, Results
from gates.compare import run_medians
from gates.set_aside import SET_ASIDE_FACTOR, set_aside_runs

#: The run-level figures the gates compare: name, which way a slow run moves it, unit, each run's value.
FIGURES: tuple[tuple[str, Better, str, Callable[[Sequence[Repeat]], list[float]]], ...] = (
    ("output tokens/s", "lower", "tok/s", lambda reps: [float(r.summary.output_tps) for r in reps]),
    ("median TTFT", "higher", "s", lambda reps: run_medians(reps, ttft_value)),
    ("median request latency", "higher", "s", lambda reps: run_medians(reps, e2e_value)),
)


def disagree(values: Sequence[float], slow: Better, factor: float = SET_ASIDE_FACTOR) -> bool:
    """A side's runs of one figure spread beyond ``factor`` and no minority of slow runs explains it
    (:func:`gates.set_aside.set_aside_runs` sets none aside): another run can tell which are the outliers.
    Fewer than two runs, or a censored or zero value (a failure is evidence, not noise): never.

    >>> disagree([0.40, 0.41, 1.25], "higher"), disagree([0.40, 1.2, 1.25], "higher")
    (False, True)
    >>> disagree([0.40, 0.62, 0.5], "higher"), disagree([0.4, 1.2], "higher"), disagree([0.4], "higher")
    (False, True, False)
    """
    if len(values) < 2 or any(not (v > 0 and math.isfinite(v)) for v in values):
        return False
    if max(values) / min(values) <= factor:
        return False
    return not set_aside_runs(values, slow, factor)


@dataclass(frozen=True)
class Disagreement:
    """A profile whose runs disagree: the figure that shows it and the runs' values."""

    profile: str
    figure: str
    values: tuple[float, ...]
    unit: str
    next_repeat: int  # the number of the run that confirms it (one past the highest on disk)
    set_aside: bool = False  # the runs agree once slow outliers are set aside, but too few are left

    def message(self) -> str:
        runs = "/".join(fmt_value(v, self.unit) for v in self.values)
        if self.set_aside:
            return (
                f"{self.profile}: {self.figure} of its {len(self.values)} runs {runs}: a slow outlier run "
                f"(beyond {SET_ASIDE_FACTOR:g}x) is set aside, one more run replaces it"
            )
        return (
            f"{self.profile}: {self.figure} of its {len(self.values)} runs {runs} disagree beyond "
            f"{SET_ASIDE_FACTOR:g}x and no minority of slow runs explains it"
        )


def disagreement(profile: str, repeats: Sequence[Repeat], wanted: int = 0) -> Disagreement | None:
    """The first figure whose runs of ``profile`` disagree (:func:`disagree`), or whose slow outlier runs,
    once set aside (:func:`gates.set_aside.set_aside_runs`), leave fewer than ``wanted`` runs to compare;
    None if neither. Interrupted runs are left to the evidence check (``incomplete``), not confirmed."""
    if not repeats or any(rep.summary.interrupted for rep in repeats):
        return None
    following = max(rep.summary.repeat for rep in repeats) + 1
    for name, slow, unit, of in FIGURES:
        values = of(repeats)
        if len(values) < len(repeats):  # a run with no measured request: evidence, not noise
            continue
        if disagree(values, slow):
            return Disagreement(profile, name, tuple(values), unit, following)
        if len(values) - len(set_aside_runs(values, slow)) < wanted:
            return Disagreement(profile, name, tuple(values), unit, following, set_aside=True)
    return None


def to_confirm(results: Results, profiles: Sequence[str], *, repeats: int, extra: int) -> list[Disagreement]:
    """The profiles of ``results`` (a launch measured with ``repeats`` fixed repeats) that need one more
    run (:func:`disagreement`: their runs disagree, or a slow outlier set aside leaves fewer than
    ``repeats``) and have fewer than ``repeats + extra`` runs. A profile with fewer runs than ``repeats``
    (its own ``repeats``, the answer gate's 1; or a lost server) is not confirmed.
    """
    out: list[Disagreement] = []
    for profile in profiles:
        reps = results.repeats(profile)
        if not repeats <= len(reps) < repeats + extra:
            continue
        found = disagreement(profile, reps, repeats)
        if found is not None:
            out.append(found)
    return out

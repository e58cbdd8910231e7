"""Accuracy on the labelled set in the report: each candidate's accuracy and its non-inferiority bound.

Pipeline position: part of the report model (:mod:`report.model`), built from ``verdicts.json`` alone. The
answer-accuracy gate (:mod:`gates.answer_accuracy`) records, per candidate, the accuracy of both sides on
the items it paired and the interval of the paired drop (:attr:`contracts.verdicts.Comparison.drop_interval`);
here they become a line per candidate, so the console and report.md say the figure and its bound without
the reader opening the gate's message::

    accuracy on the labelled set (profile accuracy; non-inferior when the drop's upper bound is at most 2
    points): baseline 93.3% (300 items); spec_probabilistic 75.0%, drop +18.3 points, upper bound +23.1:
    worse than allowed; tp4_dp2 93.3%, drop +0.0, upper bound +1.3: non-inferior
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from contracts.verdicts import GateStatus, SweepVerdict

#: The gate and comparison the lines are read from.
ACCURACY_METRIC = "answer_accuracy"

#: What each status says of the bound, in words.
VERDICT_WORDS: dict[GateStatus, str] = {
    "pass": "non-inferior",
    "fail": "worse than allowed",
    "inconclusive": "not shown (a larger set would settle it)",
    "not_run": "not judged",
}


class AccuracyLine(BaseModel):
    """One candidate's accuracy on the labelled set against the baseline's, on the items both were
    scored on (fractions; the drop is baseline minus candidate)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    candidate: str
    profile: str
    items: int  # items scored on both sides
    accuracy: float
    baseline: float
    drop_low: float
    drop_high: float  # the upper bound the rule compares with the tolerance
    tolerance: float
    status: GateStatus

    @property
    def drop(self) -> float:
        return self.baseline - self.accuracy


def accuracy_lines(verdicts: SweepVerdict) -> list[AccuracyLine]:
    """A line per candidate whose answer-accuracy comparison recorded its drop's interval, in the
    verdicts' order; none when no candidate was judged on a labelled set."""
    out: list[AccuracyLine] = []
    for verdict in verdicts.verdicts:
        for gate in verdict.gates:
            for c in gate.comparisons:
                if c.metric != ACCURACY_METRIC or c.drop_interval is None:
                    continue
                if c.observed is None or c.baseline is None or c.threshold is None:
                    continue
                out.append(
                    AccuracyLine(
                        candidate=verdict.candidate,
                        profile=c.profile,
                        items=c.n_candidate,
                        accuracy=c.observed,
                        baseline=c.baseline,
                        drop_low=c.drop_interval[0],
                        drop_high=c.drop_interval[1],
                        tolerance=c.baseline - c.threshold,
                        status=c.status,
                    )
                )
    return out


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def _points(x: float) -> str:
    return f"{x * 100:+.1f}"


def _tolerance(lines: Sequence[AccuracyLine]) -> str:
    tolerances = sorted({round(line.tolerance * 100, 6) for line in lines})
    return " or ".join(f"{t:g}" for t in tolerances)


def candidate_words(line: AccuracyLine, *, own_baseline: bool = False) -> str:
    """``spec_probabilistic 75.0%, drop +18.3 points, upper bound +23.1: worse than allowed``;
    ``own_baseline``: the baseline's accuracy on this candidate's items is said too (the candidates were
    scored on different items)."""
    against = f" vs {_pct(line.baseline)} on {line.items} items" if own_baseline else ""
    return (
        f"{line.candidate} {_pct(line.accuracy)}{against}, drop {_points(line.drop)} points, upper bound "
        f"{_points(line.drop_high)}: {VERDICT_WORDS[line.status]}"
    )


def terminal_accuracy(lines: Sequence[AccuracyLine], baseline: str, width: int) -> list[str]:
    """The console's accuracy line(s), a paragraph per labelled profile; none without a judged line."""
    out: list[str] = []
    for profile in dict.fromkeys(line.profile for line in lines):
        these = [line for line in lines if line.profile == profile]
        base = these[0]
        same = all((line.baseline, line.items) == (base.baseline, base.items) for line in these)
        parts = [f"{baseline} {_pct(base.baseline)} ({base.items} items)"] if same else []
        parts += [candidate_words(line, own_baseline=not same) for line in these]
        out += textwrap.wrap(
            f"accuracy on the labelled set (profile {profile}; non-inferior when the drop's upper bound is "
            f"at most {_tolerance(these)} points): {'; '.join(parts)}",
            width,
            break_on_hyphens=False,
        )
    return out


#: What report.md says under the table.
SECTION_NOTE = (
    "Non-inferiority on the items both sides were scored on: a candidate passes when the upper bound of its "
    "accuracy drop (Tango's score interval for paired proportions) is at most the tolerance "
    "(gates.accuracy.tolerance), and fails when the lower bound is above it (docs/accuracy-and-cost.md)."
)


def accuracy_table(
    lines: Sequence[AccuracyLine], baseline: str, confidence: float
) -> tuple[list[str], list[list[str]]]:
    """report.md's table: a row per candidate with both accuracies, the drop, its interval and the
    tolerance it is held to (header, rows)."""
    header = ["candidate", "profile", "items", "accuracy", baseline, "drop (points)",
              f"{confidence:.0%} interval of the drop", "tolerance (points)", "verdict"]  # fmt: skip
    rows = [
        [
            line.candidate,
            line.profile,
            str(line.items),
            _pct(line.accuracy),
            _pct(line.baseline),
            _points(line.drop),
            f"[{_points(line.drop_low)}, {_points(line.drop_high)}]",
            f"{line.tolerance * 100:g}",
            VERDICT_WORDS[line.status],
        ]
        for line in lines
    ]
    return header, rows

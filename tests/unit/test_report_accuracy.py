"""The report's accuracy line (report.accuracy): each candidate's accuracy on the labelled set with its
non-inferiority bound, read from verdicts.json's answer-accuracy comparisons, on the console and in
report.md."""

from __future__ import annotations

import pytest

from contracts.verdicts import Comparison, DriftResult, GateResult, GateStatus, SweepVerdict, Verdict
from report.accuracy import AccuracyLine, accuracy_lines, accuracy_table, terminal_accuracy


def _verdict(name: str, comparisons: list[Comparison]) -> Verdict:
    gate = GateResult(
        gate="answer_accuracy", role="requirement", status="pass", message="m", comparisons=comparisons
    )
    return Verdict(candidate=name, decision="keep", reason="r", gates=[gate])


def _accuracy(
    observed: float,
    baseline: float,
    drop: tuple[float, float] | None,
    status: GateStatus = "pass",
    n: int = 300,
) -> Comparison:
    return Comparison(
        metric="answer_accuracy",
        profile="accuracy",
        status=status,
        observed=observed,
        baseline=baseline,
        threshold=baseline - 0.02,
        n_candidate=n,
        n_baseline=n,
        drop_interval=drop,
    )


def _sweep(*verdicts: Verdict) -> SweepVerdict:
    return SweepVerdict(
        baseline="base",
        retained="base",
        retained_reason="r",
        drift=DriftResult(status="pass", message="m"),
        verdicts=list(verdicts),
    )


@pytest.mark.parametrize(
    ("comparisons", "expected"),
    [
        # A judged comparison: one line, the tolerance taken back from the threshold.
        ([_accuracy(0.75, 0.933, (0.144, 0.231), "fail")], [("fail", 0.02, 0.231)]),
        # Recorded before drop_interval existed, or not judged (no interval): no line, nothing invented.
        ([_accuracy(0.75, 0.933, None)], []),
        # Another metric of the same gate (greedy agreement) is not an accuracy line.
        (
            [
                Comparison(
                    metric="greedy_agreement", profile="accuracy", status="pass", observed=1.0, baseline=1.0
                )
            ],
            [],
        ),
    ],
)
def test_lines_come_from_the_recorded_drop_interval(
    comparisons: list[Comparison], expected: list[tuple[str, float, float]]
) -> None:
    lines = accuracy_lines(_sweep(_verdict("c", comparisons)))
    assert [(x.status, round(x.tolerance, 6), x.drop_high) for x in lines] == expected


def _line(  # noqa: PLR0917  (one argument per column of the table)
    name: str, acc: float, base: float, high: float, status: GateStatus, items: int = 300
) -> AccuracyLine:
    return AccuracyLine(
        candidate=name,
        profile="accuracy",
        items=items,
        accuracy=acc,
        baseline=base,
        drop_low=high - 0.05,
        drop_high=high,
        tolerance=0.02,
        status=status,
    )


@pytest.mark.parametrize(
    ("lines", "fragments"),
    [
        (
            [_line("spec", 0.75, 0.9333, 0.231, "fail"), _line("tp4", 0.9333, 0.9333, 0.013, "pass")],
            [
                "accuracy on the labelled set (profile accuracy; non-inferior when the drop's upper bound "
                "is at most 2 points): base 93.3% (300 items); spec 75.0%, drop +18.3 points, upper bound "
                "+23.1: worse than allowed; tp4 93.3%, drop +0.0 points, upper bound +1.3: non-inferior"
            ],
        ),
        # Candidates scored on different items: the baseline's accuracy is said per candidate.
        (
            [_line("a", 0.9, 0.92, 0.04, "inconclusive", 290), _line("b", 0.93, 0.93, 0.01, "pass")],
            [
                "a 90.0% vs 92.0% on 290 items, drop +2.0 points, upper bound +4.0: not shown",
                "b 93.0% vs 93.0%",
            ],
        ),
    ],
)
def test_the_console_line_says_each_accuracy_and_its_bound(
    lines: list[AccuracyLine], fragments: list[str]
) -> None:
    text = " ".join(terminal_accuracy(lines, "base", 10_000))
    assert all(f in text for f in fragments), text
    assert terminal_accuracy([], "base", 120) == []


def test_the_table_has_a_row_per_candidate_with_the_interval() -> None:
    header, rows = accuracy_table([_line("spec", 0.75, 0.9333, 0.231, "fail")], "base", 0.95)
    assert header[4] == "base" and header[6] == "95% interval of the drop"
    assert rows == [
        ["spec", "accuracy", "300", "75.0%", "93.3%", "+18.3", "[+18.1, +23.1]", "2", "worse than allowed"]
    ]

"""The search's figures against the constrained truth, and the issue's goals (issue 43, item 9). Pure.

Pipeline position: under the driver (``benchmarks/search_quality.py``), over the runs of
:mod:`benchmarks.search.runner`. A seed's **answer** is its recommendation: the
finalists the budget holds (the first round: ``confirm_top`` of ``finalists()``, best first) are
confirmed, and the best one the gates accept is recommended (:func:`recommended`; the confirmation's gates
are taken to rule as the constrained truth does, noise-free); the baseline's own configuration when the
search says it is the best found. It is **found** when it is within 5% of the best acceptable point's
capacity. **Launches** are the
search's trials' plus the confirmations its first round takes (``confirm_top``, or fewer finalists): what
a user pays before the first verdict. The goals, on every space: at least 9 of 10 seeds found with at most
10% of the space launched (every seed), and at least 2x fewer launches than random search at equal
quality: the budget at which random search first finds at least 90% of the seeds is at least twice
TPE's (:mod:`benchmarks.search.ladder`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from benchmarks.search.ladder import REACH_SHARE, Ratio
from benchmarks.search.scoring import WITHIN, num

#: The issue's goals: the share of seeds found, the share of the space launched, the launches ratio.
GOAL_FOUND, GOAL_LAUNCHED, GOAL_RATIO = 0.9, 0.10, 2.0


@dataclass(frozen=True)
class Answer:
    """One seed's search judged: its answer's accepted capacity (None: no finalist the gates accept) and
    the launches it spent."""

    seed: int
    point: str  # the answer in one line ("-": none)
    accepted: float | None
    refused: bool  # the search's first finalist is one the gates refuse (its screen let it through)
    trial_launches: int
    confirm_launches: int
    stopped: str

    @property
    def launches(self) -> int:
        return self.trial_launches + self.confirm_launches


def charged(trial_launches: int, finalists: int, confirm_top: int, each: int = 1) -> tuple[int, int]:
    """The launches a seed is charged at equal budget: its trials' launches and the first round of
    confirmations (``confirm_top`` of the finalists, fewer when fewer were found; none without one), each
    at ``each`` launches (:func:`orchestrator.search.budget.confirmation_launches`: with the baseline's
    interleaved block after it, 2).

    >>> charged(46, 5, 2), charged(40, 1, 2), charged(30, 0, 2), charged(44, 5, 2, each=2)
    ((46, 2), (40, 1), (30, 0), (44, 4))
    """
    return trial_launches, min(max(0, confirm_top), finalists) * max(1, each)


def recommended(accepted: Sequence[float | None]) -> int | None:
    """Which of a confirmation round's finalists (their capacities the gates accept, best estimate first;
    None: refused) is recommended: the highest accepted capacity, the earlier among equals; None when the
    gates accept none.

    >>> recommended([None, 192.0]), recommended([188.0, 192.0]), recommended([None, None]), recommended([])
    (1, 1, None, None)
    """
    best: int | None = None
    for i, value in enumerate(accepted):
        if value is not None and (best is None or value > (accepted[best] or 0.0)):
            best = i
    return best


def found(answer: Answer, best: float) -> bool:
    """Whether the answer is one the gates accept, within 5% of the best acceptable capacity.

    >>> a = Answer(10, "x", 184.0, False, 46, 2, "budget")
    >>> found(a, 193.0), found(a, 194.0)
    (True, False)
    """
    return answer.accepted is not None and answer.accepted >= WITHIN * best


@dataclass(frozen=True)
class MethodSummary:
    """One method's seeds on one space, at one budget."""

    method: str
    budget: int
    seeds: int
    found: int
    refused: int
    mean_launches: float
    max_launches: int
    space_size: int

    @property
    def share(self) -> float:
        return self.found / self.seeds if self.seeds else math.nan

    @property
    def max_share(self) -> float:
        return self.max_launches / self.space_size if self.space_size else math.nan


def summarize_method(
    method: str, budget: int, answers: Sequence[Answer], best: float, space_size: int
) -> MethodSummary:
    """How many of ``answers`` are found, refused, and the launches they spent."""
    if not answers:
        raise ValueError(f"{method}: no seeds to summarize")
    launches = [a.launches for a in answers]
    return MethodSummary(
        method=method,
        budget=budget,
        seeds=len(answers),
        found=sum(1 for a in answers if found(a, best)),
        refused=sum(1 for a in answers if a.refused),
        mean_launches=sum(launches) / len(answers),
        max_launches=max(launches),
        space_size=space_size,
    )


@dataclass(frozen=True)
class Goals:
    """The goals on one space: each met or not, with the figures that decide it."""

    found: bool  # >= 90% of the seeds within 5% of the best acceptable point, TPE at the space's budget
    launched: bool  # every seed launched <= 10% of the space
    versus_random: bool  # random search needs >= 2x TPE's launches to reach that quality
    ratio: Ratio

    @property
    def met(self) -> bool:
        return self.found and self.launched and self.versus_random


def goals(tpe: MethodSummary, ratio: Ratio) -> Goals:
    """The goals of TPE's summary at the space's budget and the launches ratio to reach the quality
    (:func:`benchmarks.search.ladder.ratio`: random search's launches over TPE's; TPE not reaching it,
    or random search reaching it with less than twice TPE's, is not met).

    >>> t = MethodSummary("tpe", 48, 40, 37, 0, 47.0, 48, 576)
    >>> goals(t, Ratio(24, 72, 96))
    Goals(found=True, launched=True, versus_random=True, ratio=Ratio(tpe=24, random=72, random_largest=96))
    """
    return Goals(
        found=tpe.found >= GOAL_FOUND * tpe.seeds,
        launched=tpe.max_launches <= GOAL_LAUNCHED * tpe.space_size,
        versus_random=ratio.met(GOAL_RATIO),
        ratio=ratio,
    )


def render(space: str, best: float, rows: Sequence[MethodSummary], verdict: Goals) -> str:
    """One space's methods at each budget as a Markdown table, the launches to reach the quality, then
    the goals' line."""
    lines = [
        "| method | budget (launches) | seeds found (within 5%, acceptable) | first finalist the gates "
        "refuse | launches: mean, most (share of the space) |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.method} | {row.budget} | {row.found}/{row.seeds} ({row.share:.0%}) | {row.refused} | "
            f"{row.mean_launches:.1f}, {row.max_launches} ({row.max_share:.1%}) |"
        )
    said = {True: "met", False: "NOT met"}
    r = verdict.ratio
    lines += [
        "",
        f"{space}: launches to reach >= {REACH_SHARE:.0%} of seeds found: TPE {num(r.tpe)}, random "
        f"{num(r.random) if r.random is not None else f'more than {r.random_largest}'}; ratio random/TPE "
        f"{r.text()}",
        f"{space}: best acceptable capacity {num(best)}; goals: >= {GOAL_FOUND:.0%} of seeds found "
        f"{said[verdict.found]}; <= {GOAL_LAUNCHED:.0%} of the space launched {said[verdict.launched]}; "
        f"random search needs >= {GOAL_RATIO:g}x TPE's launches for it {said[verdict.versus_random]}",
    ]
    return "\n".join(lines)


def by_method(answers: Mapping[tuple[str, int], Sequence[Answer]]) -> list[tuple[str, int]]:
    """The (method, budget) keys in the table's order: TPE, random, grid, each budget ascending."""
    order = {"tpe": 0, "random": 1, "grid": 2}
    return sorted(answers, key=lambda k: (order.get(k[0], 9), k[1]))

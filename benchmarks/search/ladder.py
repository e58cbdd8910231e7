"""Quality as a function of the launch budget, and the launches each method needs to reach the goal's
quality (issue 43, item 9: "at least 2x fewer launches than random search at equal quality"). Pure.

Pipeline position: under the driver (``benchmarks/search_quality.py``) and :mod:`benchmarks.search.runner`,
over :mod:`benchmarks.search.goals`. **One run answers every smaller budget.** A sequential search asks its
points in an order that does not depend on its budget (the sampler sees the seed and the trials told, not
the budget; the stall rule and the start probe are the same at every budget), and it stops before a
trial when that trial's launch would not fit the budget less the launches kept for the confirmations
(:func:`orchestrator.search.budget.trials_budget_spent`). So a search at budget ``b`` is exactly the
first trials of the same seed's search at a larger budget, up to the first one its share cannot pay
(:func:`prefix`), and its answer is that prefix's finalists confirmed (``runner``). Each method is run
once per seed at its largest budget (TPE at the space's budget, random search at twice it) and judged at
every budget of :func:`budgets` up to that.

**Launches to reach the quality** (:func:`reach`): the smallest budget of the ladder at which at least
90% of the seeds are found (within 5% of the best acceptable point); None when no budget up to the
method's largest reaches it. The ratio random/TPE (:func:`ratio`) is the goal's: at least 2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from contracts.trials import TrialRecord

#: The budgets judged, as fractions of the space's budget (random search's run goes to 2x: the goal's).
FRACTIONS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)

#: The share of the seeds that must be found at a budget for the method to have reached the quality.
REACH_SHARE = 0.9


def budgets(budget: int, largest: float, smallest: int = 1) -> list[int]:
    """The budgets judged for a method run at ``largest`` x the space's ``budget``: each fraction of
    :data:`FRACTIONS` up to ``largest``, rounded to whole launches, none under ``smallest`` (the fewest
    launches a search can start with: a trial and the confirmations kept), distinct, ascending.

    >>> budgets(48, 1), budgets(48, 2), budgets(28, 2, smallest=6)
    ([12, 24, 36, 48], [12, 24, 36, 48, 72, 96], [7, 14, 21, 28, 42, 56])
    >>> budgets(36, 1, smallest=10)
    [18, 27, 36]
    """
    out = {round(budget * f) for f in FRACTIONS if f <= largest + 1e-9}
    return sorted(b for b in out if b >= smallest)


def prefix(trials: Sequence[TrialRecord], share: int) -> list[TrialRecord]:
    """The trials a search whose trials may spend ``share`` launches would have run: in order, each paid
    before it starts (one launch: a sequential search's ``need``), up to the first that would not fit;
    a trial that launched nothing (pruned before start, asked again) is still asked only while a launch
    would fit (the loop checks the budget before every ask).

    >>> def t(n, launches):
    ...     return TrialRecord(number=n, name=f"t{n}", params={}, state="complete", launches=launches)
    >>> run = [t(0, 0), t(1, 1), t(2, 1), t(3, 0), t(4, 1), t(5, 1)]
    >>> [x.number for x in prefix(run, 2)], [x.number for x in prefix(run, 3)], prefix(run, 0)
    ([0, 1, 2], [0, 1, 2, 3, 4], [])
    """
    out: list[TrialRecord] = []
    spent = 0
    for trial in trials:
        if spent + 1 > share:
            break
        out.append(trial)
        spent += trial.launches
    return out


def reach(found_by_budget: Mapping[int, tuple[int, int]]) -> int | None:
    """The smallest budget whose seeds found (``found``, ``seeds``) are at least :data:`REACH_SHARE` of
    them; None when none is.

    >>> reach({12: (3, 10), 24: (9, 10), 48: (8, 10)}), reach({12: (8, 10)}), reach({})
    (24, None, None)
    """
    for budget in sorted(found_by_budget):
        found, seeds = found_by_budget[budget]
        if seeds and found >= REACH_SHARE * seeds:
            return budget
    return None


@dataclass(frozen=True)
class Ratio:
    """Random search's launches to reach the quality over TPE's: ``value`` when both reached it;
    ``at_least`` when only TPE did (random search did not within its largest budget: the ratio is more
    than that budget over TPE's); neither when TPE did not reach it (no ratio can be claimed)."""

    tpe: int | None
    random: int | None
    random_largest: int

    @property
    def value(self) -> float | None:
        if self.tpe is None or self.random is None:
            return None
        return self.random / self.tpe

    @property
    def at_least(self) -> float | None:
        if self.tpe is None or self.random is not None:
            return None
        return self.random_largest / self.tpe

    def met(self, goal: float) -> bool:
        """Whether random search needs at least ``goal`` x TPE's launches (more than its largest budget
        counts as more than that budget)."""
        if self.value is not None:
            return self.value >= goal
        return self.at_least is not None and self.at_least >= goal

    def text(self) -> str:
        """``2.0`` / ``> 4.0`` / ``-`` (TPE did not reach the quality)."""
        if self.value is not None:
            return f"{self.value:.2g}"
        if self.at_least is not None:
            return f"> {self.at_least:.2g}"
        return "-"


def ratio(tpe: int | None, random: int | None, random_largest: int) -> Ratio:
    """The ratio of the launches to reach the quality.

    >>> ratio(24, 48, 96).met(2.0), ratio(24, None, 96).text(), ratio(48, 48, 96).met(2.0)
    (True, '> 4', False)
    >>> ratio(None, 48, 96).text(), ratio(None, None, 96).met(2.0), ratio(48, None, 96).met(2.0)
    ('-', False, True)
    """
    return Ratio(tpe, random, random_largest)

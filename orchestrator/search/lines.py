"""What the search says on the console while it runs and confirms.

Pipeline position: the sweep's opening (:func:`opening_line`, :mod:`orchestrator.app.sweeper`), each
trial, the search's end and its confirmations (:mod:`.loop`, :mod:`.batch`). After the judge, the
finalists' verdicts and the recommendation (or the honest answer) are :mod:`.confirm`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from contracts.metrics import fmt_estimate
from contracts.search import SearchConfig, Space
from contracts.trials import SearchRecord, TrialRecord, Winner, current_best_words
from contracts.verdicts import decision_label
from orchestrator.search.budget import kept_words
from orchestrator.search.nodes import NodeBaselines


def opening_line(
    search: SearchConfig, space: Space, *, interleave: bool = False, nodes: NodeBaselines | None = None
) -> str:
    """What a search sweep opens with: the search, its space's size and budget (not a sweep of one job);
    the launches kept for the confirmations as the run loop charges them (:func:`.budget.kept_words`: the
    baseline's block after each, ``interleave``; the node baseline each may measure first where trials run
    on nodes of their own, ``nodes``, as the sweep's :class:`~orchestrator.search.loop.SearchRun` gets)."""
    size = f"{space.size} configurations" if space.size is not None else "a continuous space"
    budget = f"{search.max_launches} launches"
    if kept := kept_words(search, interleave, nodes):  # the confirmations spend the same budget
        budget += f", {kept}"
    if search.max_gpu_hours is not None:
        budget += f" or {search.max_gpu_hours:g} GPU-hours"
    return (
        f"search {search.name} over {size} (budget: {budget}; stalled after {search.stall_trials} trials "
        "measured fully without a better estimate), its best points then confirmed against the baseline,"
    )


def estimate(trial: TrialRecord) -> str:
    return fmt_estimate(trial.values, at_least=trial.at_least)


def trial_line(trial: TrialRecord, search: SearchConfig) -> str:
    """One measured trial: its state, the fidelity it reached, its estimate (or why it has none)."""
    objective = f"{search.objective}, serial e2e s" if search.pareto else search.objective
    what = f"{objective} estimate {estimate(trial)}" if trial.values else trial.why
    if trial.baseline and trial.launches == 0:
        what = f"the baseline's point, from the sweep's opening: {what}"
    return f"search: trial {trial.number} {trial.name}: {trial.state} at {trial.fidelity} ({what})"


def launched_line(distinct: int, size: int | None, reason: str) -> str:
    of = f"{size}" if size is not None else "a continuous space of"
    return f"search: launched {distinct} of {of} configurations ({reason})"


def baseline_best_line(record: SearchRecord) -> str:
    """The search's end when its best point is the baseline's configuration: no confirmation launch (the
    report says the same words: :func:`contracts.trials.current_best_words`)."""
    return f"search: {current_best_words(record)}"


def winner_line(best: TrialRecord, yaml_file: str) -> str:
    return (
        f"search: best point {best.name} (estimate {estimate(best)}): measured again against the baseline "
        f"({yaml_file})"
    )


def runner_up_line(confirmed: Sequence[Winner], decided: Mapping[str, str], runner_up: TrialRecord) -> str:
    """After a round of confirmations without a KEEP (``decided``: the gates' decision on each so far; a
    finalist it could not judge yet reads "not judged"): the runner-up is confirmed next."""
    said = ", ".join(
        f"{w.name} {decision_label(decided[w.name]) if w.name in decided else 'not judged'}"
        for w in confirmed
    )
    return (
        f"search: no KEEP among the confirmed ({said}): confirming the runner-up {runner_up.name} (estimate "
        f"{estimate(runner_up)})"
    )

"""What the search says on the console, and the winner's verdict recorded beside it.

Pipeline position: the sweep's opening (:func:`opening_line`, :mod:`orchestrator.app.sweeper`), each
trial and the search's end (:mod:`.loop`, :mod:`.batch`), and after the judge
(:func:`confirmation_lines`, :mod:`orchestrator.app.controller`): the gates' verdict on the winner, not
the search's estimate, decides, and only a KEEP is recommended.
"""

from __future__ import annotations

from pathlib import Path

from contracts.layout import SweepPaths
from contracts.metrics import fmt_estimate
from contracts.search import SearchConfig, Space
from contracts.trials import Confirmation, TrialRecord, read_search, write_search
from contracts.verdicts import SweepVerdict, decision_label
from orchestrator.measure.trial import measured_capacity


def opening_line(search: SearchConfig, space: Space) -> str:
    """What a search sweep opens with: the search, its space's size and budget (not a sweep of one job)."""
    size = f"{space.size} configurations" if space.size is not None else "a continuous space"
    budget = f"{search.max_launches} launches"
    if search.max_gpu_hours is not None:
        budget += f" or {search.max_gpu_hours:g} GPU-hours"
    return (
        f"search {search.name} over {size} (budget: {budget}; stalled after {search.stall_trials} trials "
        "measured fully without a better estimate), its winner then confirmed against the baseline,"
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


def baseline_best_line(best: TrialRecord) -> str:
    """The search's end when its best point is the baseline's configuration: no confirmation launch."""
    return (
        f"search: your current configuration is the best found (estimate {estimate(best)}, trial "
        f"{best.number}): nothing to confirm, the baseline stays"
    )


def winner_line(best: TrialRecord, yaml_file: str) -> str:
    return (
        f"search: best point {best.name} (estimate {estimate(best)}): measured again against the baseline "
        f"({yaml_file})"
    )


def confirmation_lines(sweep_dir: Path, verdicts: SweepVerdict) -> list[str]:
    """After the judge: the winner's verdict (the confirmation's, not the search's estimate), recorded in
    trials.json; only a KEEP is the recommendation."""
    record = read_search(sweep_dir)
    if record is None or record.winner is None:
        return []
    name = record.winner.name
    verdict = next((v for v in verdicts.verdicts if v.candidate == name), None)
    if verdict is None:
        record.confirmation = Confirmation(decision="incomplete", reason="the confirmation was not measured")
        write_search(sweep_dir, record)
        return [f"search: winner {name}: INCOMPLETE (its confirmation was not measured)"]
    capacity, at_least = measured_capacity(SweepPaths(sweep_dir).candidate(name).capacity)
    record.confirmation = Confirmation(
        decision=verdict.decision, reason=verdict.reason, capacity=capacity, at_least=at_least
    )
    write_search(sweep_dir, record)
    label = decision_label(verdict.decision)
    measured = f", confirmation's capacity {fmt_estimate([capacity], at_least=at_least)}" if capacity else ""
    advice = (
        f"recommended: {record.winner.yaml_file}"
        if verdict.decision == "keep"
        else "not recommended: only a KEEP is; the baseline stays"
    )
    told = fmt_estimate(record.winner.estimate, at_least=record.winner.at_least)
    return [f"search: winner {name}: {label} (search's estimate {told}{measured}; {advice})"]

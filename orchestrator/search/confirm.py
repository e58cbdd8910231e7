"""The search's finalists, their confirmation, and an honest answer when none is better (pure rules, lines).

Pipeline position: the search's end (:mod:`.loop`: :func:`finalists` ranks the points to confirm and
:func:`tradeoff` records what the search found) and after the judge (:func:`confirmation_lines`,
:mod:`orchestrator.app.controller`). The best ``search.confirm_top`` distinct feasible points are
measured again together, each as an ordinary candidate against the baseline, inside the search's budget;
while none is a KEEP and the budget lasts, the runner-ups one at a time (:meth:`.loop.SearchRun.confirm`).
The recommendation is the KEEP the gates retain (``verdicts.json``'s ``retained``: what ``promote`` and
``run.promote_keep`` adopt). When none is a KEEP the last lines say so, with the
trade-off: the best estimate and the gated requirement it breaks by how much, the best point that met
every constraint and its gain, and the gate setting a user could relax to take the first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from contracts.layout import SweepPaths
from contracts.metrics import fmt_estimate
from contracts.schema import GatesConfig
from contracts.trials import (
    Confirmation,
    SearchRecord,
    Tradeoff,
    TrialRecord,
    Winner,
    best_keep,
    read_search,
    write_search,
)
from contracts.verdicts import SweepVerdict, decision_label
from orchestrator.measure.trial import measured_capacity
from orchestrator.search.rules import best_trial, is_baseline, ranked_trials

#: The line that opens the honest answer (``make demo-search`` ends with it or with a recommendation).
NO_BETTER = "search: no configuration beats the baseline on every profile"
#: A finalist's confirmation that has no verdict: it was not measured (an interrupted or failed launch).
NOT_MEASURED = "the confirmation was not measured"
#: How a stability requirement's name ends (:func:`orchestrator.measure.trial_constraints.requirements`).
FAILED_SUFFIX = " failed requests"


def broken_of(trial: TrialRecord) -> dict[str, float]:
    """The trial's violated constraints (size > 0), worst first."""
    return dict(sorted(((k, v) for k, v in trial.constraints.items() if v > 0), key=lambda kv: -kv[1]))


def _key(trial: TrialRecord) -> str:
    return repr(sorted(trial.params.items()))


def at_limit(trial: TrialRecord) -> set[str]:
    """The requirements the trial's screen left at their limit (size 0: its runs read the figure at or
    beyond the limit, within their noise, :func:`~orchestrator.measure.trial_constraints.ruling`): the
    risk its confirmation takes. A share of failed requests is 0 whenever none failed: never at a limit.
    """
    return {
        name for name, size in trial.constraints.items() if size == 0.0 and not name.endswith(FAILED_SUFFIX)
    }


def can_win(trial: TrialRecord, record: SearchRecord, min_gain: float) -> bool:
    """Whether a capacity search's point could be a KEEP on its estimate: beyond the baseline's capacity
    by more than ``min_gain`` (the gates' smallest gain; the capacity gate keeps no less). Any point of
    another objective, or with no baseline figure, could."""
    value = trial.values[0] if trial.values else None
    if record.objective != "capacity" or not record.baseline or value is None:
        return True
    return value > record.baseline * (1 + min_gain)


def finalists(
    record: SearchRecord,
    k: int | None = None,
    changes: Callable[[TrialRecord], int] | None = None,
    min_gain: float = 0.0,
) -> list[TrialRecord]:
    """The ``k`` (None: all) best distinct feasible points, in
    :func:`~orchestrator.search.rules.best_trial`'s order (measured fully, none of their constraints
    broken), down to the baseline's own configuration (:func:`~orchestrator.search.rules.is_baseline`):
    it and every point the search ranked below it are not worth a confirmation; empty when it is the
    best.

    A capacity the best does not beat by the gates' ``min_gain`` (the demo's 173 against 181, one level
    of the capacity search apart) is no worse: among those the point its screen left at the fewest of the
    finalists' limits, then at the fewest limits (:func:`at_limit`), comes first. A runner-up hedges the
    finalists before it: where they were left at a requirement's limit, the best point whose screen met
    that requirement inside its noise comes next, if one was measured fully and can still win
    (:func:`can_win`: a capacity beyond the baseline's by the gates' ``min_gain``). Two points at the
    same limit (the demo's 8K budgets at prefill_10k's TTFT, 1.5% beyond it, where two screen runs cannot
    tell) stand or fall together; confirming both spends the budget on one question (docs/search.md,
    "Several finalists")."""
    left = [t for t in record.trials if not broken_of(t)]
    out: list[TrialRecord] = []
    risky: set[str] = set()

    def risk(t: TrialRecord) -> tuple[int, int]:
        """The finalists' limits it shares, then its own."""
        return len(at_limit(t) & risky), len(at_limit(t))

    def pick(pool: list[TrialRecord]) -> TrialRecord | None:
        best = best_trial(record.model_copy(update={"trials": pool}), changes)
        if best is None or is_baseline(best, changes) or record.objective != "capacity" or not best.values:
            return best
        top = best.values[0]
        ranked = ranked_trials(record.model_copy(update={"trials": pool}))
        tied = [t for t in ranked if (t.values or [0.0])[0] * (1 + min_gain) >= top]
        tied = [t for t in tied if not is_baseline(t, changes)]
        least = min(risk(t) for t in tied)  # the best itself is among them
        safest = [t for t in tied if risk(t) == least]
        return best_trial(record.model_copy(update={"trials": safest}), changes)

    while k is None or len(out) < k:
        best = None
        if risky:  # the best point clear of the finalists' limits, if it can still win
            best = pick([t for t in left if not at_limit(t) & risky and can_win(t, record, min_gain)])
            best = None if best is None or is_baseline(best, changes) else best
        if best is None:
            best = pick(left)
        if best is None or is_baseline(best, changes):
            break
        out.append(best)
        risky |= at_limit(best)
        left = [t for t in left if _key(t) != _key(best)]
    return out


def estimate_of(trial: TrialRecord) -> float | None:
    """The trial's figure: its full estimate, else its screen's (a point whose screen broke a constraint
    was never measured fully)."""
    return trial.values[0] if trial.values else trial.screen


def relax_advice(broken: dict[str, float], gates: GatesConfig) -> list[str]:
    """For each broken constraint, the gate setting that would admit it (its size beyond the limit)."""
    out: list[str] = []
    for name, size in broken.items():
        if name == "accuracy" or name.endswith(" accuracy"):  # accuracy points beyond the tolerance
            need = gates.accuracy.tolerance + size
            out.append(f"{name}: gates.accuracy.tolerance {need:.2f} (now {gates.accuracy.tolerance:g})")
        elif name.endswith(" failed requests"):
            out.append(f"{name}: requests failed; no setting admits it (the stability gate)")
        elif name.endswith(" tokens/s"):
            need = 1 - (1 - gates.throughput_tolerance) / (1 + size)
            out.append(f"{name}: gates.throughput_tolerance {need:.2f} (now {gates.throughput_tolerance:g})")
        else:
            need = (1 + gates.latency_tolerance) * (1 + size) - 1
            out.append(f"{name}: gates.latency_tolerance {need:.2f} (now {gates.latency_tolerance:g})")
    return out


def tradeoff(
    record: SearchRecord, chosen: Sequence[TrialRecord], gates: GatesConfig, maximize: bool
) -> Tradeoff:
    """What the search found: the best estimate among points whose screen broke a constraint (when it is
    better than the best feasible point's), the best feasible point and its ratio to the baseline."""
    out = Tradeoff()
    first = chosen[0] if chosen else None
    if first is not None:
        out.feasible_name, out.feasible_estimate = first.name, estimate_of(first)
        # the baseline's figure is its capacity: a ratio only for the capacity objective
        if record.baseline and out.feasible_estimate is not None and record.objective == "capacity":
            out.feasible_gain = out.feasible_estimate / record.baseline
    sign = 1.0 if maximize else -1.0
    breakers = [t for t in record.trials if broken_of(t) and t.same_as is None and estimate_of(t) is not None]
    best = max(breakers, key=lambda t: (sign * (estimate_of(t) or 0.0), -t.number), default=None)
    better = best is not None and (
        out.feasible_estimate is None or sign * (estimate_of(best) or 0.0) > sign * out.feasible_estimate
    )
    if best is not None and better:
        out.best_name, out.best_estimate = best.name, estimate_of(best)
        out.best_broken = broken_of(best)
        out.relax = relax_advice(out.best_broken, gates)
    return out


def recommended(record: SearchRecord, retained: str) -> str | None:
    """The recommendation (:func:`contracts.trials.best_keep`): the finalist the gates retain
    (``retained``: ``verdicts.json``'s, what ``promote`` and ``run.promote_keep`` adopt) when they KEEP it;
    None when no finalist was a KEEP."""
    decisions = {c.name: c.decision for c in record.confirmations}
    chosen = record.finalists or ([record.winner] if record.winner is not None else [])  # an older record
    best = best_keep(chosen, decisions, retained)
    return best.name if best is not None else None


def _confirm(sweep_dir: Path, winner: Winner, verdicts: SweepVerdict) -> Confirmation:
    verdict = next((v for v in verdicts.verdicts if v.candidate == winner.name), None)
    if verdict is None:
        return Confirmation(decision="incomplete", name=winner.name, reason=NOT_MEASURED)
    capacity, at_least = measured_capacity(SweepPaths(sweep_dir).candidate(winner.name).capacity)
    return Confirmation(
        decision=verdict.decision,
        name=winner.name,
        reason=verdict.reason,
        capacity=capacity,
        at_least=at_least,
    )


def _figures(winner: Winner, confirmation: Confirmation) -> str:
    told = fmt_estimate(winner.estimate, at_least=winner.at_least)
    measured = confirmation.capacity
    got = (
        f", confirmation's capacity {fmt_estimate([measured], at_least=confirmation.at_least)}"
        if measured
        else ""
    )
    return f"search's estimate {told}{got}"


def tradeoff_lines(trade: Tradeoff | None, confirmations: Sequence[Confirmation]) -> list[str]:
    """The honest answer's lines after :data:`NO_BETTER`'s: the best estimate and what it breaks, what to
    relax, the best feasible point and its gain."""
    if trade is None:
        return []
    out: list[str] = []
    if trade.best_name is not None:
        breaks = ", ".join(f"{n} {s:+.1%} beyond its limit" for n, s in trade.best_broken.items())
        out.append(
            f"search: best estimate {trade.best_name} ({fmt_estimate([trade.best_estimate or 0.0])} at its "
            f"screen) breaks {breaks}"
        )
        if trade.relax:
            out.append(f"search: to take {trade.best_name}, relax " + "; ".join(trade.relax))
    if trade.feasible_name is not None:
        gain = f", {trade.feasible_gain:.2f}x the baseline's" if trade.feasible_gain else ""
        decided = next((c for c in confirmations if c.name == trade.feasible_name), None)
        verdict = f"; confirmed {decision_label(decided.decision)}" if decided is not None else ""
        out.append(
            f"search: best point that met every constraint: {trade.feasible_name} (estimate "
            f"{fmt_estimate([trade.feasible_estimate or 0.0])}{gain}{verdict})"
        )
    else:
        out.append("search: no point measured fully met every constraint")
    return out


def confirmation_lines(sweep_dir: Path, verdicts: SweepVerdict) -> list[str]:
    """After the judge: each finalist's verdict (the confirmation's, not the search's estimate), recorded
    in trials.json; then the recommendation (the best KEEP), or the honest answer with its trade-off.
    Nothing when the sweep ran no search, or its best point was the baseline's own configuration (said
    at the search's end, nothing confirmed)."""
    record = read_search(sweep_dir)
    if record is None or record.best_is_baseline:
        return []
    chosen = record.finalists or ([record.winner] if record.winner is not None else [])
    lines: list[str] = []
    record.confirmations = [_confirm(sweep_dir, w, verdicts) for w in chosen]
    for i, (winner, confirmation) in enumerate(zip(chosen, record.confirmations, strict=True)):
        reason = confirmation.reason.splitlines()[0][:200] if confirmation.reason else ""
        said = "confirmed" if confirmation.reason != NOT_MEASURED else "not confirmed"
        lines.append(
            f"search: {said} {winner.name} ({i + 1} of {len(chosen)}): "
            f"{decision_label(confirmation.decision)} ({_figures(winner, confirmation)}"
            + (f"; {reason}" if reason and confirmation.decision != "keep" else "")
            + ")"
        )
    record.recommended = recommended(record, verdicts.retained)
    pick = next((c for c in record.confirmations if c.name == record.recommended), None)
    record.confirmation = pick or (record.confirmations[0] if record.confirmations else None)
    write_search(sweep_dir, record)
    if pick is not None:
        winner = next(w for w in chosen if w.name == pick.name)
        lines.append(f"search: recommend {winner.name}: KEEP ({_figures(winner, pick)}; {winner.yaml_file})")
        return lines
    return [*lines, no_keep_line(record), *tradeoff_lines(record.tradeoff, record.confirmations)]


def _why(confirmation: Confirmation) -> str:
    """The first line of a verdict's reason, short."""
    first = confirmation.reason.splitlines()[0] if confirmation.reason else ""
    return first if len(first) <= 160 else first[:157] + "..."


def no_keep_line(record: SearchRecord) -> str:
    """The honest answer's first line, true in each case: the finalists confirmed and not kept (which
    verdict, and why; one whose confirmation was not measured is said so, not "confirmed"), and the points
    that met every constraint and were measured fully but not confirmed (the budget); or, with no
    confirmation, the points that qualified and none confirmed, or none that qualified."""
    measured = [c for c in record.confirmations if c.reason != NOT_MEASURED]
    unmeasured = [c for c in record.confirmations if c.reason == NOT_MEASURED]
    parts: list[str] = []
    if measured:
        parts.append(
            "confirmed "
            + ", ".join(
                f"{c.name} {decision_label(c.decision)} ({_why(c) or 'no reason given'})" for c in measured
            )
        )
    if unmeasured:
        parts.append(", ".join(f"{c.name} not measured (INCOMPLETE: {NOT_MEASURED})" for c in unmeasured))
    confirmed = {c.name for c in record.confirmations}
    left = [t for t in finalists(record) if t.name not in confirmed]
    if left and record.confirmations:
        names = ", ".join(t.name for t in left[:3]) + (" ..." if len(left) > 3 else "")
        parts.append(f"{len(left)} more measured fully and met every constraint, not confirmed: {names}")
    elif left:
        best = left[0]
        figure = fmt_estimate(best.values, at_least=best.at_least)
        parts.append(
            f"{len(left)} point(s) measured fully and met every constraint (best {best.name}, estimate "
            f"{figure}), none confirmed: the budget held no confirmation (search.max_launches)"
        )
    if not parts:
        parts.append("no point was measured fully and met every constraint")
    return f"{NO_BETTER}: " + "; ".join(parts) + "; the baseline stays"

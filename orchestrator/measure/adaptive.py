"""Adaptive repeats in a sweep: judge a candidate between its repeats, and know when it is done.

Pipeline position: beside :mod:`orchestrator.measure.candidate`, which asks :func:`look` after each of a
candidate's
repeats whether to measure another (the stopping rule is :mod:`gates.sequential`, the verdict
:func:`gates.evaluate_sweep` on what is on disk so far), and :func:`settled_repeats` on resume. Each look
and the end of the loop are journalled (``repeat_looked``, ``repeats_settled``), which is how a resumed
sweep tells a candidate that stopped early from one that was interrupted.
"""

from __future__ import annotations

from contracts.errors import GauntletError
from contracts.verdicts import Decision, decision_label
from gates.capacity import before_search
from gates.sequential import SequentialPlan, candidate_plan, loop_decision
from gates.verdict import evaluate_sweep
from orchestrator.ledger.events import DiscardingPartial, RepeatLooked, RepeatsSettled, Role
from orchestrator.measure.launch import Launch
from orchestrator.servers.context import SweepContext


def plan_for(ctx: SweepContext, role: Role) -> SequentialPlan:
    """The baseline runs ``run.repeats``; candidates follow ``run.min_repeats``..``run.max_repeats``."""
    if role == "baseline":
        return SequentialPlan(ctx.cfg.run.repeats, ctx.cfg.run.repeats)
    return candidate_plan(ctx.cfg.run)


def look(
    ctx: SweepContext, launch: Launch, repeats: int, plan: SequentialPlan
) -> tuple[Decision | None, bool]:
    """Judge the ``launch``'s candidate on its results so far (at the per-look confidence; its record so
    far written first, :meth:`Launch.write_so_far`) and journal it: (the decision the loop acts on, whether
    to measure another repeat: :func:`gates.sequential.loop_decision`); (None, True) when it cannot be
    judged now (the next repeat runs, and the judge says why at the end)."""
    run = launch.write_so_far()  # the launch's end writes its full record over it
    try:
        verdict = evaluate_sweep(
            ctx.dir,
            before_search(ctx.cfg.gates),  # the capacity search runs after the loop
            baseline=ctx.cfg.baseline.name,
            candidates=[run.candidate],
            plan=plan,
        )
    except GauntletError as exc:
        ctx.say(f"{run.candidate}: after {repeats} repeat(s): cannot judge yet ({exc})")
        return None, True
    decision = verdict.verdicts[0].decision
    ctx.journal.append(RepeatLooked(candidate=run.candidate, repeats=repeats, decision=decision))
    acted, more = loop_decision(verdict.verdicts[0], plan.max_repeats - repeats)
    if decision == "incomplete" and not more:  # futility: more repeats cannot complete it; say why
        why = f" ({verdict.verdicts[0].reason}); no more repeats"
    elif decision == "incomplete":
        why = " (within the load client's lag; another comparison can still settle): one more repeat"
    else:
        why = ""
    ctx.say(f"{run.candidate}: after {repeats} repeat(s): {decision_label(decision)}{why}")
    return acted, more


def settle(ctx: SweepContext, name: str, repeats: int, decision: Decision | None) -> None:
    ctx.journal.append(RepeatsSettled(candidate=name, repeats=repeats, decision=decision))


def settled_repeats(ctx: SweepContext, name: str) -> int | None:
    """How many repeats the candidate's finished adaptive loop ran (None: it never finished)."""
    found: int | None = None
    for event in ctx.journal.events():
        if isinstance(event, DiscardingPartial) and event.candidate == name:
            found = None
        elif isinstance(event, RepeatsSettled) and event.candidate == name:
            found = event.repeats
    return found

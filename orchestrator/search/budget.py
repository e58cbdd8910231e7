"""What a trial costs the search's budget (pure): its launches and GPU-hours, its own share only; and
what the trials leave for the confirmations.

Pipeline position: :meth:`orchestrator.search.batch.Batch.flush` charges each trial with
:func:`trial_cost` before :func:`~orchestrator.search.rules.stop_reason` reads the budget. A trial pays
for its own time on its GPUs (``TrialOutcome.seconds``, timed inside its job), not the batch's: trials
measured side by side share the batch's wall time, and a point pruned at its screen, or infeasible there,
frees its GPUs long before a fully measured neighbour does, so cheap screens buy more points. The node's
baseline a parallel trial measured first (``baseline_launches``, ``baseline_gpu_s``: a node's opening, or
its re-measurement after drift or age) is charged to the trial that caused it. The budget holds the
confirmations too: a confirmation is its finalist's launch, the interleaved block of the baseline after it
(``run.interleave``: a fresh launch) and, in a parallel search, its node's baseline when that node has no
recent one (:func:`confirmation_launches`); the trials stop at the budget less ``search.confirm_top``
confirmations' launches (:func:`trials_budget_spent`), and each confirmation is paid before it starts
(:func:`confirmation_room`) and charged what it launched.
A trial is paid for before it starts: the trials stop when the budget left cannot pay for the next one
and the node baseline it may need (:mod:`.nodes`), at the costliest trial's GPU-hours so far.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from contracts.search import SearchConfig
from contracts.trials import SearchRecord
from orchestrator.measure.trial import TrialOutcome
from orchestrator.search.nodes import NodeBaselines


@dataclass(frozen=True)
class Cost:
    """One trial's charge: server launches, and GPU-hours in host time."""

    launches: int
    gpu_hours: float


def trial_cost(outcome: TrialOutcome, wall_s: float, time_scale: float) -> Cost:
    """``outcome``'s charge: its launches and its node baseline's, and GPUs x its own seconds (else the
    batch's ``wall_s``, for a job that did not time itself) plus the node baseline's GPU-seconds, scaled
    from wall to host time (``time_scale``).

    >>> trial_cost(TrialOutcome(state="pruned", launches=1, gpus=8, seconds=90.0), 360.0, 1.0)
    Cost(launches=1, gpu_hours=0.2)
    """
    own = outcome.seconds if outcome.seconds > 0 else wall_s
    gpu_s = outcome.gpus * own + outcome.baseline_gpu_s
    return Cost(outcome.launches + outcome.baseline_launches, gpu_s * time_scale / 3600)


def confirmation_launches(*, interleave: bool, node_baselines: int = 0) -> int:
    """The launches one confirmation costs: its finalist's, the baseline's interleaved block after it
    (``interleave``), and the node baselines it may measure first (``node_baselines``: :mod:`.nodes`).

    >>> confirmation_launches(interleave=False), confirmation_launches(interleave=True, node_baselines=1)
    (1, 3)
    """
    return 1 + (1 if interleave else 0) + max(0, node_baselines)


def each_confirmation(interleave: bool, nodes: NodeBaselines | None) -> int:
    """The launches one confirmation is charged before it starts, now: :func:`confirmation_launches` with
    the node baseline it may measure first where trials run on nodes of their own (``nodes``:
    :meth:`.nodes.NodeBaselines.due` of one job; None: measured in the sweep's process, no node baseline).
    The one count the run loop charges (:class:`~orchestrator.search.loop.SearchRun`) and the opening line
    and ``plan`` state (:func:`kept_launches` of it), so what is said is what is kept.

    >>> each_confirmation(True, None), each_confirmation(True, NodeBaselines(None, lambda: 0))
    (2, 3)
    >>> fresh, none_fresh = NodeBaselines(2, lambda: 2), NodeBaselines(2, lambda: 0)
    >>> each_confirmation(False, none_fresh), each_confirmation(False, fresh)
    (2, 1)
    """
    due = nodes.due(1) if nodes is not None else 0
    return confirmation_launches(interleave=interleave, node_baselines=due)


def confirmation_words(interleave: bool, each: int) -> str:
    """What each of a confirmation's ``each`` launches is (:func:`confirmation_launches`), as the lines
    that state the budget say it: beyond its finalist's launch and the baseline's block after it, its
    node's baseline.

    >>> confirmation_words(True, 3)
    "its finalist's launch, the baseline's interleaved block after it, its node's baseline"
    >>> confirmation_words(False, 1)
    "its finalist's launch"
    """
    words = ["its finalist's launch"]
    if interleave:
        words.append("the baseline's interleaved block after it")
    if each > confirmation_launches(interleave=interleave):
        words.append("its node's baseline")
    return ", ".join(words)


def kept_words(search: SearchConfig, interleave: bool, nodes: NodeBaselines | None) -> str:
    """The launches of the budget kept for the confirmations, as the opening line and ``plan`` say them:
    :func:`kept_launches` at :func:`each_confirmation`, the count the run loop charges; "" when none.

    >>> kept_words(SearchConfig(max_launches=7, confirm_top=1), False, NodeBaselines(None, lambda: 0))
    "2 of them kept for the confirmations (1 x 2: its finalist's launch, its node's baseline)"
    >>> kept_words(SearchConfig(max_launches=3), True, None)
    "2 of them kept for the confirmations (all but one trial's launch, of 2 x 2: its finalist's launch, \
the baseline's interleaved block after it)"
    """
    each = each_confirmation(interleave, nodes)
    kept = kept_launches(search, each)
    if not kept:
        return ""
    top = max(1, search.confirm_top)
    share = f"{top} x {each}" if kept == top * each else f"all but one trial's launch, of {top} x {each}"
    return f"{kept} of them kept for the confirmations ({share}: {confirmation_words(interleave, each)})"


def kept_launches(search: SearchConfig, each: int = 1) -> int:
    """Launches of ``search.max_launches`` the trials leave for the confirmations: ``confirm_top`` of them
    at ``each`` launches (:func:`confirmation_launches`), at most all but one (a search launches at least
    one trial).

    >>> kept_launches(SearchConfig(max_launches=48)), kept_launches(SearchConfig(max_launches=48), each=2)
    (2, 4)
    >>> kept_launches(SearchConfig(max_launches=1))
    0
    """
    return max(0, min(search.confirm_top * max(1, each), search.max_launches - 1))


def confirmation_gpu_hours(record: SearchRecord) -> float:
    """What one confirmation is expected to cost in GPU-hours before any was measured: the costliest trial
    measured fully (a capacity search on one launch, as a confirmation's own is; its other profiles make a
    confirmation cost more, which the budget charges when it has run); 0 before any."""
    full = [t.gpu_hours for t in record.trials if t.fidelity == "full" and t.launches > 0]
    return max(full, default=0.0)


def expected_gpu_hours(record: SearchRecord) -> float:
    """What one more launch (a trial, or a node's baseline) is expected to cost in GPU-hours before it
    starts: the costliest trial charged so far (its node baseline's share included); 0 before any, when
    nothing is known of a launch's time here."""
    return max((t.gpu_hours for t in record.trials if t.launches > 0), default=0.0)


def trials_budget_spent(
    record: SearchRecord, search: SearchConfig, need: int = 1, held: int = 0, each: int = 1
) -> str | None:
    """Why the search's trials stop on their budget (the budget less what is kept for the confirmations:
    :func:`kept_launches`, and as many GPU-hours as that many confirmations are expected to cost), or None.

    A trial is paid for before it starts: ``need`` is the launches the next trial costs (its own, and its
    node's baseline when its node may have to measure one: :mod:`.nodes`), ``held`` the launches the trials
    of the batch still filling have reserved; each launch is expected to cost :func:`expected_gpu_hours`;
    ``each``: the launches one confirmation costs (:func:`confirmation_launches`).
    The trials stop when the next one cannot be paid for, so a line never shows more spent than the budget
    unless a charge came that no reservation foresaw (a node's baseline measured again after drift, a
    trial longer than the costliest before it), which the line then says."""
    kept = kept_launches(search, each)
    share = search.max_launches - kept
    also = f" ({kept} kept for the confirmations)" if kept else ""
    if record.launches + held + need > share:
        over = record.launches - search.max_launches
        why = (
            f"; {over} over: node baselines measured beyond those reserved (one measured again after drift)"
            if over > 0
            else f": the next trial with its node's baseline needs {need} launches"
            if need > 1 and record.launches < share
            else ""
        )
        return f"budget spent: {record.launches} of {search.max_launches} launches{also}{why}"
    if search.max_gpu_hours is not None:
        kept_h = min(search.confirm_top, kept) * confirmation_gpu_hours(record)
        per_launch = expected_gpu_hours(record)
        spent = record.gpu_hours + kept_h
        if spent >= search.max_gpu_hours or spent + (held + need) * per_launch > search.max_gpu_hours:
            held_line = f" ({kept_h:.3g} kept for the confirmations)" if kept_h else ""
            over_h = record.gpu_hours - search.max_gpu_hours
            why = (
                f"; {over_h:.3g} over: a trial's time is known only once it has run, and each was started "
                "where the costliest before it would fit"
                if over_h > 0
                else f": the next trial is expected to cost {need * per_launch:.3g} (the costliest so far"
                + (", with its node's baseline" if need > 1 else "")
                + ")"
                if spent < search.max_gpu_hours
                else ""
            )
            return (
                f"budget spent: {record.gpu_hours:.3g} of {search.max_gpu_hours:g} GPU-hours{held_line}{why}"
            )
    return None


def first_trial_launches(nodes: NodeBaselines | None) -> int:
    """The launches the search's first trial is paid before it starts: its own, and the node baseline it
    may measure first where trials run on nodes of their own (``nodes``, :meth:`.nodes.NodeBaselines.due`
    of one job; the run loop's ``need`` for a batch still empty)."""
    return 1 + (nodes.due(1) if nodes is not None else 0)


def smallest_budget(search: SearchConfig, *, interleave: bool, nodes: NodeBaselines | None) -> int:
    """The smallest ``search.max_launches`` whose trials can start: the first one is paid (its launch and
    node baseline, :func:`first_trial_launches`) beside the launches kept for the confirmations
    (:func:`kept_launches` at :func:`each_confirmation`), found with the rule the run loop stops on
    (:func:`trials_budget_spent`, GPU-hours aside). In the sweep's own process the reserve gives way to one
    trial (1); where each trial has a node of its own the reserve keeps all but one launch and the trial
    needs two, so it is the trial's launches and every confirmation's: ``need + confirm_top x each``.

    >>> smallest_budget(SearchConfig(), interleave=True, nodes=None)
    1
    >>> slurm = NodeBaselines(None, lambda: 0)
    >>> smallest_budget(SearchConfig(), interleave=True, nodes=slurm), smallest_budget(
    ...     SearchConfig(confirm_top=1), interleave=False, nodes=slurm)
    (8, 4)
    """
    need = first_trial_launches(nodes)
    each = each_confirmation(interleave, nodes)
    empty = SearchRecord(name=search.name, objective=search.objective, directions=[], space_size=None)
    most = need + max(0, search.confirm_top) * each
    for launches in range(1, most):
        budget = replace(search, max_launches=launches, max_gpu_hours=None)
        if trials_budget_spent(empty, budget, need, 0, each) is None:
            return launches
    return most


def confirmation_room(record: SearchRecord, search: SearchConfig, each: int = 1) -> int:
    """Confirmations the budget still holds now: the launches left over what one costs (``each``:
    :func:`confirmation_launches`), so a confirmation is paid before it starts; none once the GPU-hours
    are spent.

    >>> rec = SearchRecord(name="s", objective="capacity", directions=["maximize"], space_size=None)
    >>> rec.launches, budget = 45, SearchConfig(max_launches=48)
    >>> confirmation_room(rec, budget), confirmation_room(rec, budget, 2)
    (3, 1)
    """
    if search.max_gpu_hours is not None and record.gpu_hours >= search.max_gpu_hours:
        return 0
    return max(0, (search.max_launches - record.launches) // max(1, each))

"""Adaptive repeats: when to measure another repeat of a candidate.

Pipeline position: pure decisions the orchestrator's measuring loop asks for
(``orchestrator.measure.candidate``)
and the decision-quality benchmark simulates; the verdict itself still comes from the gates
(:func:`gates.evaluate_sweep`). No I/O here.

**The stopping rule (a group-sequential design with Bonferroni alpha spending).** A candidate is measured
repeat by repeat (every profile once per repeat). From ``min_repeats`` on, after each repeat the gates
judge it; the next repeat runs only while its verdict is ``inconclusive`` (unsettled), up to
``max_repeats``. A verdict can therefore be read at ``looks = max_repeats - min_repeats + 1`` points.
Look ``k`` (1-based) spends the share ``2^(k-1) / (2^looks - 1)`` of the error rate ``1 - confidence``
(doubling: an early look stops only a clear effect, such as an 8x loss; the last look keeps about half
of the error rate for the small ones), so by the union bound the probability of a false ``reject`` or
``keep`` at any look stays at most ``1 - confidence``, whatever the stopping time. Stopping on ``neutral``
(nothing material, no gain) is futility stopping: it cannot raise a false reject or keep, it can only
cost power, which the benchmark measures. A policy decision (a lost visible answer) stops at any look: it
is not a test. The judge rebuilds from disk the confidence of the look a candidate stopped at (from its
number of repeats), so it writes exactly the decision that stopped the loop.

The measuring order around a candidate (the baseline measured again after it, ``run.interleave``) is the
orchestrator's: :mod:`orchestrator.measure.interleave`.

    >>> plan = SequentialPlan(min_repeats=2, max_repeats=5)
    >>> plan.looks, [round(plan.look_confidence(0.95, r), 4) for r in (2, 3, 4, 5)]
    (4, [0.9967, 0.9933, 0.9867, 0.9733])
    >>> plan.next_repeat(repeats_done=2, decision="inconclusive"), plan.next_repeat(2, "reject")
    (True, False)
"""

from __future__ import annotations

from dataclasses import dataclass

from contracts.errors import GateError
from contracts.schema import RunConfig
from contracts.verdicts import Decision, Verdict

#: Decisions that end the measuring of a candidate: a clear failure, a clear keep, nothing to gain, or
#: evidence more repeats cannot complete (``incomplete``: a comparison within the load client's lag, a
#: lost baseline, a harness fault; futility: the look's message says what happened).
SETTLED: frozenset[Decision] = frozenset({"keep", "reject", "neutral", "incompatible", "incomplete"})


@dataclass(frozen=True)
class SequentialPlan:
    """From ``min_repeats`` to ``max_repeats`` repeats, one look after each (adaptive when they differ)."""

    min_repeats: int
    max_repeats: int

    def __post_init__(self) -> None:
        if not 1 <= self.min_repeats <= self.max_repeats:
            raise GateError(
                f"run.min_repeats = {self.min_repeats}, run.max_repeats = {self.max_repeats}: "
                "need 1 <= min_repeats <= max_repeats",
                hint="set run.max_repeats >= run.min_repeats (equal: fixed repeats, no looks)",
            )

    @property
    def adaptive(self) -> bool:
        return self.max_repeats > self.min_repeats

    @property
    def looks(self) -> int:
        """How many times a verdict may be read (and acted on) while measuring one candidate."""
        return self.max_repeats - self.min_repeats + 1

    def spent(self, repeats: int) -> float:
        """The share of the error rate the look after ``repeats`` repeats spends (the shares add up to 1)."""
        k = min(max(repeats - self.min_repeats + 1, 1), self.looks)
        return float(2 ** (k - 1)) / float(2**self.looks - 1)

    def look_confidence(self, confidence: float, repeats: int) -> float:
        """The confidence of the look after ``repeats`` repeats: over every look the family-wise error
        stays at ``1 - confidence`` (fixed repeats: ``confidence`` itself)."""
        return 1 - (1 - confidence) * self.spent(repeats)

    def next_repeat(self, repeats_done: int, decision: Decision | None) -> bool:
        """Measure another repeat? Before ``min_repeats`` always; then only while unsettled."""
        if repeats_done >= self.max_repeats:
            return False
        if repeats_done < self.min_repeats or decision is None:
            return True
        return decision not in SETTLED


def loop_decision(verdict: Verdict, remaining: int) -> tuple[Decision, bool]:
    """What the measuring loop does after a look with ``remaining`` repeats left: (the decision it acts
    on, whether to measure another repeat).

    The verdict's decision, measured on only while it is unsettled (:data:`SETTLED`), with one
    refinement, **lag alone**: an ``incomplete`` verdict made so only by the load client's lag (no
    missing data: nothing to resume) while another comparison is inconclusive and can still settle (a
    requirement's, whatever its ``more_repeats``: estimated at an early look's few degrees of freedom it
    says little, see below; another gate's when its ``more_repeats`` fits in what is left, or it rests
    on a single candidate repeat, whose widened interval says nothing yet) measures on as
    ``inconclusive``. More repeats cannot settle the lagged comparison, but they can settle that one,
    and a requirement that fails beyond the lag rejects whatever the lag hides (stopping there cost the
    benchmark's 20% regressions their reject under measured noise: futility stopping is for what repeats
    cannot settle; with the lag rule both ways, issue 32, 2 of 20 stopped at their second look on a
    decode_heavy TTFT the lag straddled while their tokens/s, 0.8x, asked for 4-5 more repeats or had
    no bounded interval yet). The verdict itself is never changed.

    No futility stop on an ``inconclusive`` verdict: the gates' ``more_repeats`` is estimated at the
    look's confidence and degrees of freedom (at 2 repeats t's quantile is 2-3x the last look's), and a
    rule that stopped when it exceeded the repeats left ended 10 of 10 benchmark 10% regressions
    ``inconclusive`` after 2 repeats (8 of 10 rejected with fixed 3): docs/gates.md.
    """
    decision = verdict.decision
    if remaining <= 0:
        return decision, False
    if decision != "incomplete" or verdict.resume:
        return decision, decision not in SETTLED
    if not verdict.missing or any(gap.kind != "client_lag" for gap in verdict.missing):
        return decision, False
    settles = [
        c
        for g in verdict.gates
        for c in g.comparisons
        if c.status == "inconclusive"
        and c.undecidable is None
        and (
            g.role == "requirement"  # a fail there rejects whatever the lag hides: no futility
            or (c.more_repeats is not None and c.more_repeats <= remaining)
            or (c.n_candidate or 0) < 2
        )
    ]
    return ("inconclusive", True) if settles else (decision, False)


def candidate_plan(run: RunConfig) -> SequentialPlan:
    """The candidates' plan of a sweep: ``run.min_repeats``..``run.max_repeats``, else ``run.repeats``."""
    return SequentialPlan(*run.candidate_repeats)

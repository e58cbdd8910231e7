"""One error budget for "some gain": the latency gains and the capacity gain share it (pure).

Pipeline position: inside the gates. A candidate is kept on one gain claim, a latency (the latency gain
gate, :mod:`gates.latency_gain`) or its capacity at the SLO (the capacity gate, :mod:`gates.capacity`), so
the probability of a false keep is at most the sum of the two families' error rates (Bonferroni, valid
under any dependence). With a capacity search on the baseline (the candidate is searched too: a capacity
claim is planned before any data), each family gets ``CAPACITY_SHARE`` and ``1 - CAPACITY_SHARE`` of
``1 - confidence``; the latency family splits its share over its metrics as before. Without one the latency
family keeps all of it (nothing changes for a sweep without ``capacity.profile``).

With adaptive repeats the latency family's half is spent over the looks (each look's share,
:mod:`gates.sequential`); the capacity search runs once, after the looks, and its half is the sweep's
(:attr:`gates.registry.GateContext.sweep_confidence`): a false gain of either kind stays within
``1 - confidence`` whatever look the loop stopped at.

Why halves, not one slot per metric: a keep needs one claim, and the capacity claim is the one a search for
capacity is after; one slot of six (the benchmark's five latency metrics and capacity) would test it at
99.2%, where a true 15% capacity gain is kept in about half the sweeps
(docs/measurements/decision-quality.md, "Capacity scenarios").

    >>> from contracts.schema import GatesConfig
    >>> round(latency_confidence(GatesConfig(), planned=True), 4), capacity_confidence(GatesConfig())
    (0.975, 0.975)
"""

from __future__ import annotations

from contracts.schema import GatesConfig
from gates.registry import GateContext

#: The capacity claim's share of the gain family's error rate (when a capacity search is planned).
CAPACITY_SHARE = 0.5


def capacity_planned(ctx: GateContext) -> bool:
    """A capacity gain can be claimed for this candidate: the baseline was searched (decided before the
    candidate's data, so an adaptive look, before the candidate's search and without the capacity gate,
    spends what the final verdict spends; a sweep that searches but leaves the gate out of
    ``gates.enabled`` only gives the latency family less than it could)."""
    return ctx.baseline.capacity is not None


def latency_confidence(cfg: GatesConfig, *, planned: bool) -> float:
    """The latency gain family's confidence (split over its metrics by :mod:`gates.latency_gain`)."""
    alpha = 1 - cfg.confidence
    return 1 - alpha * (1 - CAPACITY_SHARE) if planned else cfg.confidence


def capacity_confidence(cfg: GatesConfig) -> float:
    """The confidence of the capacity gain's interval (two-sided; a gain when its lower end is above 1)."""
    return 1 - (1 - cfg.confidence) * CAPACITY_SHARE


def latency_family(ctx: GateContext) -> float:
    """The latency gain family's confidence for this candidate."""
    return latency_confidence(ctx.cfg, planned=capacity_planned(ctx))

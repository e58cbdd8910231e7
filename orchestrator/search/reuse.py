"""The baseline's point measured by the sweep's opening: its result as that trial's, nothing launched.

Pipeline position: the run loop (:meth:`orchestrator.search.loop.SearchRun.baseline_outcome`) asks the
baseline's point first; when the opening measured what the trial would measure, the opening's runs are the
trial. What a trial measures (:mod:`orchestrator.measure.trial`) and what the opening has:

- **capacity**: the capacity search on ``capacity.profile``, which the opening ran for the baseline:
  its answer, and the margin and attainment at it (a tie at the capacity ceiling is broken by them);
- **goodput**, **tps_per_gpu**: runs of ``capacity.profile`` at the screen level. The opening's capacity
  search ran that profile at its levels with the same workload (``level_workload``), so when one of them
  is the screen level (always, when ``search.load_level`` is unset: the level is then the baseline's
  capacity, a level the search measured) the mean of those runs' figures is the trial's; a ``load_level``
  the capacity search did not measure is launched;
- **pareto**: launched, not reused. Its second objective is the median end-to-end time of one serial run on
  the trial's own launch; the opening's serial runs were measured on the baseline's launch and could serve,
  but their reuse is not implemented, so the baseline's point is measured as any other.

Pure over the opening's ``capacity.json``.
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import mean

from contracts.files import read_model
from contracts.results import CapacityResult
from contracts.search import SearchConfig
from orchestrator.measure.trial import TrialOutcome, held_at, measured_capacity

OPENING = "the baseline's point: measured by the sweep's opening, nothing launched"


def opening_outcome(search: SearchConfig, path: Path, level: float, gpus: int) -> TrialOutcome | None:
    """The trial of the baseline's point from the opening's capacity search (``path``: its
    ``capacity.json``), or None where the opening did not measure what the trial would."""
    if search.pareto or not path.exists():
        return None
    if search.objective == "capacity":
        capacity, at_least = measured_capacity(path)
        margin, attainment = held_at(path)
        return TrialOutcome(
            state="complete",
            why=f"{OPENING} (its capacity search)",
            fidelity="full",
            values=[capacity if capacity is not None else 0.0],
            at_least=at_least,
            margin=margin,
            attainment=attainment,
        )
    result = read_model(path, CapacityResult)
    runs = [p for p in result.points if math.isclose(p.level, level, rel_tol=1e-9)]
    if not runs:
        return None
    if search.objective == "goodput":
        figures = [p.goodput_tps for p in runs]
    else:
        figures = [p.output_tps / max(1, gpus) for p in runs]
    return TrialOutcome(
        state="complete",
        why=f"{OPENING} ({len(runs)} run(s) of its capacity search at {level:g})",
        fidelity="full",
        values=[mean(figures)],
        screen=figures[0],
    )

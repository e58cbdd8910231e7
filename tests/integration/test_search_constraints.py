"""A search on the simulator with a point that breaks a gated requirement: the point is infeasible at its
screen (which requirement, by how much), never measured fully nor confirmed; only points that met every
requirement are confirmed, and the last lines recommend a KEEP or say that nothing beats the baseline,
with the trade-off found."""

from __future__ import annotations

import re
from pathlib import Path

from contracts.layout import SweepPaths
from contracts.trials import read_search
from orchestrator.search.confirm import NO_BETTER, broken_of
from tests.integration.sweep_helpers import assert_finished_capacity_open, run_sweep
from tests.integration.test_search import SMALL_CAPACITY


def test_points_that_break_serial_latency_are_never_measured_fully_nor_confirmed(
    tmp_path: Path, port: int
) -> None:
    code, out, sweep = run_sweep(
        ["-m", "search=spec_tokens", "run.confirm_runs=0", *SMALL_CAPACITY],
        sweeps=tmp_path / "sweeps",
        port=port,
        timeout=300,
    )
    assert_finished_capacity_open(code, out, sweep)
    record = read_search(sweep)
    assert record is not None
    drawn = [t for t in record.trials if t.same_as is None]
    off = [t for t in drawn if t.params["speculative.method"] == "off"]
    assert off, [t.params for t in drawn]  # the seed draws a point without speculation
    for one in off:
        # no speculation: its screen broke serial latency (about 2.6x the baseline's against a 1.05 limit,
        # beyond any noise allowance): infeasible there, the size recorded, never measured fully
        assert one.state == "infeasible" and one.fidelity == "screen", (one.state, one.constraints)
        assert one.constraints["serial latency"] > 0.2 and one.why.startswith("screen breaks a constraint: ")
        assert "serial latency" in one.why and one.values is None and one.screen is not None
        assert not SweepPaths(sweep).trial(one.name).capacity.exists()
        assert re.search(rf"search: trial {one.number} {one.name}: infeasible at screen \(screen breaks", out)
    # only points that met every requirement are confirmed, never the baseline's own point nor a point
    # the search ranked below it (when the baseline's is the best, that is said and nothing is confirmed)
    finalists = [w.name for w in record.finalists]
    feasible = [
        t.name for t in record.trials if t.same_as is None and t.state == "complete" and not t.baseline
    ]
    assert not {t.name for t in off} & set(finalists) and set(finalists) <= set(feasible), (
        finalists,
        feasible,
    )
    # each confirmation with the baseline's interleaved block after it
    assert record.confirm_launches == 2 * len(finalists) and record.launches <= 7
    if not finalists:
        assert record.best_is_baseline or NO_BETTER in out, out[-3000:]
    assert {p.name for p in SweepPaths(sweep).candidates.iterdir()} == {"baseline", *finalists}
    for i, name in enumerate(finalists):
        assert re.search(
            rf"^gauntlet: search: confirmed {name} \({i + 1} of {len(finalists)}\): [A-Z]+ ", out, re.M
        )
    # the trade-off recorded: the best estimate among the points that broke a requirement (when better than
    # the best feasible point), what it breaks and what to relax to take it
    trade = record.tradeoff
    assert trade is not None and trade.feasible_name == (finalists[0] if finalists else None)
    if trade.best_name is not None:  # the best screen among the points that broke a requirement
        best = next(t for t in drawn if t.name == trade.best_name)
        assert trade.best_broken == broken_of(best) and len(trade.relax) == len(trade.best_broken)
        assert trade.best_estimate == best.screen == max(t.screen or 0 for t in drawn if broken_of(t))
    # the last search lines: a recommendation of a KEEP, or the honest answer with the trade-off
    if record.recommended is not None:
        assert record.recommended in finalists and f"search: recommend {record.recommended}: KEEP (" in out
    elif record.best_is_baseline:
        assert "search: your current configuration is the best found" in out, out[-3000:]
    else:
        assert f"{NO_BETTER}: " in out, out[-3000:]
        if trade.best_name is not None:
            assert f"search: to take {trade.best_name}, relax " in out

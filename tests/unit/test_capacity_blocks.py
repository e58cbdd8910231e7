"""The baseline's capacity searched again on fresh launches (issue 42, item 3): each interleaved block runs
the capacity search into its own directory (``capacity.in_blocks``), a block without it is measured again
on resume, and an adaptive candidate's looks judge without the capacity gate, whose search runs after
them (they read "not run", which made every look incomplete and stopped the loop at its first look)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.files import read_model
from contracts.layout import CAPACITY_FILE, block_dir
from contracts.results import CapacityResult
from contracts.sweepdir import load_baseline
from orchestrator.ledger.events import RepeatLooked
from orchestrator.measure.candidate import run_candidate
from orchestrator.measure.interleave import measure_block
from orchestrator.servers.context import SweepContext
from report.export import summary_rows
from tests.unit.composed import load
from tests.unit.fakes import FakeSupervisor, fake_seams
from tests.unit.test_capacity_sweep import CAPACITY, OVERRIDES, CapacityLoad


def _ctx(tmp_path: Path, *extra: str) -> tuple[SweepContext, CapacityLoad, list[str]]:
    cfg, _ = load([*OVERRIDES, *extra])
    fake, said = CapacityLoad(), []
    return SweepContext.open(cfg, tmp_path / "sweep", fake_seams(FakeSupervisor(), fake, said)), fake, said


@pytest.mark.parametrize(
    ("extra", "searched", "first"),
    [
        ((), True, "capacity/c8/a1/summary.json"),
        # The block's own decode_heavy run (its recovery profile: one wave of 128) is level 128's first run.
        (("capacity.start=128", "capacity.waves=1"), True, "decode_heavy/r1/summary.json"),
        (("capacity.in_blocks=false",), False, ""),
    ],
)
def test_a_block_searches_the_baselines_capacity_again(
    tmp_path: Path, extra: tuple[str, ...], *, searched: bool, first: str
) -> None:
    """Before: a block ran the recovery profiles only; the baseline had one capacity search per sweep."""
    ctx, fake, said = _ctx(tmp_path, *extra)
    measure_block(ctx, ctx.cfg.baseline, after="cand")
    path = block_dir(ctx.dir, "baseline", "cand") / CAPACITY_FILE
    assert path.exists() is searched
    if not searched:
        return
    result = read_model(path, CapacityResult)
    assert result.low is not None and result.high is not None and result.low <= CAPACITY < result.high
    assert result.points[0].summary_file == first
    assert any(s.startswith("baseline (block after cand): capacity ") for s in said), said
    # summaries.csv has a row per run of the block's search, after the opening's (none here).
    base = load_baseline(ctx.dir, "candidates/baseline", "baseline")
    rows = [r for r in summary_rows(ctx.dir, {"baseline": base}) if r["source"] == "capacity"]
    assert len(rows) == len(result.points)
    assert all(str(r["summary_file"]).startswith("candidates/baseline/blocks/after-cand/") for r in rows)
    # Complete: resume skips it; without its search the block is measured again, search included.
    calls = len(fake.calls)
    measure_block(ctx, ctx.cfg.baseline, after="cand")
    assert len(fake.calls) == calls
    path.unlink()
    measure_block(ctx, ctx.cfg.baseline, after="cand")
    assert path.exists() and len(fake.calls) > calls


def test_an_adaptive_look_is_not_incomplete_for_the_capacity_search_that_follows_it(tmp_path: Path) -> None:
    ctx, _, _ = _ctx(tmp_path, "run.min_repeats=1", "run.max_repeats=3")
    run_candidate(ctx, ctx.cfg.baseline, role="baseline")
    candidate = ctx.cfg.baseline.__class__(**{**ctx.cfg.baseline.__dict__, "name": "cand"})
    run_candidate(ctx, candidate)
    looks = [e for e in ctx.journal.events() if isinstance(e, RepeatLooked)]
    assert looks and all(e.decision != "incomplete" for e in looks), looks
    assert (ctx.candidate_dir("cand") / CAPACITY_FILE).exists()

"""Capacity figures say what was measured (issue 42, item 16): a capacity the search never measured beyond is
"\u2265 16" (the highest level it ran), never "capacity.max_level (32)" when 32 was never run, in the
search's notes and line, the report (Markdown, terminal, HTML), the search's trial, winner and confirmation
lines and its choice among equal estimates; the same configuration searched on several launches shows
their spread (16 then 8 is launch-to-launch variance, item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.files import read_model, write_model
from contracts.layout import CAPACITY_FILE, SweepPaths
from contracts.results import CapacityResult
from contracts.trials import SearchRecord, TrialRecord, Winner, read_search, write_search
from contracts.verdicts import DriftResult, SweepVerdict, Verdict
from orchestrator.measure.candidate import run_candidate
from orchestrator.search.confirm import confirmation_lines
from orchestrator.search.lines import trial_line
from orchestrator.search.rules import best_trial
from orchestrator.servers.context import SweepContext
from report.slo import CapacityLine, capacity_short, capacity_text
from tests.unit.composed import load
from tests.unit.fakes import FakeSupervisor, fake_seams
from tests.unit.test_capacity_sweep import OVERRIDES, CapacityLoad

# CapacityLoad's server holds the SLO up to 37 in flight; the search starts at 8 and doubles.


@pytest.mark.parametrize(
    ("extra", "note", "line", "never"),
    [
        # 8, 16, 32 held and max_points (3) ran out: 64 and max_level (512) were never run.
        pytest.param(
            ["capacity.max_points=3"],
            "the SLO held at every level tried, up to 32; capacity.max_points (3) ran out before "
            "capacity.max_level (512) was tried: the capacity is \u2265 32, not known above it",
            "baseline: capacity \u2265 32 concurrent at SLO",
            "held at capacity.max_level",
            id="budget_ran_out_while_it_held",
        ),
        # max_level 32 was run and held: that is what the note says.
        pytest.param(
            ["capacity.max_level=32"],
            "the SLO held at capacity.max_level (32): the capacity is \u2265 32, not known above it",
            "baseline: capacity \u2265 32 concurrent at SLO",
            "unbounded",
            id="max_level_held",
        ),
        # 128 and 64 failed and max_points (2) ran out: capacity.min_level (1) was never run.
        pytest.param(
            ["capacity.start=128", "capacity.max_points=2"],
            "the SLO held at no level tried, down to 64; capacity.max_points (2) ran out before "
            "capacity.min_level (1) was tried: the capacity is < 64; more capacity.max_points or a lower "
            "capacity.start measures it",
            "baseline: capacity < 64 concurrent at SLO",
            "failed even at capacity.min_level",
            id="budget_ran_out_while_it_failed",
        ),
    ],
)
def test_the_searchs_notes_and_line_never_claim_a_level_it_did_not_run(
    tmp_path: Path, extra: list[str], note: str, line: str, never: str
) -> None:
    cfg, _ = load([*OVERRIDES, *extra])
    said: list[str] = []
    ctx = SweepContext.open(cfg, tmp_path / "sweep", fake_seams(FakeSupervisor(), CapacityLoad(), said))
    run_candidate(ctx, ctx.cfg.baseline, role="baseline")
    result = read_model(ctx.candidate_dir("baseline") / CAPACITY_FILE, CapacityResult)
    assert note in result.notes, result.notes
    assert any(s.startswith(line) for s in said), said
    assert not any(never in n for n in result.notes) and not any(never in s for s in said)


def _line(capacity: float | None, high: float | None, **kw: object) -> CapacityLine:
    return CapacityLine.model_validate(
        {
            "candidate": "s_t007",
            "profile": "decode_heavy",
            "unit": "concurrent",
            "slo": "interactive",
            "slo_text": "",
            "capacity": capacity,
            "high": high,
            "runs": 3,
            "goodput_tps": None,
            "tps_per_gpu": None,
            "tps_per_user": None,
            "lowest": 4.0,
            **kw,
        }
    )


@pytest.mark.parametrize(
    ("line", "text", "short"),
    [
        (_line(16, 19), "s_t007: capacity 16 concurrent [16, 19) (3 runs)", "16"),
        (
            _line(16, None),
            "s_t007: capacity \u2265 16 concurrent (the SLO held at every level tried) (3 runs)",
            "\u2265 16",
        ),
        (_line(None, 4), "s_t007: capacity < 4 concurrent (the SLO held at no level tried) (3 runs)", "< 4"),
        (
            _line(16, None, ratio=1.2, interval=(1.1, float("inf")), status="pass", bound="\u2265"),
            "s_t007: capacity \u2265 16 concurrent (the SLO held at every level tried), "
            "\u2265 1.20x [unbounded] of b",
            "\u2265 16",
        ),
        # The same configuration searched on two launches, 16 then 8: the spread is shown.
        (
            _line(16, 19, launches=[16.0, 8.0]),
            "s_t007: capacity 16 concurrent [16, 19); the same configuration measured 16, 8 concurrent on 2 "
            "launches (spread 49%) (3 runs)",
            "16",
        ),
    ],
)
def test_the_reports_capacity_is_what_was_measured(line: CapacityLine, text: str, short: str) -> None:
    """Before: "capacity 16 concurrent [16, unbounded)" and "16" where 16 was only the highest level run."""
    assert capacity_text(line, "b").startswith(text.removesuffix(" (3 runs)")), capacity_text(line, "b")
    assert capacity_short(line) == short


def _trial(number: int, value: float, *, at_least: bool = False) -> TrialRecord:
    return TrialRecord(
        number=number,
        name=f"s_t{number:03d}",
        params={"max_num_seqs": number},
        state="complete",
        fidelity="full",
        values=[value],
        launches=1,
        at_least=at_least,
    )


def test_a_trial_at_its_search_ceiling_reads_at_least_and_wins_its_tie(tmp_path: Path) -> None:
    from contracts.search import SearchConfig

    search = SearchConfig(name="s", space={"max_num_seqs": "choice(1, 2)"}, objective="capacity")
    assert trial_line(_trial(3, 16, at_least=True), search).endswith("(capacity estimate \u2265 16)")
    assert trial_line(_trial(3, 16), search).endswith("(capacity estimate 16)")
    record = SearchRecord(name="s", objective="capacity", directions=["maximize"], space_size=10, trials=[])
    # Equal estimates: one measured 16 and failed above, the other held at 16 and was never run above.
    record.trials = [_trial(3, 16), _trial(6, 16, at_least=True)]
    found = best_trial(record)
    assert found is not None and found.number == 6


@pytest.mark.parametrize(
    ("high", "shown"), [(None, "confirmation's capacity \u2265 16"), (19.0, "confirmation's capacity 16;")]
)
def test_the_confirmations_capacity_is_what_it_measured(
    tmp_path: Path, high: float | None, shown: str
) -> None:
    record = SearchRecord(
        name="s",
        objective="capacity",
        directions=["maximize"],
        space_size=10,
        trials=[_trial(0, 16, at_least=True)],
    )
    record.winner = Winner(
        name="s_t000", trial=0, params={}, estimate=[16.0], yaml_file="search/winner.yaml", at_least=True
    )
    write_search(tmp_path, record)
    found = CapacityResult(
        candidate="s_t000",
        profile="decode_heavy",
        mode="concurrency",
        unit="concurrent",
        slo="s",
        slo_text="",
        capacity=16,
        low=16,
        high=high,
        resolution=0.1,
        gpus=8,
    )
    path = SweepPaths(tmp_path).candidate("s_t000").capacity
    path.parent.mkdir(parents=True)
    write_model(path, found)
    verdicts = SweepVerdict(
        baseline="b",
        retained="b",
        retained_reason="",
        drift=DriftResult.model_construct(),
        verdicts=[Verdict(candidate="s_t000", decision="neutral", reason="r")],
    )
    line = confirmation_lines(tmp_path, verdicts)[0]  # the finalist's own line
    assert "search's estimate \u2265 16" in line and shown in line, line
    confirmation = read_search(tmp_path).confirmation  # type: ignore[union-attr]
    assert confirmation is not None and confirmation.at_least is (high is None)

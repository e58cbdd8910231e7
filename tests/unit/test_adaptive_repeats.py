"""Adaptive repeats in the sweep's measuring loop (fake seams): looks, the stop, the journal, resume.

The fake load writes what the load runner writes (records with their TTFT, the client's dispatch lag in
the summary), so every gate the loop's looks ask reads what it would read in a sweep.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from contracts.files import write_jsonl, write_model
from contracts.layout import RECORDS_FILE, SUMMARY_FILE
from contracts.schema import WorkloadConfig
from orchestrator.ledger.events import RepeatLooked, RepeatsSettled
from orchestrator.measure.begin import begin
from orchestrator.measure.candidate import is_complete, run_candidate
from orchestrator.servers.context import SweepContext
from tests.unit.composed import load
from tests.unit.fakes import FakeSupervisor, fake_seams, summary
from tests.unit.gates_fixtures import lognormal_quantiles, make_records

OVERRIDES = [
    "run.repeats=3",
    "run.min_repeats=2",
    "run.max_repeats=4",
    "run.profiles=[serial,decode_heavy]",
    "run.recovery_profiles=[decode_heavy]",
    "gates.loaded_profiles=[decode_heavy]",
    "gates.accepted_profiles=[decode_heavy]",
]


#: Per-repeat factors of a run's median TTFT and tokens/s (run-to-run spread, both sides alike).
SPREAD = {1: 1.0, 2: 1.02, 3: 0.98, 4: 1.01, 5: 0.99}


@dataclass
class ScriptedLoad:
    """Writes what the load runner writes, per call: a summary with the client's p99 dispatch lag and
    records whose TTFT the gates read. The candidate's decode_heavy output tok/s per repeat from
    ``script``; its loaded median TTFT ``ttft`` times the baseline's (0.30 s), its lag ``lag`` (s); the
    baseline's lag ``baseline_lag``."""

    script: dict[int, float]
    ttft: float = 1.0
    lag: float = 0.0
    baseline_lag: float = 0.0
    calls: list[tuple[str, str, int]] = field(default_factory=list)

    def __call__(self, base_url: str, served_model: str, workload: WorkloadConfig, **kw: Any) -> object:
        name, profile, repeat = kw["candidate"], workload.name, kw["repeat"]
        self.calls.append((name, profile, repeat))
        spread = SPREAD.get(repeat, 1.0)
        baseline = name == "baseline"
        tps = 1000.0
        if not baseline and profile == "decode_heavy":
            tps = self.script.get(repeat, 1000.0)
        elif profile == "decode_heavy":
            tps = 1000.0 + 5 * repeat  # run-to-run spread like the candidate's
        loaded = profile != "serial"
        median = (0.30 if loaded else 0.05) * spread * (1.0 if baseline or not loaded else self.ttft)
        measured = make_records(lognormal_quantiles(median, 0.2, RECORDS, shift=repeat), output_tokens=64)
        lag = (self.baseline_lag if baseline else self.lag) if loaded else 0.0
        result = summary(name, profile, repeat, kw["fingerprint"], n=RECORDS, output_tps=tps)
        client = result.client.model_copy(
            update={"dispatch_lag_p50_s": lag / 2, "dispatch_lag_p99_s": lag, "dispatch_lag_max_s": lag}
        )
        result = result.model_copy(update={"client": client})
        write_model(kw["out_dir"] / SUMMARY_FILE, result)
        write_jsonl(kw["out_dir"] / RECORDS_FILE, measured)
        return result


RECORDS = 16


def _sweep(tmp_path: Path, load_fn: ScriptedLoad) -> SweepContext:
    cfg, _ = load(OVERRIDES)
    ctx = SweepContext.open(cfg, tmp_path / "sweep", fake_seams(FakeSupervisor(), load_fn))  # type: ignore[arg-type]
    begin(ctx)
    run_candidate(ctx, cfg.baseline, role="baseline")
    return ctx


def _candidate(name: str):  # type: ignore[no-untyped-def]
    return load([*OVERRIDES, f"candidate={name}"])[0].candidate


def _repeats(load_fn: ScriptedLoad, name: str) -> list[int]:
    return sorted({r for c, p, r in load_fn.calls if c == name and p == "decode_heavy"})


@pytest.mark.parametrize(
    ("script", "stops"),
    [
        # 5x lower: beyond what two outlier runs can produce (the two-run guard's 4x), decided at look 2.
        pytest.param({1: 200.0, 2: 202.0}, 2, id="5x_lower_stops_at_the_first_look"),
        # 2x lower on two runs against three: both could be the host's slow runs (one in ten 3x slower),
        # so the first look decides nothing below 4x (gates.stats.two_run_guard, issue 42 item 10) and
        # the third run decides it (it stopped at look 2 before the guard).
        pytest.param({1: 500.0, 2: 505.0, 3: 495.0}, 3, id="2x_lower_stops_at_the_first_look_with_3_runs"),
    ],
)
def test_a_clear_regression_stops_at_the_first_look_that_can_decide_it(
    tmp_path: Path, script: dict[int, float], stops: int
) -> None:
    load_fn = ScriptedLoad(script)
    ctx = _sweep(tmp_path, load_fn)
    run = run_candidate(ctx, _candidate("tp4_dp2"))
    assert _repeats(load_fn, "tp4_dp2") == list(range(1, stops + 1))
    assert run.profiles == [f"{p}/r{k}" for k in range(1, stops + 1) for p in ("serial", "decode_heavy")]
    events = ctx.journal.events()
    looks = [e for e in events if isinstance(e, RepeatLooked)]
    expected = [("tp4_dp2", k, "inconclusive") for k in range(2, stops)] + [("tp4_dp2", stops, "reject")]
    assert [(e.candidate, e.repeats, e.decision) for e in looks] == expected
    assert [(e.repeats, e.decision) for e in events if isinstance(e, RepeatsSettled)] == [(stops, "reject")]
    assert _repeats(load_fn, "baseline") == [1, 2, 3]  # the baseline runs run.repeats


def test_an_unsettled_verdict_runs_more_repeats_up_to_the_most(tmp_path: Path) -> None:
    load_fn = ScriptedLoad({1: 800.0, 2: 1000.0, 3: 800.0, 4: 1000.0})  # 10% lower, very noisy
    ctx = _sweep(tmp_path, load_fn)
    run_candidate(ctx, _candidate("tp4_dp2"))
    assert _repeats(load_fn, "tp4_dp2") == [1, 2, 3, 4]
    looks = [(e.repeats, e.decision) for e in ctx.journal.events() if isinstance(e, RepeatLooked)]
    assert looks == [(2, "inconclusive"), (3, "inconclusive")]  # no look at the most: nothing follows
    settled = [e for e in ctx.journal.events() if isinstance(e, RepeatsSettled)]
    assert [(e.repeats, e.decision) for e in settled] == [(4, "inconclusive")]


def test_resume_reuses_a_candidate_that_stopped_early_and_reruns_an_unfinished_one(tmp_path: Path) -> None:
    load_fn = ScriptedLoad({1: 500.0, 2: 505.0})
    ctx = _sweep(tmp_path, load_fn)
    run_candidate(ctx, _candidate("tp4_dp2"))
    assert is_complete(ctx, "tp4_dp2")  # 2 repeats, settled: complete although max_repeats is 4
    calls = len(load_fn.calls)
    run_candidate(ctx, _candidate("tp4_dp2"))
    assert len(load_fn.calls) == calls  # skipped
    # The same results without the journal's "settled" line: an interrupted loop, measured again.
    journal = ctx.dir / "journal.jsonl"
    journal.write_text(
        "".join(line + "\n" for line in journal.read_text().splitlines() if "repeats_settled" not in line)
    )
    assert not is_complete(ctx, "tp4_dp2")


def _looks(ctx: SweepContext) -> list[tuple[int, str | None]]:
    return [(e.repeats, e.decision) for e in ctx.journal.events() if isinstance(e, RepeatLooked)]


def _settled(ctx: SweepContext) -> list[tuple[int, str | None]]:
    return [(e.repeats, e.decision) for e in ctx.journal.events() if isinstance(e, RepeatsSettled)]


@pytest.mark.parametrize(
    ("ttft", "looks"),
    [
        pytest.param(5.0, [(2, "reject")], id="5x_rejected_at_the_first_look"),
        # 2x on two runs: within what two outlier runs can produce (the two-run guard), the third decides.
        pytest.param(2.0, [(2, "inconclusive"), (3, "reject")], id="2x_rejected_at_the_third_run"),
    ],
)
def test_a_loaded_ttft_regression_in_the_records_stops_at_the_first_look_that_can_decide_it(
    tmp_path: Path, ttft: float, looks: list[tuple[int, str]]
) -> None:
    """Tokens/s unchanged; the records' loaded median TTFT several times the baseline's: rejected on the
    concurrency gate's TTFT, which only the records carry."""
    load_fn = ScriptedLoad({}, ttft=ttft)
    ctx = _sweep(tmp_path, load_fn)
    run_candidate(ctx, _candidate("tp4_dp2"))
    assert _repeats(load_fn, "tp4_dp2") == list(range(1, looks[-1][0] + 1))
    assert _looks(ctx) == looks and _settled(ctx) == [looks[-1]]


def test_the_same_records_without_an_effect_settle_neutral(tmp_path: Path) -> None:
    """The contrast: the same records at the baseline's TTFT and no lag are nothing to reject or keep."""
    load_fn = ScriptedLoad({})
    ctx = _sweep(tmp_path, load_fn)
    run_candidate(ctx, _candidate("tp4_dp2"))
    assert _looks(ctx) == [(2, "neutral")] and _settled(ctx) == [(2, "neutral")]


def test_a_ttft_the_clients_lag_could_hide_stops_the_loop_incomplete(tmp_path: Path) -> None:
    """The records' loaded TTFT equals the baseline's, but the candidate's runs were sent 0.12 s late at
    p99: undone, its TTFT could be 1.4x the baseline's (issue 32: the lag rule both ways). More repeats
    cannot settle what the client did, so the first look whose far end is beyond noise stops the loop
    (futility) as incomplete: the third run's (two runs decide nothing below 4x, the two-run guard, so at
    the far end of the lag's bounds the second look's change is within noise: inconclusive, gates.lag).
    The fake records carry no lateness of their own: the summary's p99 counts, as for an older summary."""
    load_fn = ScriptedLoad({}, lag=0.12)
    ctx = _sweep(tmp_path, load_fn)
    run_candidate(ctx, _candidate("tp4_dp2"))
    assert _repeats(load_fn, "tp4_dp2") == [1, 2, 3]
    assert _looks(ctx) == [(2, "inconclusive"), (3, "incomplete")] and _settled(ctx) == [(3, "incomplete")]


def test_a_regression_beyond_the_baselines_lag_is_still_rejected(tmp_path: Path) -> None:
    """The baseline's runs sent 0.05 s late: against 0.30 + 0.05 s a 5x TTFT is still 4.3x, a regression
    whatever the lag and beyond what two outlier runs can produce: rejected at the first look, as without
    the lag."""
    load_fn = ScriptedLoad({}, ttft=5.0, baseline_lag=0.05)
    ctx = _sweep(tmp_path, load_fn)
    run_candidate(ctx, _candidate("tp4_dp2"))
    assert _looks(ctx) == [(2, "reject")]

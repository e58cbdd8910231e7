"""Adaptive repeats in the sweep's measuring loop (fake seams): looks, the stop, the journal, resume."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts.results import write_jsonl, write_model
from contracts.schema import WorkloadConfig
from orchestrator.config.compose import load
from orchestrator.ledger.events import RepeatLooked, RepeatsSettled
from orchestrator.measure.candidate import is_complete, run_candidate
from orchestrator.measure.opening import begin
from orchestrator.servers.context import SweepContext
from tests.unit.fakes import FakeSupervisor, fake_seams, records, summary

OVERRIDES = [
    "run.repeats=3",
    "run.min_repeats=2",
    "run.max_repeats=4",
    "run.profiles=[serial,decode_heavy]",
    "run.recovery_profiles=[decode_heavy]",
    "gates.loaded_profiles=[decode_heavy]",
    "gates.accepted_profiles=[decode_heavy]",
]


@dataclass
class ScriptedLoad:
    """Writes a summary per call; the candidate's decode_heavy output tok/s per repeat from a script."""

    script: dict[int, float]
    calls: list[tuple[str, str, int]] = field(default_factory=list)

    def __call__(self, base_url: str, served_model: str, workload: WorkloadConfig, **kw: Any) -> object:
        key = (kw["candidate"], workload.name, kw["repeat"])
        self.calls.append(key)
        tps = 1000.0
        if kw["candidate"] != "baseline" and workload.name == "decode_heavy":
            tps = self.script.get(kw["repeat"], 1000.0)
        elif workload.name == "decode_heavy":
            tps = 1000.0 + 5 * kw["repeat"]  # run-to-run spread like the candidate's
        result = summary(kw["candidate"], workload.name, kw["repeat"], kw["fingerprint"], output_tps=tps)
        write_model(kw["out_dir"] / "summary.json", result)
        write_jsonl(kw["out_dir"] / "records.jsonl", records(result.num_requests))
        return result


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


def test_a_clear_regression_stops_at_the_first_look(tmp_path: Path) -> None:
    load_fn = ScriptedLoad({1: 500.0, 2: 505.0})  # half the baseline's tokens/s, twice
    ctx = _sweep(tmp_path, load_fn)
    run = run_candidate(ctx, _candidate("tp4_dp2"))
    assert _repeats(load_fn, "tp4_dp2") == [1, 2]
    assert run.profiles == ["serial/r1", "decode_heavy/r1", "serial/r2", "decode_heavy/r2"]
    events = ctx.journal.events()
    looks = [e for e in events if isinstance(e, RepeatLooked)]
    assert [(e.candidate, e.repeats, e.decision) for e in looks] == [("tp4_dp2", 2, "reject")]
    assert [(e.repeats, e.decision) for e in events if isinstance(e, RepeatsSettled)] == [(2, "reject")]
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

"""Confirmation runs (gates/confirm.py, issue 21): a profile whose runs disagree beyond 2x, or whose slow
outlier run set aside leaves fewer than the repeats asked for, is measured again, and the verdict reads
the runs that settle it; the sweep's loop, its resume and the evidence check agree on them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from contracts.sweepdir import load_results
from gates import evaluate_sweep
from gates.confirm import disagree, disagreement, to_confirm
from gates.evidence import Expected, evidence_gaps
from orchestrator.measure.candidate import is_complete, run_candidate
from orchestrator.servers.context import SweepContext
from tests.unit.composed import load
from tests.unit.gates_fixtures import BASELINE, SweepBuilder, baseline_like
from tests.unit.test_adaptive_repeats import OVERRIDES, ScriptedLoad, _candidate, _repeats, _sweep
from tests.unit.test_gates_incomplete import CFG


@pytest.mark.parametrize(
    ("values", "slow", "expected"),
    [
        ([0.40, 0.41, 0.39], "higher", False),  # agree
        ([0.40, 0.41, 1.25], "higher", False),  # one slow run of three: set aside, the rest agree
        ([0.40, 1.20, 1.25], "higher", True),  # two of three slow: which are the outliers?
        ([0.40, 1.20], "higher", True),  # two runs 3x apart
        ([0.40, 0.62, 0.50], "higher", False),  # within 2x: the prefill-wave clusters stay in
        ([9800.0, 3300.0, 3200.0], "lower", True),  # tokens/s: two slow (low) runs of three
        ([9800.0, 9700.0, 3200.0], "lower", False),
        ([3300.0, 9800.0, 9700.0], "higher", True),  # read as a latency, the one fast run is no outlier
        ([0.40, 1.20, 1.25, 0.41, 0.39], "higher", False),  # two slow of five: set aside
        ([0.40, 1.20, 1.25, 1.30, 0.39], "higher", True),  # three slow of five: a majority
        ([0.40], "higher", False),
        ([0.40, float("inf"), 0.41], "higher", False),  # a censored run is evidence, not noise
        ([0.0, 0.40, 0.41], "lower", False),
    ],
)
def test_which_runs_disagree(values: list[float], slow: str, expected: bool) -> None:
    assert disagree(values, slow) is expected  # type: ignore[arg-type]


def _slow_runs(root: Path, name: str, factors: dict[int, float], *, repeats: int = 3) -> None:
    """``name``'s decode_heavy runs like the baseline's, run k slower by ``factors[k]`` (tokens/s down,
    TTFT up)."""
    fig = BASELINE["decode_heavy"]
    b = SweepBuilder(root, repeats=1)
    run_dir = root / "candidates" / name / "decode_heavy"
    for k in range(repeats):
        f = factors.get(k, 1.0)
        b.loaded(
            name,
            "decode_heavy",
            output_tps=fig["output_tps"] / f,
            prompt_tps=fig["prompt_tps"] / f,
            ttft=fig["ttft"] * f,
            noise=0.0,
            root=f"scratch/{k}",
        )
        (root / "scratch" / str(k) / "decode_heavy" / "r0").rename(run_dir / f"r{k}")
        summary = run_dir / f"r{k}" / "summary.json"
        summary.write_text(summary.read_text().replace('"repeat": 0,', f'"repeat": {k},'))
    shutil.rmtree(root / "scratch")


def _twins(root: Path, slow: dict[int, float], *, runs: int = 3) -> None:
    b = SweepBuilder(root)
    b.run("baseline", is_baseline=True, free_gib=[1.0] * 8)
    baseline_like(b, "baseline")
    b.run("cand", free_gib=[1.0] * 8)
    baseline_like(b, "cand")
    shutil.rmtree(root / "candidates" / "cand" / "decode_heavy")
    (root / "candidates" / "cand" / "decode_heavy").mkdir()
    _slow_runs(root, "cand", slow, repeats=runs)


def test_two_slow_runs_of_three_are_confirmed_and_the_verdict_reads_the_runs_that_settle_it(
    tmp_path: Path,
) -> None:
    _twins(tmp_path, {1: 3.0, 2: 3.0})
    cand = load_results(tmp_path, "candidates/cand", "cand")
    found = to_confirm(cand, ["serial", "prefill_10k", "decode_heavy"], repeats=3, extra=2)
    assert [d.profile for d in found] == ["decode_heavy"]
    assert found[0].figure == "output tokens/s" and "disagree beyond 2x" in found[0].message()
    before = evaluate_sweep(tmp_path, CFG, baseline="baseline").verdicts[0]
    assert before.decision == "inconclusive"  # three runs cannot say whether the configuration is 3x slower
    # Two confirmation runs like the first: the two slow runs are a minority of five, set aside.
    _twins(tmp_path, {1: 3.0, 2: 3.0}, runs=5)
    cand = load_results(tmp_path, "candidates/cand", "cand")
    assert to_confirm(cand, ["decode_heavy"], repeats=3, extra=2) == []
    after = evaluate_sweep(tmp_path, CFG, baseline="baseline").verdicts[0]
    assert after.decision == "neutral", after.reason
    concurrency = next(g for g in after.gates if g.gate == "concurrency")
    assert any("2 outlier runs of 5" in c.message for c in concurrency.comparisons)


def test_a_slow_run_set_aside_is_replaced_and_a_real_slowdown_is_never_confirmed(tmp_path: Path) -> None:
    _twins(tmp_path, {0: 3.0})  # one slow run of three: set aside, two left of three asked for
    found = disagreement(
        "decode_heavy", load_results(tmp_path, "candidates/cand", "cand").repeats("decode_heavy"), 3
    )
    assert found is not None and found.set_aside and "one more run replaces it" in found.message()
    _twins(tmp_path, {0: 3.0}, runs=4)
    assert (
        to_confirm(load_results(tmp_path, "candidates/cand", "cand"), ["decode_heavy"], repeats=3, extra=2)
        == []
    )
    _twins(tmp_path, {0: 3.0, 1: 3.0, 2: 3.0})  # 3x slower in every run: the configuration, no outlier
    assert (
        to_confirm(load_results(tmp_path, "candidates/cand", "cand"), ["decode_heavy"], repeats=3, extra=2)
        == []
    )


def test_confirmation_stops_at_the_most_runs_and_skips_short_profiles(tmp_path: Path) -> None:
    _twins(tmp_path, {1: 3.0, 2: 3.0, 3: 3.0}, runs=5)  # three slow of five: still disagreeing
    cand = load_results(tmp_path, "candidates/cand", "cand")
    assert [d.profile for d in to_confirm(cand, ["decode_heavy"], repeats=3, extra=3)] == ["decode_heavy"]
    assert to_confirm(cand, ["decode_heavy"], repeats=3, extra=2) == []  # 3 + 2 runs: the most
    assert to_confirm(cand, ["decode_heavy"], repeats=3, extra=0) == []
    assert to_confirm(cand, ["decode_heavy"], repeats=6, extra=2) == []  # fewer runs than repeats: a gap


def test_confirmation_runs_are_no_gap_of_a_fixed_candidate(tmp_path: Path) -> None:
    _twins(tmp_path, {1: 3.0, 2: 3.0}, runs=5)
    expected = Expected(
        baseline={"serial": 3, "prefill_10k": 3, "decode_heavy": 3, "answer_gate": 1},
        own={"answer_gate": 1},
        candidate_repeats=3,
    )
    cand = load_results(tmp_path, "candidates/cand", "cand")
    base = load_results(tmp_path, "candidates/baseline", "baseline")
    assert evidence_gaps(cand, base, expected) == []
    adaptive = Expected(expected.baseline, expected.own, 1, adaptive=True)  # 5 repeats ran: 3 of 5 missing
    assert {g.file for g in evidence_gaps(cand, base, adaptive)} == {
        "candidates/cand/serial",
        "candidates/cand/prefill_10k",
    }


@pytest.mark.parametrize(
    ("side", "runs", "confirm_runs", "owed"),
    [
        pytest.param("cand", 3, 2, True, id="candidate_two_slow_of_three"),
        pytest.param("cand", 4, 2, True, id="candidate_one_confirmation_of_two"),
        pytest.param("cand", 5, 2, False, id="candidate_confirmed_to_the_most"),
        pytest.param("cand", 3, 0, False, id="confirmation_runs_off"),
        pytest.param("baseline", 3, 2, True, id="baseline_two_slow_of_three"),
    ],
)
def test_confirmation_runs_still_owed_are_a_gap_as_resume_treats_them(
    tmp_path: Path, side: str, runs: int, confirm_runs: int, owed: bool
) -> None:
    """Runs 1 and 2 of decode_heavy 3x slow, ``runs`` on disk: with fewer than ``repeats + confirm_runs``
    the sweep owes a confirmation run (resume measures the launch again: orchestrator.measure.candidate
    .is_complete), so the verdict is incomplete with the resume command, never read from the 3 runs."""
    b = SweepBuilder(tmp_path)
    for name in ("baseline", "cand"):
        b.run(name, is_baseline=name == "baseline", free_gib=[1.0] * 8)
        baseline_like(b, name)
    shutil.rmtree(tmp_path / "candidates" / side / "decode_heavy")
    (tmp_path / "candidates" / side / "decode_heavy").mkdir()
    _slow_runs(tmp_path, side, {1: 3.0, 2: 3.0}, repeats=runs)
    profiles = {"serial": 3, "prefill_10k": 3, "decode_heavy": 3, "answer_gate": 1}
    expected = Expected(profiles, {"answer_gate": 1}, 3, confirm_runs=confirm_runs)
    cand = load_results(tmp_path, "candidates/cand", "cand")
    base = load_results(tmp_path, "candidates/baseline", "baseline")
    gaps = evidence_gaps(cand, base, expected)
    assert [(g.kind, g.side, g.file) for g in gaps] == (
        [
            (
                "missing_repeats",
                "candidate" if side == "cand" else "baseline",
                f"candidates/{side}/decode_heavy",
            )
        ]
        if owed
        else []
    )
    if owed:
        assert (
            f"a confirmation run is owed (decode_heavy: output tokens/s of its {runs} runs" in gaps[0].message
        )
        assert f"{runs} of at most {3 + confirm_runs} run(s) on disk" in gaps[0].message
        verdict = evaluate_sweep(tmp_path, CFG, baseline="baseline", expected=expected).verdicts[0]
        assert verdict.decision == "incomplete" and verdict.resume is not None, verdict.reason


FIXED = [o for o in OVERRIDES if "min_repeats" not in o and "max_repeats" not in o]


def _fixed_sweep(tmp_path: Path, load_fn: ScriptedLoad, *extra: str) -> SweepContext:
    from orchestrator.measure.begin import begin
    from tests.unit.fakes import FakeSupervisor, fake_seams

    cfg, _ = load([*FIXED, *extra])
    ctx = SweepContext.open(cfg, tmp_path / "sweep", fake_seams(FakeSupervisor(), load_fn))  # type: ignore[arg-type]
    begin(ctx)
    run_candidate(ctx, cfg.baseline, role="baseline")
    return ctx


def test_the_sweep_measures_confirmation_runs_after_fixed_repeats_and_resume_finishes_them(
    tmp_path: Path,
) -> None:
    load_fn = ScriptedLoad({2: 330.0, 3: 320.0})  # decode_heavy: two runs of three 3x slower
    ctx = _fixed_sweep(tmp_path, load_fn)
    candidate = load([*FIXED, "candidate=tp4_dp2"])[0].candidate
    run = run_candidate(ctx, candidate)
    assert _repeats(load_fn, "tp4_dp2") == [1, 2, 3, 4, 5]  # two confirmation runs of decode_heavy
    assert run.profiles[-2:] == ["decode_heavy/r4", "decode_heavy/r5"]
    assert sorted({r for c, p, r in load_fn.calls if c == "tp4_dp2" and p == "serial"}) == [1, 2, 3]
    assert _repeats(load_fn, "baseline") == [1, 2, 3]  # its runs agree: none
    assert is_complete(ctx, "tp4_dp2")
    shutil.rmtree(ctx.candidate_dir("tp4_dp2") / "decode_heavy" / "r5")  # interrupted before the last one
    assert not is_complete(ctx, "tp4_dp2")


def test_a_set_aside_run_is_replaced_once_and_confirm_runs_0_turns_it_off(tmp_path: Path) -> None:
    load_fn = ScriptedLoad({2: 330.0})
    ctx = _fixed_sweep(tmp_path / "on", load_fn)
    run_candidate(ctx, load([*FIXED, "candidate=tp4_dp2"])[0].candidate)
    assert _repeats(load_fn, "tp4_dp2") == [1, 2, 3, 4]
    off = ScriptedLoad({2: 330.0})
    ctx = _fixed_sweep(tmp_path / "off", off, "run.confirm_runs=0")
    run_candidate(ctx, load([*FIXED, "run.confirm_runs=0", "candidate=tp4_dp2"])[0].candidate)
    assert _repeats(off, "tp4_dp2") == [1, 2, 3]


def test_an_adaptive_loop_that_settles_before_its_last_look_gets_no_confirmation_runs(tmp_path: Path) -> None:
    load_fn = ScriptedLoad({1: 1000.0, 2: 330.0})  # adaptive 2..4: more repeats settle it, not confirmations
    ctx = _sweep(tmp_path, load_fn)
    run_candidate(ctx, _candidate("tp4_dp2"))
    repeats = _repeats(load_fn, "tp4_dp2")
    serial = sorted({r for c, p, r in load_fn.calls if c == "tp4_dp2" and p == "serial"})
    assert repeats == serial and max(repeats) < 4  # whole repeats only, settled before the last look


def test_an_adaptive_loop_run_to_its_last_look_confirms_what_still_disagrees(tmp_path: Path) -> None:
    """Adaptive 2..4: decode_heavy's runs 1000/330/330/1000 tok/s still disagree after the last repeat
    (two slow of four: which are the outliers?), so it gets confirmation runs as a fixed candidate would;
    serial does not. The loop is settled after them (an interrupted confirmation re-measures the loop);
    the evidence check and the report count them on top of the 4 repeats, not as repeats serial lacks."""
    from contracts.sweepdir import load_results as load_sweep
    from orchestrator.ledger.events import LoadFinished, RepeatsSettled

    load_fn = ScriptedLoad({1: 1000.0, 2: 330.0, 3: 330.0, 4: 1000.0})
    ctx = _sweep(tmp_path, load_fn)
    run = run_candidate(ctx, _candidate("tp4_dp2"))
    assert _repeats(load_fn, "tp4_dp2") == [1, 2, 3, 4, 5, 6]  # two slow of six: set aside, 4 left
    assert sorted({r for c, p, r in load_fn.calls if c == "tp4_dp2" and p == "serial"}) == [1, 2, 3, 4]
    assert run.profiles[-2:] == ["decode_heavy/r5", "decode_heavy/r6"]
    events = [e for e in ctx.journal.events() if getattr(e, "candidate", None) == "tp4_dp2"]
    settled = [i for i, e in enumerate(events) if isinstance(e, RepeatsSettled)]
    assert [events[i].repeats for i in settled] == [4]  # type: ignore[attr-defined]
    last_run = max(i for i, e in enumerate(events) if isinstance(e, LoadFinished))
    assert settled[0] > last_run  # settled after its confirmation runs
    assert is_complete(ctx, "tp4_dp2")
    cfg = load(OVERRIDES)[0]
    counts = {p: len(r) for p, r in load_sweep(ctx.dir, "candidates/tp4_dp2", "tp4_dp2").profiles.items()}
    assert counts == {"serial": 4, "decode_heavy": 6}
    assert Expected.from_config(cfg).candidate(counts) == {"serial": 4, "decode_heavy": 4}


def test_a_negative_confirm_runs_is_refused_with_the_key() -> None:
    from contracts.errors import ConfigError

    with pytest.raises(ConfigError, match=r"run\.confirm_runs"):
        load(["run.confirm_runs=-1"])

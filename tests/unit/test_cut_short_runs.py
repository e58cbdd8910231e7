"""Runs cut short (issue 32, items 6 and 19; issue 42, item 6). A candidate's run stopped by its profile's
time bound, on a profile the baseline finished in time, is a finding of the concurrency requirement, not an
INCOMPLETE that resume re-measures forever: its requests completed per second against the baseline's, with
the throughput tolerance (gates/time_bound.py; the rule's own table: test_time_bound_rate.py). A bound hit
in a minority of runs is not alone a REJECT; a majority at a rate beyond the tolerance is. The baseline's
own time-bound run is a gap that says what would decide it. A run a hung server cut short is no
throughput sample anywhere: the reason is the hang.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from contracts.errors import EXIT_INCOMPLETE
from contracts.files import read_jsonl, read_model, write_jsonl, write_model
from contracts.results import LoadSettings, ProfileSummary, RequestRecord, WatchEvent
from contracts.schema import GatesConfig
from contracts.sweepdir import resume_command
from contracts.verdicts import SweepVerdict, Verdict
from gates import evaluate_sweep
from gates.evidence import Expected
from gates.judge import exit_code
from tests.unit.gates_fixtures import SweepBuilder, baseline_like, sweep_config

CFG = GatesConfig(
    accepted_profiles=["prefill_10k", "decode_heavy"],
    loaded_profiles=["prefill_10k", "decode_heavy"],
    bootstrap_resamples=300,
)
PROFILES = {"serial": 3, "prefill_10k": 3, "decode_heavy": 3, "answer_gate": 1}
EXPECTED = Expected(baseline=PROFILES, own={"answer_gate": 1}, candidate_repeats=3)
LIMIT_S = 600.0


def twins(root: Path, *, watch: tuple[WatchEvent, ...] = ()) -> None:
    """The baseline and ``cand``, identical to it, every profile measured (64 requests a loaded run)."""
    b = SweepBuilder(root)
    b.run("baseline", is_baseline=True, free_gib=[1.0] * 8)
    baseline_like(b, "baseline")
    b.run("cand", free_gib=[1.0] * 8, watch=list(watch))
    baseline_like(b, "cand")


def settings(profile: str, limit_s: float = LIMIT_S) -> LoadSettings:
    workload = dataclasses.replace(sweep_config().workloads[profile], time_limit_s=limit_s)
    return LoadSettings(
        base_url="http://127.0.0.1:8000",
        served_model="m",
        salt="s",
        scale=1.0,
        time_scale=1.0,
        prompts_dir=".",
        workload=workload,
    )


def cut(sweep: Path, directory: str, unfinished: int, *, time_bound: bool, limit_s: float = LIMIT_S) -> None:
    """Mark a written run as cut short with its last ``unfinished`` requests unfinished: by the profile's
    time bound of ``limit_s`` (``timeout``, as the load runner records it) or by a stop from outside
    (``cancelled``)."""
    path = sweep / directory / "summary.json"
    summary = read_model(path, ProfileSummary)
    records = read_jsonl(sweep / directory / summary.records_file, RequestRecord)
    error = "timeout" if time_bound else "cancelled"
    keep = len(records) - unfinished
    records = records[:keep] + [
        r.model_copy(update={"error": error, "first_visible_s": None, "end_s": None, "finish_reason": None})
        for r in records[keep:]
    ]
    write_jsonl(sweep / directory / summary.records_file, records)
    update = {
        "interrupted": True,
        "time_bound": time_bound,
        "completed": keep,
        "failed": unfinished,
        "errors": {error: unfinished},
        "settings": settings(summary.profile, limit_s),
    }
    write_model(path, summary.model_copy(update=update))


def judge(root: Path) -> tuple[SweepVerdict, Verdict]:
    sweep = evaluate_sweep(root, CFG, baseline="baseline", expected=EXPECTED)
    return sweep, next(v for v in sweep.verdicts if v.candidate == "cand")


# ------------------------------------------------------------------------------- item 6: the time bound


def candidate_too_slow(root: Path) -> None:
    """``cand``'s second and third decode_heavy runs hit the 600 s bound with 20 of their 64 requests
    unfinished (44 in 600 s: 0.0733 requests/s against the baseline's 2.96 in its 21.6 s runs)."""
    twins(root)
    cut(root, "candidates/cand/decode_heavy/r1", 20, time_bound=True)
    cut(root, "candidates/cand/decode_heavy/r2", 20, time_bound=True)


def candidate_too_slow_once(root: Path) -> None:
    """Only ``cand``'s second decode_heavy run hit the bound: a minority, set aside as an outlier run (its
    rate 0.025x the others'), not a REJECT."""
    twins(root)
    cut(root, "candidates/cand/decode_heavy/r1", 20, time_bound=True)


def candidate_just_over_twice(root: Path) -> None:
    """A bound of 21.7 s, just over the baseline's longest decode_heavy run (21.65 s): two of ``cand``'s
    runs stopped with one request unfinished, a rate 0.988x the baseline's, within the tolerance."""
    twins(root)
    cut(root, "candidates/cand/decode_heavy/r1", 1, time_bound=True, limit_s=21.7)
    cut(root, "candidates/cand/decode_heavy/r2", 1, time_bound=True, limit_s=21.7)


def both_too_slow(root: Path) -> None:
    """The baseline hit the bound on decode_heavy too: nothing says the candidate is slower."""
    candidate_too_slow(root)
    cut(root, "candidates/baseline/decode_heavy/r2", 5, time_bound=True)


def baseline_too_slow(root: Path) -> None:
    twins(root)
    cut(root, "candidates/baseline/prefill_10k/r0", 3, time_bound=True)


def candidate_stopped(root: Path) -> None:
    """The user stopped the candidate's run (Ctrl-C, ``stop``): a gap that resuming fills."""
    twins(root)
    cut(root, "candidates/cand/decode_heavy/r1", 20, time_bound=False)


TIME_BOUND_CASES: list[tuple[str, Callable[[Path], None], str, list[str], bool, str]] = [
    # (case, sweep, decision, gap kinds, a resume command, words the reason holds)
    (
        "candidate_too_slow",
        candidate_too_slow,
        "reject",
        [],
        False,
        "concurrency regression: decode_heavy requests completed per second 0.251 req/s vs 2.96 req/s "
        "(0.085x, 95% CI [",
    ),
    (
        "candidate_too_slow_once",
        candidate_too_slow_once,
        "neutral",
        [],
        False,
        "fails no requirement",
    ),
    (
        "candidate_just_over_twice",
        candidate_just_over_twice,
        "neutral",
        [],
        False,
        "fails no requirement",
    ),
    (
        "both_too_slow",
        both_too_slow,
        "incomplete",
        ["time_bound", "time_bound", "time_bound"],
        False,
        "candidates/baseline/decode_heavy/r2/summary.json: the baseline's decode_heavy run did not finish 5 "
        "of 64 request(s) within its time bound (600 s): nothing to compare; measuring again gives the "
        "same: raise workloads.decode_heavy.time_limit_s and run the sweep again",
    ),
    (
        "baseline_too_slow",
        baseline_too_slow,
        "incomplete",
        ["time_bound"],
        False,
        "the baseline's prefill_10k run did not finish 3 of 64 request(s) within its time bound (600 s)",
    ),
    (
        "candidate_stopped",
        candidate_stopped,
        "incomplete",
        ["interrupted"],
        True,
        "candidates/cand/decode_heavy/r1/summary.json: run interrupted, 20 of 64 request(s) cancelled",
    ),
]


@pytest.mark.parametrize(
    ("make", "decision", "kinds", "resumable", "words"),
    [c[1:] for c in TIME_BOUND_CASES],
    ids=[c[0] for c in TIME_BOUND_CASES],
)
def test_a_run_stopped_by_its_time_bound_is_a_finding_once_the_baseline_finished_in_time(
    tmp_path: Path,
    *,
    make: Callable[[Path], None],
    decision: str,
    kinds: list[str],
    resumable: bool,
    words: str,
) -> None:
    make(tmp_path)
    sweep, verdict = judge(tmp_path)
    assert verdict.decision == decision, verdict.reason
    assert sorted(g.kind for g in verdict.missing) == kinds
    assert words in verdict.reason
    assert verdict.resume == (resume_command(tmp_path) if resumable else None)
    assert sweep.retained == "baseline"
    if decision == "reject":
        assert verdict.failed == ["concurrency"]  # the requests the bound stopped did not fail: no stability
    assert exit_code(sweep) == (EXIT_INCOMPLETE if decision == "incomplete" else 0)
    if decision == "neutral":  # the time bound's rate comparison passed: a minority, or within tolerance
        conc = next(g for g in verdict.gates if g.gate == "concurrency")
        (rate,) = [c for c in conc.comparisons if c.metric == "request_rate"]
        assert rate.status == "pass", rate.message


def test_the_time_bound_finding_is_a_failed_comparison_and_the_cut_run_no_sample(tmp_path: Path) -> None:
    """Two of three runs stopped: a majority at 0.085x the baseline's rate, judged without an interval;
    the runs the bound stopped are no tokens/s sample (r0 is the candidate's only one)."""
    candidate_too_slow(tmp_path)
    _, verdict = judge(tmp_path)
    conc = next(g for g in verdict.gates if g.gate == "concurrency")
    (finding,) = [c for c in conc.comparisons if c.metric == "request_rate"]
    assert (finding.profile, finding.status, finding.unit, finding.threshold) == (
        "decode_heavy",
        "fail",
        "req/s",
        0.95,
    )
    assert finding.observed == pytest.approx((64 / 21.6422 * (44 / 600) ** 2) ** (1 / 3), rel=1e-3)
    assert finding.baseline == pytest.approx(64 / 21.6423, rel=1e-3)
    assert (
        "its time bound (600 s) stopped r1 (20 of 64 request(s) unfinished), r2 (20 of 64" in finding.message
    )
    assert "the time bound stopped 2 of 3 runs, a majority" in finding.message
    throughput = next(c for c in conc.comparisons if (c.metric, c.profile) == ("output_tps", "decode_heavy"))
    assert throughput.n_candidate == 1  # r0: the runs the time bound stopped are not samples
    stability = next(g for g in verdict.gates if g.gate == "stability")
    assert stability.status == "pass", stability.message
    assert "decode_heavy: 0/192 failed, 0 preemptions, 40 unfinished at the time bound" in stability.message


def test_a_minority_the_time_bound_stopped_is_set_aside_and_said(tmp_path: Path) -> None:
    """One run of three stopped: its rate (0.025x the others') is set aside as an outlier run, and the
    comparison says so; the verdict is no REJECT."""
    candidate_too_slow_once(tmp_path)
    _, verdict = judge(tmp_path)
    conc = next(g for g in verdict.gates if g.gate == "concurrency")
    (rate,) = [c for c in conc.comparisons if c.metric == "request_rate"]
    assert rate.status == "pass" and rate.n_candidate == 2
    assert "decode_heavy r1 did not finish 20 of 64 request(s) within its time bound (600 s)" in rate.message
    assert "candidate run r1 (0.0733 req/s, 0.0248x the others' median) set aside as one outlier run" in (
        rate.message
    )


def test_resume_does_not_measure_again_a_run_its_time_bound_stopped(tmp_path: Path) -> None:
    """launch_complete: a run stopped by its time bound is that run's result (measured again, it is again);
    one stopped from outside is measured again."""
    from orchestrator.config.compose import load
    from orchestrator.measure.begin import begin
    from orchestrator.measure.candidate import is_complete, run_candidate
    from orchestrator.servers.context import SweepContext
    from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams

    overrides = [
        "run.repeats=2",
        "run.profiles=[serial,decode_heavy]",
        "run.recovery_profiles=[decode_heavy]",
    ]
    cfg, _ = load(overrides)
    life = SweepContext.open(cfg, tmp_path / "sweep", fake_seams(FakeSupervisor(), FakeLoad(), []))
    begin(life)
    run_candidate(life, load([*overrides, "candidate=tp4_dp2"])[0].candidate)
    target = life.candidate_dir("tp4_dp2") / "decode_heavy" / "r2" / "summary.json"
    summary = read_model(target, ProfileSummary)
    write_model(target, summary.model_copy(update={"interrupted": True, "time_bound": True}))
    assert is_complete(life, "tp4_dp2")
    write_model(target, summary.model_copy(update={"interrupted": True, "time_bound": False}))
    assert not is_complete(life, "tp4_dp2")


# ---------------------------------------------------------------------------- item 19: a hung server

HUNG = (
    WatchEvent(
        at="2025-01-01T00:01:55Z",
        kind="unhealthy",
        detail="/health failed: ReadTimeout while pid 4242 is alive",
    ),
    WatchEvent(
        at="2025-01-01T00:02:00Z",
        kind="hung",
        detail="pid 4242 is alive (stopped) but /health has not answered for 11.0 s",
    ),
)


def hung_in_decode_heavy(root: Path) -> None:
    """The issue's case: the server hung during the candidate's first decode_heavy run, before any of its
    measured requests ended; the remaining runs were skipped. The summary says what the runner had: nothing
    (0 tok/s, no /metrics)."""
    twins(root, watch=HUNG)
    cand = root / "candidates/cand/decode_heavy"
    for k in (1, 2):
        shutil.rmtree(cand / f"r{k}")
    path = cand / "r0" / "summary.json"
    summary = read_model(path, ProfileSummary)
    write_jsonl(cand / "r0" / summary.records_file, [])
    empty = {"num_requests": 0, "completed": 0, "failed": 0, "errors": {}, "output_tokens": 0}
    update = {
        **empty,
        "output_tps": 0.0,
        "prompt_tps": 0.0,
        "duration_s": 0.0,
        "interrupted": True,
        "server": None,
    }
    write_model(path, summary.model_copy(update=update))


def test_a_hung_server_is_the_reason_and_its_cut_short_run_no_throughput_sample(tmp_path: Path) -> None:
    hung_in_decode_heavy(tmp_path)
    sweep, verdict = judge(tmp_path)
    assert verdict.decision == "reject" and not verdict.missing
    assert verdict.failed == ["stability"], verdict.reason  # no "concurrency regression ... 0x" from it
    assert verdict.reason.startswith("REJECT: stability: watcher: server unhealthy"), verdict.reason
    assert "server hung" in verdict.reason
    gates = {g.gate: g for g in verdict.gates}
    (conc,) = [c for c in gates["concurrency"].comparisons if c.profile == "decode_heavy"]
    assert conc.status == "inconclusive" and conc.ratio is None
    assert conc.message == (
        "decode_heavy: no throughput sample (the server hung during r0; a run cut short is not a sample)"
    )
    (stable,) = [c for c in gates["stability"].comparisons if c.profile == "decode_heavy"]
    assert (stable.status, stable.message) == (
        "fail",
        "decode_heavy: server hung, which cut short r0 (before its measured requests)",
    )
    figures = {(f.metric, f.profile): f for f in verdict.figures}
    assert figures[("output_tps", "decode_heavy")].value is None  # not 0.0 tok/s, 0x
    assert figures[("ttft_p50", "decode_heavy")].value is None
    ranked = [r for r in sweep.rankings if r.profile == "decode_heavy"]
    assert all("cand" not in r.order for r in ranked)


def test_a_run_cut_short_midway_counts_its_finished_requests_as_evidence_of_what_cut_it(
    tmp_path: Path,
) -> None:
    """The hang came after 40 of 64 requests: the stability line says so, and still not a sample."""
    twins(tmp_path, watch=HUNG)
    for k in (1, 2):
        shutil.rmtree(tmp_path / f"candidates/cand/decode_heavy/r{k}")
    cut(tmp_path, "candidates/cand/decode_heavy/r0", 24, time_bound=False)
    _, verdict = judge(tmp_path)
    stability = next(g for g in verdict.gates if g.gate == "stability")
    (stable,) = [c for c in stability.comparisons if c.profile == "decode_heavy"]
    assert stable.message == "decode_heavy: server hung, which cut short r0 (40 of 64 request(s) completed)"
    assert verdict.failed == ["stability"]


def test_the_reports_goodput_leaves_out_a_run_cut_short(tmp_path: Path) -> None:
    """The report's goodput table read the hung run as "0 (0%, 0/1)": a run cut short holds no SLO figure."""
    from contracts.results import SloSummary
    from contracts.sweepdir import load_results
    from report.slo import goodput_rows

    hung_in_decode_heavy(tmp_path)
    for path in tmp_path.glob("candidates/*/decode_heavy/r*/summary.json"):
        summary = read_model(path, ProfileSummary)
        held = not summary.interrupted
        slo = SloSummary(
            name="default",
            percentile=99.0,
            thresholds={"ttft": 2.0},
            observed={"ttft": 0.4 if held else None},
            met=held,
            margin=5.0 if held else 0.0,
            good_requests=summary.completed,
            attainment=1.0 if held else 0.0,
            goodput_rps=1.0 if held else 0.0,
            goodput_tps=1000.0 if held else 0.0,
        )
        write_model(path, summary.model_copy(update={"slo": slo}))
    results = {n: load_results(tmp_path, f"candidates/{n}", n) for n in ("baseline", "cand")}
    rows = goodput_rows(results, ["decode_heavy"], 0.95)
    assert [(r.candidate, r.held, r.repeats) for r in rows] == [("baseline", 3, 3)]

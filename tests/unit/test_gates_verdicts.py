"""Verdicts on synthetic sweeps: the case study, and a table of keep / reject / neutral / inconclusive."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Literal

import pytest

from contracts.errors import EXIT_INCOMPLETE, GateError, ResultFileError
from contracts.files import write_model
from contracts.results import CapacityResult, GpuMemory, HostProbe, WatchEvent
from contracts.schema import GatesConfig
from contracts.sweepdir import record_planned, resume_command
from contracts.verdicts import decision_label
from gates import GateResult, SweepVerdict, Verdict, evaluate_sweep, read_verdicts, write_verdicts
from gates.evidence import Expected
from gates.judge import exit_code
from gates.registry import REGISTRY
from tests.unit.gates_fixtures import BASELINE, SIM_PROBE, SweepBuilder, baseline_like, case_study

CFG = GatesConfig(
    accepted_profiles=["prefill_10k", "decode_heavy"],
    loaded_profiles=["short", "prefill_10k", "decode_heavy", "mixed"],
    bootstrap_resamples=1000,
)


def _verdict(sweep: SweepVerdict, name: str) -> Verdict:
    return next(v for v in sweep.verdicts if v.candidate == name)


def _gate(verdict: Verdict, name: str) -> GateResult:
    return next(g for g in verdict.gates if g.gate == name)


# ------------------------------------------------------------------------------------------ case study


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> SweepVerdict:
    root = case_study(tmp_path_factory.mktemp("case_study"))
    return evaluate_sweep(root, CFG, baseline="baseline")


def test_case_study_retains_the_baseline(study: SweepVerdict) -> None:
    assert study.retained == "baseline"
    assert {v.candidate: v.decision for v in study.verdicts} == {
        "eplb": "incompatible",
        "mega_moe": "incompatible",
        "spec_probabilistic": "reject",
        "tp4_dp2": "reject",
    }
    assert study.drift.status == "pass"


def test_tp4_dp2_is_rejected_on_concurrency_with_the_reversal(study: SweepVerdict) -> None:
    tp4 = _verdict(study, "tp4_dp2")
    assert tp4.failed == ["concurrency"]
    assert "concurrency regression" in tp4.reason
    assert "1,197 tok/s vs 10,039 tok/s (0.119x" in tp4.reason
    assert "22.45 s vs 0.347 s (64.7x" in tp4.reason
    assert tp4.reversal is not None and "ranks tp4_dp2 ahead of baseline" in tp4.reversal
    assert "under load it ranks behind" in tp4.reversal
    assert study.reversal is not None and "tp4_dp2" in study.reversal
    conc = _gate(tp4, "concurrency")
    assert conc.status == "fail"
    assert conc.interval is not None and conc.interval[1] < 1 - CFG.throughput_tolerance
    assert any(e.file == "candidates/tp4_dp2/decode_heavy/r0/summary.json" for e in conc.evidence)


def test_spec_probabilistic_is_rejected_on_visible_answers_with_no_load_advantage(
    study: SweepVerdict,
) -> None:
    spec = _verdict(study, "spec_probabilistic")
    assert spec.failed == ["answer_reliability"]
    assert spec.reversal is None
    assert "3/5 visible answers vs 4/5" in spec.reason
    assert "76.85 s vs 43.95 s" in spec.reason
    assert "no clear load advantage" in spec.reason
    answers = _gate(spec, "answer_reliability")
    assert (answers.observed, answers.baseline) == (76.85, 43.95)
    counts = next(c for c in answers.comparisons if c.metric == "visible_answers")
    assert (counts.observed, counts.baseline, counts.status) == (3.0, 4.0, "fail")
    # The censored requests are the evidence: indices 3 and 4 of the candidate, 4 of the baseline.
    assert [(e.file, e.requests) for e in answers.evidence] == [
        ("candidates/spec_probabilistic/answer_gate/r0/records.jsonl", [3, 4]),
        ("candidates/baseline/answer_gate/r0/records.jsonl", [4]),
    ]
    assert _gate(spec, "concurrency").status == "pass"  # throughput within +-5%: neutral under load


@pytest.mark.parametrize(
    ("name", "kind", "line"),
    [("mega_moe", "incompatible", "requires SM100"), ("eplb", "init-failed", "EPLB is not supported")],
)
def test_startup_failures_are_incompatible_never_a_performance_loss(
    study: SweepVerdict, name: str, kind: str, line: str
) -> None:
    verdict = _verdict(study, name)
    assert verdict.decision == "incompatible"
    assert kind in verdict.reason and line in verdict.reason
    assert {g.gate: g.status for g in verdict.gates if g.gate != "compatibility"} == {
        "answer_accuracy": "not_run",
        "answer_reliability": "not_run",
        "capacity": "not_run",
        "concurrency": "not_run",
        "cost": "not_run",
        "latency_gain": "not_run",
        "lm_eval_accuracy": "not_run",
        "memory_headroom": "not_run",
        "spec_acceptance": "not_run",
        "stability": "not_run",
    }
    assert verdict.gains == [] and verdict.reversal is None


def test_verdicts_round_trip_through_the_file(study: SweepVerdict, tmp_path: Path) -> None:
    path = write_verdicts(tmp_path, study)
    assert path == tmp_path / "verdicts.json"
    assert read_verdicts(tmp_path) == study
    json.loads(path.read_text().replace("Infinity", "1e999"))  # valid JSON apart from the infinities


def test_a_corrupt_verdicts_file_names_itself(tmp_path: Path) -> None:
    (tmp_path / "verdicts.json").write_text('{"baseline": 3}')
    with pytest.raises(ResultFileError, match=r"verdicts\.json: not a valid SweepVerdict"):
        read_verdicts(tmp_path)


# ---------------------------------------------------------------------------------------- decision table


def _identical(b: SweepBuilder, name: str) -> None:
    baseline_like(b, name)


def _faster_ttft(b: SweepBuilder, name: str) -> None:
    baseline_like(b, name, ttft_factor=0.85)


def _slower_throughput(b: SweepBuilder, name: str) -> None:
    baseline_like(b, name, tps_factor=0.8)


def _noisy_throughput_loss(b: SweepBuilder, name: str) -> None:
    for profile, fig in BASELINE.items():
        b.loaded(
            name,
            profile,
            output_tps=fig["output_tps"] * 0.9,
            prompt_tps=fig["prompt_tps"] * 0.9,
            ttft=fig["ttft"],
            noise=0.15,
        )
    b.serial(name, ttft=0.20, e2e=5.0)
    b.answers(name, [12.3, 30.2, 43.95, 61.0, None])


def _noisy_ttft_gain(b: SweepBuilder, name: str) -> None:
    """10% better TTFT, but the candidate's runs differ by 15% from one another (run-level noise)."""
    for profile, fig in BASELINE.items():
        b.loaded(
            name,
            profile,
            output_tps=fig["output_tps"],
            prompt_tps=fig["prompt_tps"],
            ttft=fig["ttft"] * 0.9,
            spread=1.5,
            n=16,
            noise=0.15,
        )
    b.serial(name, ttft=0.20, e2e=5.0)
    b.answers(name, [12.3, 30.2, 43.95, 61.0, None])


def _failed_requests(b: SweepBuilder, name: str) -> None:
    baseline_like(b, name)
    b.loaded(name, "decode_heavy", output_tps=10039.0, prompt_tps=2510.0, ttft=0.347, failed=[5, 9])


def _preempted(b: SweepBuilder, name: str) -> None:
    baseline_like(b, name)
    b.loaded(name, "prefill_10k", output_tps=222.0, prompt_tps=34400.0, ttft=8.95, preemptions=12)


def _restarted(b: SweepBuilder, name: str) -> None:
    baseline_like(b, name)
    b.loaded(name, "prefill_10k", output_tps=222.0, prompt_tps=34400.0, ttft=8.95, restart=True)


def _no_metrics(b: SweepBuilder, name: str) -> None:
    baseline_like(b, name)
    b.loaded(name, "prefill_10k", output_tps=222.0, prompt_tps=34400.0, ttft=8.95, server=False)


def _no_answers(b: SweepBuilder, name: str) -> None:
    baseline_like(b, name, ttft_factor=0.85)
    b.answers(name, [12.3, None, None, 61.0, None])


def _missing_profile(b: SweepBuilder, name: str) -> None:
    fig = BASELINE["prefill_10k"]
    b.loaded(
        name, "prefill_10k", output_tps=fig["output_tps"], prompt_tps=fig["prompt_tps"], ttft=fig["ttft"]
    )
    b.serial(name, ttft=0.20, e2e=5.0)
    b.answers(name, [12.3, 30.2, 43.95, 61.0, None])


CASES = [
    # the candidate's results, its run.json, expected decision, expected failed gates
    pytest.param(_identical, {}, "neutral", [], id="identical"),
    pytest.param(_faster_ttft, {}, "keep", [], id="ttft_15pct_better"),
    pytest.param(_slower_throughput, {}, "reject", ["concurrency"], id="throughput_20pct_worse"),
    pytest.param(_noisy_throughput_loss, {}, "inconclusive", [], id="throughput_loss_within_noise"),
    pytest.param(_noisy_ttft_gain, {}, "inconclusive", [], id="ttft_gain_within_noise"),
    pytest.param(_faster_ttft, {"free_gib": [0.3] * 8}, "reject", ["memory_headroom"], id="low_memory"),
    pytest.param(_faster_ttft, {"free_gib": None}, "keep", [], id="no_nvml_still_keeps"),
    pytest.param(_failed_requests, {}, "reject", ["stability"], id="failed_requests"),
    pytest.param(_preempted, {}, "reject", ["stability"], id="preemptions"),
    pytest.param(_restarted, {}, "reject", ["stability"], id="restart"),
    pytest.param(
        _identical,
        {"watch": [WatchEvent(at="t", kind="died", detail="exit 1")]},
        "reject",
        ["stability"],
        id="server_died",
    ),
    pytest.param(_no_metrics, {}, "inconclusive", [], id="metrics_unreadable"),
    pytest.param(_no_answers, {}, "reject", ["answer_reliability"], id="fewer_answers_despite_gain"),
    pytest.param(_missing_profile, {}, "inconclusive", [], id="loaded_profile_missing"),
]


@pytest.mark.parametrize(("build", "run", "decision", "failed"), CASES)
def test_decision_table(
    tmp_path: Path,
    build: Callable[[SweepBuilder, str], None],
    run: dict[str, object],
    decision: str,
    failed: list[str],
) -> None:
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True, free_gib=[1.0] * 8)
    baseline_like(b, "baseline")
    b.run("cand", **({"free_gib": [1.0] * 8} | run))
    build(b, "cand")
    verdict = _verdict(evaluate_sweep(tmp_path, CFG, baseline="baseline"), "cand")
    assert verdict.decision == decision, verdict.reason
    assert verdict.failed == failed
    assert verdict.reason.startswith(f"{decision_label(decision)}: ")  # one spelling: the label


GPU = HostProbe(
    driver=True,
    driver_version="550.54",
    gpus=[GpuMemory(index=0, name="H100", total_gib=80.0, used_gib=1.0, free_gib=79.0)],
)
NO_DRIVER = HostProbe(driver=False, reason="no NVIDIA driver (NVML Shared Library Not Found)")


@pytest.mark.parametrize(
    ("backend", "run_probe", "host_json", "host_kind", "decision"),
    [
        # The host says the figure does not exist: the simulator, a CPU host (no driver), host.kind.
        pytest.param("sim", SIM_PROBE, None, None, "keep", id="simulator_run_probe"),
        pytest.param("vllm", None, NO_DRIVER, None, "keep", id="cpu_host_no_driver_in_host_json"),
        pytest.param("vllm", None, None, "cpu", "keep", id="host_kind_cpu"),
        pytest.param("sim", None, None, "sim", "keep", id="host_kind_sim"),
        # A GPU host without the reading after warmup: the gate could not run.
        pytest.param("vllm", None, GPU, None, "incomplete", id="gpu_host_json_no_reading"),
        pytest.param("vllm", GPU, None, None, "incomplete", id="gpu_run_probe_no_reading"),
        pytest.param("vllm", None, None, None, "incomplete", id="nothing_says_there_is_no_gpu"),
        pytest.param("vllm", None, NO_DRIVER, "gpu", "incomplete", id="gpu_host_whose_nvml_failed"),
    ],
)
def test_memory_headroom_not_run_is_missing_evidence_unless_the_host_has_no_such_figure(
    tmp_path: Path,
    *,
    backend: Literal["vllm", "sim"],
    run_probe: HostProbe | None,
    host_json: HostProbe | None,
    host_kind: str | None,
    decision: str,
) -> None:
    """A clear keep on every other gate (TTFT 15% better) with no free-memory reading after warmup."""
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True, backend=backend, probe=run_probe)
    baseline_like(b, "baseline")
    b.run("cand", backend=backend, probe=run_probe)
    _faster_ttft(b, "cand")
    if host_json is not None:
        write_model(tmp_path / "host.json", host_json)
    expected = Expected(host_kind=host_kind) if host_kind is not None else None
    sweep = evaluate_sweep(tmp_path, CFG, baseline="baseline", expected=expected)
    verdict = _verdict(sweep, "cand")
    gate = _gate(verdict, "memory_headroom")
    assert (gate.status, verdict.decision) == ("not_run", decision), verdict.reason
    if decision == "keep":
        assert gate.not_applicable and verdict.missing == [] and exit_code(sweep) == 0
    else:
        assert not gate.not_applicable and verdict.decision_on_partial == "keep"
        assert [(g.kind, g.file) for g in verdict.missing] == [("not_run", "candidates/cand/run.json")]
        assert "memory_headroom: could not run (no per-GPU free memory recorded" in verdict.reason
        assert sweep.retained == "baseline" and exit_code(sweep) == EXIT_INCOMPLETE
        # Resuming skips a complete launch: no command that would not measure it, the message says what.
        assert verdict.resume is None and "leave it out of gates.enabled" in verdict.reason


def test_a_failed_requirement_rejects_though_another_gate_could_not_run(tmp_path: Path) -> None:
    """The gate that never ran could only add a failure: a 20% throughput loss is rejected all the same."""
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True, backend="vllm", probe=GPU)
    baseline_like(b, "baseline")
    b.run("cand", backend="vllm", probe=GPU)
    _slower_throughput(b, "cand")
    verdict = _verdict(evaluate_sweep(tmp_path, CFG, baseline="baseline"), "cand")
    assert _gate(verdict, "memory_headroom").status == "not_run"
    assert (verdict.decision, verdict.failed, verdict.missing) == ("reject", ["concurrency"], [])


def test_memory_headroom_disabled_is_not_missing(tmp_path: Path) -> None:
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True, backend="vllm", probe=GPU)
    baseline_like(b, "baseline")
    b.run("cand", backend="vllm", probe=GPU)
    _faster_ttft(b, "cand")
    enabled = [g for g in REGISTRY if g != "memory_headroom"]
    verdict = _verdict(evaluate_sweep(tmp_path, replace(CFG, enabled=enabled), baseline="baseline"), "cand")
    assert verdict.decision == "keep" and verdict.missing == []


@pytest.mark.parametrize(
    ("searched", "decision"),
    [
        pytest.param((), "keep", id="no_search_configured"),
        pytest.param(("baseline",), "incomplete", id="the_candidates_search_missing"),
    ],
)
def test_capacity_not_run_is_missing_only_when_a_search_ran(
    tmp_path: Path, searched: tuple[str, ...], decision: str
) -> None:
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True, free_gib=[1.0] * 8)
    baseline_like(b, "baseline")
    b.run("cand", free_gib=[1.0] * 8)
    _faster_ttft(b, "cand")
    for name in searched:
        write_model(
            tmp_path / f"candidates/{name}/capacity.json",
            CapacityResult(
                candidate=name,
                profile="decode_heavy",
                mode="concurrency",
                unit="concurrent",
                slo="interactive",
                slo_text="TTFT p99 <= 2 s",
                capacity=64.0,
                low=64.0,
                high=128.0,
                resolution=0.25,
                gpus=8,
            ),
        )
    verdict = _verdict(evaluate_sweep(tmp_path, CFG, baseline="baseline"), "cand")
    assert (_gate(verdict, "capacity").status, verdict.decision) == ("not_run", decision), verdict.reason
    assert [g.kind for g in verdict.missing] == ([] if decision == "keep" else ["not_run"])


def test_keep_is_retained_and_names_its_gain(tmp_path: Path) -> None:
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True)
    baseline_like(b, "baseline")
    b.run("fast")
    baseline_like(b, "fast", ttft_factor=0.85)
    sweep = evaluate_sweep(tmp_path, CFG, baseline="baseline")
    fast = _verdict(sweep, "fast")
    assert sweep.retained == "fast"
    assert any("decode_heavy median TTFT" in g for g in fast.gains)
    assert _gate(fast, "latency_gain").status == "pass"
    assert _gate(fast, "memory_headroom").status == "not_run"
    assert "simulated host" in _gate(fast, "memory_headroom").message


def test_several_keeps_retain_the_best_under_load(tmp_path: Path) -> None:
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True)
    baseline_like(b, "baseline")
    for name, tps in (("a_fast", 1.0), ("b_fast_and_wide", 1.1)):
        b.run(name)
        baseline_like(b, name, ttft_factor=0.85, tps_factor=tps)
    sweep = evaluate_sweep(tmp_path, CFG, baseline="baseline")
    assert [v.decision for v in sweep.verdicts] == ["keep", "keep"]
    assert sweep.retained == "b_fast_and_wide"
    assert "best of 2" in sweep.retained_reason


def test_inconclusive_says_how_many_more_repeats(tmp_path: Path) -> None:
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True)
    baseline_like(b, "baseline")
    b.run("cand")
    _noisy_throughput_loss(b, "cand")
    verdict = _verdict(evaluate_sweep(tmp_path, CFG, baseline="baseline"), "cand")
    assert verdict.decision == "inconclusive"
    assert verdict.more_repeats is not None and verdict.more_repeats >= 1
    assert f"{verdict.more_repeats} or more repeat(s) per side may settle it" in verdict.reason
    assert "it may be far off" in verdict.reason and verdict.settle is not None
    conc = _gate(verdict, "concurrency")
    assert conc.status == "inconclusive"
    assert conc.more_repeats == verdict.more_repeats


def test_censored_ttft_of_failed_requests_counts_as_infinite(tmp_path: Path) -> None:
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True)
    baseline_like(b, "baseline")
    b.run("cand")
    baseline_like(b, "cand")
    # Most requests of decode_heavy never get a token: the median TTFT is +inf, not the median of the rest.
    from tests.unit.gates_fixtures import make_records, write_repeat

    for k in range(3):
        ttfts: list[float | None] = [0.3] * 20 + [None] * 44
        records = make_records(ttfts, failed=range(20, 64))
        write_repeat(tmp_path, "cand", "decode_heavy", k, records, output_tps=10039.0, prompt_tps=2510.0)
    verdict = _verdict(evaluate_sweep(tmp_path, CFG, baseline="baseline"), "cand")
    ttft = next(
        c
        for c in _gate(verdict, "concurrency").comparisons
        if c.metric == "ttft_p50" and c.profile == "decode_heavy"
    )
    assert ttft.observed == math.inf and ttft.status == "fail"
    assert "132 censored" in ttft.message
    stability = _gate(verdict, "stability")
    assert stability.status == "fail"
    assert stability.evidence[0].requests == list(range(20, 64))
    assert set(verdict.failed) == {"concurrency", "stability"}


# -------------------------------------------------------------------------------------------------- drift


def _drift_sweep(root: Path, end_factor: float, *, recovery_ok: bool = True) -> SweepVerdict:
    b = SweepBuilder(root)
    b.run("baseline", is_baseline=True)
    baseline_like(b, "baseline")
    b.run("fast")
    baseline_like(b, "fast", ttft_factor=0.85)
    b.run("slow")
    baseline_like(b, "slow", tps_factor=0.5)
    b.run("mega_moe", ok=False, kind="incompatible", matched_line="needs SM100")
    if recovery_ok:
        b.run("baseline", root="recovery", is_baseline=True)
        fig = BASELINE["decode_heavy"]
        b.loaded(
            "baseline",
            "decode_heavy",
            output_tps=fig["output_tps"] * end_factor,
            prompt_tps=fig["prompt_tps"] * end_factor,
            ttft=fig["ttft"],
            repeats=1,
            root="recovery",
        )
    else:
        b.run(
            "baseline", root="recovery", is_baseline=True, ok=False, kind="crashed", matched_line="Segfault"
        )
    return evaluate_sweep(root, CFG, baseline="baseline")


def test_drift_beyond_noise_makes_measured_verdicts_inconclusive_loudly(tmp_path: Path) -> None:
    sweep = _drift_sweep(tmp_path, 0.8)
    assert sweep.drift.status == "fail"
    assert "BASELINE DRIFT" in sweep.drift.message
    assert "0.800x" in sweep.drift.message
    assert {v.candidate: (v.decision, v.decision_before_drift) for v in sweep.verdicts} == {
        "fast": ("inconclusive", "keep"),
        "slow": ("inconclusive", "reject"),
        "mega_moe": ("incompatible", None),  # a startup failure is not a measurement
    }
    assert sweep.retained == "baseline"
    assert "drift" in sweep.retained_reason
    assert all("BASELINE DRIFT" in v.reason for v in sweep.verdicts if v.decision == "inconclusive")


def test_no_drift_leaves_verdicts_alone(tmp_path: Path) -> None:
    sweep = _drift_sweep(tmp_path, 1.01)
    assert sweep.drift.status == "pass"
    assert {v.candidate: v.decision for v in sweep.verdicts} == {
        "fast": "keep",
        "slow": "reject",
        "mega_moe": "incompatible",
    }


def test_recovery_that_did_not_start_is_reported(tmp_path: Path) -> None:
    sweep = _drift_sweep(tmp_path, 1.0, recovery_ok=False)
    assert sweep.drift.status == "not_run"
    assert "RECOVERY FAILED TO START" in sweep.drift.message and "Segfault" in sweep.drift.message


def test_no_recovery_means_drift_not_checked(tmp_path: Path) -> None:
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True)
    baseline_like(b, "baseline")
    sweep = evaluate_sweep(tmp_path, CFG, baseline="baseline")
    assert sweep.drift.status == "not_run"
    assert sweep.verdicts == []


# ------------------------------------------------------------------------------------------ bad sweeps


def test_a_baseline_that_did_not_start_is_a_gate_error(tmp_path: Path) -> None:
    SweepBuilder(tmp_path).run(
        "baseline", is_baseline=True, ok=False, kind="out-of-memory", matched_line="OOM"
    )
    with pytest.raises(GateError, match="failed to start \\(out-of-memory\\)"):
        evaluate_sweep(tmp_path, CFG, baseline="baseline")


def test_a_missing_baseline_is_a_gate_error(tmp_path: Path) -> None:
    with pytest.raises(GateError, match="no results for the baseline"):
        evaluate_sweep(tmp_path, CFG, baseline="baseline")


def test_a_candidate_stopped_during_its_launch_or_never_reached_is_incomplete(tmp_path: Path) -> None:
    """A stop or Ctrl-C inside the launch leaves a directory without run.json; a candidate the sweep
    never reached has no directory, only its name in planned.json: both are measured by resuming."""
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True)
    baseline_like(b, "baseline")
    (tmp_path / "candidates/starting").mkdir()
    (tmp_path / "candidates/starting/spec.json").write_text("{}")
    record_planned(tmp_path, ["baseline", "starting", "late"])
    sweep = evaluate_sweep(tmp_path, CFG, baseline="baseline")
    assert [v.candidate for v in sweep.verdicts] == ["starting", "late"]
    words = {
        "starting": "not measured (no candidates/starting/run.json: stopped or interrupted during its "
        "launch)",
        "late": "not measured (no candidates/late/: the sweep stopped before reaching it)",
    }
    for name, said in words.items():
        verdict = _verdict(sweep, name)
        assert verdict.decision == "incomplete", verdict.reason
        assert [g.kind for g in verdict.missing] == ["not_measured"]
        assert verdict.reason == f"INCOMPLETE: {said}; to complete it: {resume_command(tmp_path)}"
        assert verdict.resume == resume_command(tmp_path) and verdict.decision_on_partial is None
    assert sweep.resume == resume_command(tmp_path) and sweep.retained == "baseline"
    assert exit_code(sweep) == EXIT_INCOMPLETE


def test_candidates_default_to_every_directory_but_the_baseline(tmp_path: Path) -> None:
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True)
    baseline_like(b, "baseline")
    for name in ("zeta", "alpha"):
        b.run(name)
        baseline_like(b, name)
    assert [v.candidate for v in evaluate_sweep(tmp_path, CFG, baseline="baseline").verdicts] == [
        "alpha",
        "zeta",
    ]

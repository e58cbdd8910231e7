"""Partial evidence never becomes a keep or a reject (issue 21): the ``incomplete`` verdict, what it names as
missing, and the command that completes it; the judge's exit code."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from contracts.errors import EXIT_INCOMPLETE
from contracts.files import read_jsonl, read_model, write_jsonl
from contracts.files import write_model as write_summary
from contracts.results import ProfileSummary, RequestRecord, WatchEvent
from contracts.schema import GatesConfig
from contracts.sweepdir import planned_names, resume_command
from contracts.verdicts import Verdict
from gates import evaluate_sweep
from gates.evidence import Expected
from gates.judge import exit_code, judge_sweep, main
from orchestrator.ledger.lock import SweepLock
from orchestrator.ledger.requests import write_request
from tests.unit.fakes import FakeLoad, FakeSupervisor
from tests.unit.gates_fixtures import BASELINE, SweepBuilder, baseline_like, sweep_config, write_config
from tests.unit.test_controller import run_sweep

CFG = GatesConfig(
    accepted_profiles=["prefill_10k", "decode_heavy"],
    loaded_profiles=["prefill_10k", "decode_heavy"],
    bootstrap_resamples=300,
)
PROFILES = {"serial": 3, "prefill_10k": 3, "decode_heavy": 3, "answer_gate": 1}
EXPECTED = Expected(baseline=PROFILES, own={"answer_gate": 1}, candidate_repeats=3)


def interrupt(sweep: Path, directory: str, cancelled: int) -> None:
    """Mark a written run as stopped by Ctrl-C: its last ``cancelled`` requests cancelled, no answer."""
    summary_path = sweep / directory / "summary.json"
    summary = read_model(summary_path, ProfileSummary)
    records = read_jsonl(sweep / directory / summary.records_file, RequestRecord)
    cut = len(records) - cancelled
    records = records[:cut] + [
        r.model_copy(
            update={"error": "cancelled", "first_visible_s": None, "end_s": None, "finish_reason": None}
        )
        for r in records[cut:]
    ]
    write_jsonl(sweep / directory / summary.records_file, records)
    update = {"interrupted": True, "errors": {"cancelled": cancelled}, "failed": cancelled}
    write_summary(summary_path, summary.model_copy(update=update))


def twins(root: Path, *, baseline_watch: tuple[WatchEvent, ...] = ()) -> SweepBuilder:
    """The baseline and ``cand``, identical to it, every profile measured."""
    b = SweepBuilder(root)
    b.run("baseline", is_baseline=True, free_gib=[1.0] * 8, watch=baseline_watch)
    baseline_like(b, "baseline")
    b.run("cand", free_gib=[1.0] * 8)
    baseline_like(b, "cand")
    return b


def faster(root: Path) -> SweepBuilder:
    """``cand`` with every TTFT 20% shorter: a clear keep on complete evidence."""
    b = SweepBuilder(root)
    b.run("baseline", is_baseline=True, free_gib=[1.0] * 8)
    baseline_like(b, "baseline")
    b.run("cand", free_gib=[1.0] * 8)
    baseline_like(b, "cand", ttft_factor=0.8)
    return b


def ctrl_c_in_answer_gate(root: Path) -> None:
    """The issue's case: Ctrl-C during the candidate's answer_gate profile (5 cancelled requests)."""
    twins(root)
    interrupt(root, "candidates/cand/answer_gate/r0", cancelled=5)


def baseline_died(root: Path) -> None:
    """The baseline's server died during its second decode_heavy repeat: one repeat of it on disk."""
    died = WatchEvent(at="2025-01-01T00:01:00Z", kind="died", detail="exit code -9 (SIGKILL)")
    b = SweepBuilder(root)
    b.run("baseline", is_baseline=True, free_gib=[1.0] * 8, watch=[died])
    fig = BASELINE["decode_heavy"]
    b.loaded(
        "baseline",
        "decode_heavy",
        repeats=1,
        output_tps=fig["output_tps"],
        prompt_tps=fig["prompt_tps"],
        ttft=fig["ttft"],
    )
    b.serial("baseline", ttft=0.20, e2e=5.0)
    b.run("cand", free_gib=[1.0] * 8)
    baseline_like(b, "cand", ttft_factor=0.8)


def baseline_short_of_repeats(root: Path) -> None:
    """A keep on the files, but the baseline has 1 of its 3 prefill_10k repeats."""
    faster(root)
    for k in (1, 2):
        for path in sorted((root / f"candidates/baseline/prefill_10k/r{k}").iterdir()):
            path.unlink()
        (root / f"candidates/baseline/prefill_10k/r{k}").rmdir()


def harness_fault(root: Path) -> None:
    """The load runner failed on a broken trace line during the candidate's answer gate."""
    b = twins(root)
    event = WatchEvent(
        at="2025-01-01T00:02:00Z",
        kind="harness",
        detail="answer_gate r1: trace.jsonl:3: not JSON (Expecting value)",
    )
    b.run("cand", free_gib=[1.0] * 8, watch=[event])
    for path in sorted((root / "candidates/cand/answer_gate/r0").iterdir()):
        path.unlink()


CASES: list[tuple[str, Callable[[Path], None], str, str | None, str]] = [
    # (case, sweep, gap kind, decision the partial evidence gave, words the reason must hold)
    (
        "ctrl_c_answer_gate",
        ctrl_c_in_answer_gate,
        "interrupted",
        "reject",
        "candidates/cand/answer_gate/r0/summary.json: run interrupted, 5 of 5 request(s) cancelled",
    ),
    (
        "baseline_died",
        baseline_died,
        "baseline_died",
        None,
        "the baseline 'baseline' server died under load at 2025-01-01T00:01:00Z (exit code -9 (SIGKILL))",
    ),
    (
        "baseline_short",
        baseline_short_of_repeats,
        "missing_repeats",
        "keep",
        "candidates/baseline/prefill_10k: 1 of 3 repeat(s) on disk",
    ),
    (
        "harness",
        harness_fault,
        "harness",
        None,
        "the load harness failed at 2025-01-01T00:02:00Z, not the server "
        "(answer_gate r1: trace.jsonl:3: not JSON (Expecting value))",
    ),
]


@pytest.mark.parametrize(
    ("make", "kind", "partial", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_partial_evidence_is_incomplete_never_a_decision(
    tmp_path: Path,
    make: Callable[[Path], None],
    kind: str,
    partial: str | None,
    words: str,
) -> None:
    make(tmp_path)
    sweep = evaluate_sweep(tmp_path, CFG, baseline="baseline", expected=EXPECTED)
    verdict: Verdict = next(v for v in sweep.verdicts if v.candidate == "cand")
    assert verdict.decision == "incomplete"
    assert kind in {g.kind for g in verdict.missing}
    assert words in verdict.reason
    if partial is not None:
        assert verdict.decision_on_partial == partial
    assert verdict.resume == resume_command(tmp_path) == sweep.resume
    assert f"to complete it: {verdict.resume}" in verdict.reason
    assert sweep.retained == "baseline"  # nothing partial is ever kept
    assert exit_code(sweep) == EXIT_INCOMPLETE


def test_complete_evidence_decides_as_before(tmp_path: Path) -> None:
    faster(tmp_path)
    sweep = evaluate_sweep(tmp_path, CFG, baseline="baseline", expected=EXPECTED)
    verdict = next(v for v in sweep.verdicts if v.candidate == "cand")
    assert (verdict.decision, verdict.missing, verdict.resume, sweep.resume) == ("keep", [], None, None)
    assert exit_code(sweep) == 0


def test_without_expectations_only_the_files_can_make_it_incomplete(tmp_path: Path) -> None:
    """An adaptive look has no config: missing repeats are not judged there, an interrupted run is."""
    baseline_short_of_repeats(tmp_path)
    assert next(v for v in evaluate_sweep(tmp_path, CFG, baseline="baseline").verdicts).decision == "keep"
    ctrl_c_in_answer_gate(tmp_path / "other")
    verdict = next(v for v in evaluate_sweep(tmp_path / "other", CFG, baseline="baseline").verdicts)
    assert verdict.decision == "incomplete"


def test_expectations_follow_the_config() -> None:
    cfg = sweep_config()
    expected = Expected.from_config(cfg)
    assert dict(expected.baseline) == PROFILES
    assert (
        expected.candidate({"serial": 2, "prefill_10k": 3, "decode_heavy": 3, "answer_gate": 1}) == PROFILES
    )


def test_the_judge_exits_8_and_prints_the_resume_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ctrl_c_in_answer_gate(tmp_path)
    (tmp_path / "overrides.txt").write_text("candidate=glob(*)\nrun.repeats=3\n")
    write_config(tmp_path, sweep_config())
    assert main([str(tmp_path)]) == EXIT_INCOMPLETE == 8
    out = capsys.readouterr().out
    assert "cand      INCOMPLETE  candidates/cand/answer_gate/r0/summary.json: run" in out
    assert (
        f"resume: python -m orchestrator -m 'candidate=glob(*)' run.repeats=3 hydra.sweep.dir={tmp_path}"
        in out
    )
    assert judge_sweep(tmp_path).verdicts[0].decision == "incomplete"


def test_the_resume_command_repeats_the_recorded_overrides(tmp_path: Path) -> None:
    (tmp_path / "multirun.yaml").write_text(
        "hydra:\n  overrides:\n    hydra: ['hydra.mode=MULTIRUN', 'hydra/launcher=submitit_local', "
        "'hydra.sweep.dir=old']\n    task: ['candidate=glob(tp*)', 'host=sim8']\n"
    )
    assert resume_command(tmp_path) == (
        "python -m orchestrator -m hydra/launcher=submitit_local 'candidate=glob(tp*)' host=sim8 "
        f"hydra.sweep.dir={tmp_path}"
    )


def test_a_baseline_that_died_before_any_profile_leaves_every_candidate_incomplete(tmp_path: Path) -> None:
    died = WatchEvent(at="2025-01-01T00:00:30Z", kind="died", detail="exit code -9 (SIGKILL)")
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True, free_gib=[1.0] * 8, watch=[died])
    b.run("cand", free_gib=[1.0] * 8)
    baseline_like(b, "cand")
    sweep = evaluate_sweep(tmp_path, CFG, baseline="baseline")
    verdict = sweep.verdicts[0]
    assert verdict.decision == "incomplete"
    assert [g.kind for g in verdict.missing] == ["missing_repeats", "baseline_died"]
    assert "the baseline 'baseline' started but measured no profile" in verdict.reason
    assert sweep.retained == "baseline"


def test_a_candidate_whose_server_hung_is_rejected_on_stability_not_left_incomplete(tmp_path: Path) -> None:
    """A hung server is the candidate's fault: the runs its hang cut short are its stability evidence."""
    hung = WatchEvent(
        at="2025-01-01T00:02:00Z",
        kind="hung",
        detail="pid 4242 is alive (stopped) but /health has not answered for 11.0 s (last: ReadTimeout: ...)",
    )
    b = twins(tmp_path)
    b.run("cand", free_gib=[1.0] * 8, watch=[hung])
    interrupt(tmp_path, "candidates/cand/decode_heavy/r0", cancelled=4)
    verdict = evaluate_sweep(tmp_path, CFG, baseline="baseline", expected=EXPECTED).verdicts[0]
    assert verdict.decision == "reject", verdict.reason
    assert "stability" in verdict.failed
    assert "server hung" in verdict.reason and not verdict.missing


def test_a_baseline_that_hung_leaves_the_candidate_incomplete(tmp_path: Path) -> None:
    hung = WatchEvent(at="2025-01-01T00:02:00Z", kind="hung", detail="pid 1 is alive but /health ...")
    twins(tmp_path, baseline_watch=(hung,))
    verdict = evaluate_sweep(tmp_path, CFG, baseline="baseline", expected=EXPECTED).verdicts[0]
    assert verdict.decision == "incomplete"
    assert "baseline_died" in [g.kind for g in verdict.missing]


def test_a_sweep_stopped_before_its_last_candidate_names_it_not_measured(tmp_path: Path) -> None:
    """`stop` during tp4_dp2's load: eplb is never launched, and the judge still names it (planned.json),
    with the command that measures it, instead of leaving it out of verdicts.json."""
    sup = FakeSupervisor()

    def stop_under_load(name: str, profile: str, repeat: int) -> None:
        if name == "tp4_dp2":
            write_request(SweepLock.for_port(8000).path, "stop", (tmp_path / "latest").resolve())
            os.kill(os.getpid(), signal.SIGUSR1)

    code, _, sweep = run_sweep(
        tmp_path, sup, load=FakeLoad(before=stop_under_load), candidates="tp4_dp2,eplb"
    )
    assert code == 130 and sup.started == ["baseline", "tp4_dp2"]
    assert planned_names(sweep) == ["tp4_dp2", "eplb"]
    verdicts = judge_sweep(sweep)
    eplb = next(v for v in verdicts.verdicts if v.candidate == "eplb")
    assert eplb.decision == "incomplete" and [g.kind for g in eplb.missing] == ["not_measured"]
    assert eplb.resume == resume_command(sweep) and exit_code(verdicts) == EXIT_INCOMPLETE

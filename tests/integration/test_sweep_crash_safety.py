"""Crash-safe rollback on the simulator: every test ends with one healthy retained server and nothing else."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from contracts.errors import RollbackError
from contracts.files import read_model
from contracts.results import CandidateRun
from orchestrator.ledger.journal import Journal
from tests.integration.sweep_helpers import (
    assert_finished,
    assert_one_healthy_retained,
    journal_has,
    run_cli,
    run_sweep,
    start_until,
)

pytestmark = pytest.mark.slow


def test_sigkill_under_load_then_rollback_twice(tmp_path: Path, port: int) -> None:
    sweeps = tmp_path / "sweeps"
    proc, sweep = start_until(
        ["-m", "candidate=tp4_dp2"],
        sweeps=sweeps,
        port=port,
        event="load_started",
        candidate="tp4_dp2",
        timeout=180,
    )
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    live = Journal(sweep / "journal.jsonl").replay().live
    assert [s.candidate for s in live.values()] == ["tp4_dp2"]  # the journal knows what was left running
    first = run_cli(["rollback", str(sweep)])
    assert first.returncode == 0, first.stdout + first.stderr
    assert "rollback OK" in first.stdout
    assert_one_healthy_retained(sweep, port)
    second = run_cli(["rollback", str(sweep)])
    assert second.returncode == 0, second.stdout + second.stderr
    assert_one_healthy_retained(sweep, port)


@pytest.mark.parametrize(
    ("signum", "candidate", "event"),
    [
        (signal.SIGINT, "slow_start", "started"),  # Ctrl-C while a candidate starts
        (signal.SIGTERM, "tp4_dp2", "load_started"),  # SIGTERM while a candidate is under load
    ],
)
def test_a_signal_restores_the_baseline_and_the_last_line_names_it(
    tmp_path: Path, port: int, signum: signal.Signals, candidate: str, event: str
) -> None:
    sweeps = tmp_path / "sweeps"
    proc, sweep = start_until(
        ["-m", f"candidate={candidate}"],
        sweeps=sweeps,
        port=port,
        event=event,
        candidate=candidate,
        timeout=180,
    )
    proc.send_signal(signum)
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 130, out
    assert journal_has(sweep, "validated")
    assert_one_healthy_retained(sweep, port)
    assert out.strip().splitlines()[-1].startswith("gauntlet: retained server live: pid "), out[-2000:]


def test_a_server_killed_mid_profile_is_recorded_and_the_sweep_goes_on(tmp_path: Path, port: int) -> None:
    sweeps = tmp_path / "sweeps"
    code, out, sweep = run_sweep(["-m", "candidate=crashy,tp4_dp2"], sweeps=sweeps, port=port, timeout=600)
    crashy = read_model(sweep / "candidates" / "crashy" / "run.json", CandidateRun)
    assert crashy.startup.ok
    # The engine dies first (/health fails), the process exits half a second later: either is a lost server.
    assert any(e.kind in ("died", "unhealthy") for e in crashy.watch), crashy.watch
    tp4 = read_model(sweep / "candidates" / "tp4_dp2" / "run.json", CandidateRun)
    # Both repeats of both profiles, then any confirmation runs (r3 on) of a profile whose two runs
    # disagree, which is the machine's load (run.confirm_runs: at most 4 more, r6 the last).
    assert tp4.profiles[:4] == ["serial/r1", "decode_heavy/r1", "serial/r2", "decode_heavy/r2"], tp4.profiles
    assert all(2 < int(p.rsplit("/r", 1)[1]) <= 6 for p in tp4.profiles[4:]), tp4.profiles
    verdicts = json.loads((sweep / "verdicts.json").read_text())
    by_name = {v["candidate"]: v for v in verdicts["verdicts"]}
    assert by_name["crashy"]["decision"] == "reject", out
    assert "stability" in by_name["crashy"]["failed"]
    assert_finished(code, out, sweep)
    assert_one_healthy_retained(sweep, port)


def test_rollback_refuses_a_tampered_baseline_spec(tmp_path: Path, port: int) -> None:
    sweeps = tmp_path / "sweeps"
    code, out, sweep = run_sweep(["-m", "candidate=baseline"], sweeps=sweeps, port=port)
    assert code == 0, out
    assert_one_healthy_retained(sweep, port)
    spec_file = sweep / "retained" / "spec.json"
    data = json.loads(spec_file.read_text())
    data["argv"][data["argv"].index("16384")] = "32768"
    spec_file.write_text(json.dumps(data))
    refused = run_cli(["rollback", str(sweep)])
    assert refused.returncode == RollbackError.exit_code, refused.stdout + refused.stderr
    assert "refusing to restore" in refused.stderr
    assert "recorded '16384', now '32768'" in refused.stderr
    assert_one_healthy_retained(sweep, port)  # the refusal touched nothing
    status = run_cli(["status", str(sweep)])
    assert "a rollback from this sweep will refuse to restore it" in status.stdout


def test_resume_reuses_the_completed_candidates(tmp_path: Path, port: int) -> None:
    sweeps = tmp_path / "sweeps"
    proc, sweep = start_until(
        ["-m", "candidate=tp4_dp2,spec_probabilistic"],
        sweeps=sweeps,
        port=port,
        event="load_started",
        candidate="spec_probabilistic",
        timeout=300,
    )
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 130, out
    # Ctrl-C during a candidate: its verdict is incomplete, never a reject, and says how to resume (#21).
    judged = {v["candidate"]: v for v in json.loads((sweep / "verdicts.json").read_text())["verdicts"]}
    spec_verdict = judged["spec_probabilistic"]
    assert spec_verdict["decision"] == "incomplete", spec_verdict["reason"]
    assert spec_verdict["resume"].startswith("python -m orchestrator -m ")
    assert spec_verdict["resume"].endswith(f"hydra.sweep.dir={sweep}")
    assert "candidate=tp4_dp2,spec_probabilistic" in spec_verdict["resume"]
    assert f"to complete the sweep: {spec_verdict['resume']}" in out
    assert judged["tp4_dp2"]["decision"] == "reject"  # measured whole before the interrupt: decided
    tp4_before = (sweep / "candidates" / "tp4_dp2" / "run.json").read_text()
    code, out, _ = run_sweep(
        ["-m", "candidate=tp4_dp2,spec_probabilistic", f"hydra.sweep.dir={sweep}"],
        sweeps=sweeps,
        port=port,
        timeout=600,
    )
    assert_finished(code, out, sweep)  # resumed: nothing left that resuming measures
    assert journal_has(sweep, "skipped_complete", candidate="baseline")
    assert journal_has(sweep, "skipped_complete", candidate="tp4_dp2")
    assert (sweep / "candidates" / "tp4_dp2" / "run.json").read_text() == tp4_before
    spec = read_model(sweep / "candidates" / "spec_probabilistic" / "run.json", CandidateRun)
    # Measured again whole: both repeats of both profiles, then any confirmation runs (r3 on) of a profile
    # whose two runs disagree, which is the machine's load (a busy machine gave serial r3..r6).
    assert spec.profiles[:4] == ["serial/r1", "decode_heavy/r1", "serial/r2", "decode_heavy/r2"], (
        spec.profiles
    )
    assert all(int(p.rsplit("/r", 1)[1]) > 2 for p in spec.profiles[4:]), spec.profiles
    assert_one_healthy_retained(sweep, port)

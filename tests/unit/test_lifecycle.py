"""The sweep's steps with fake seams: journal, resume, failures, restore and its refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts.errors import HarnessError, LoadError, RollbackError, StartupFailure
from contracts.files import read_model
from contracts.results import CandidateRun, RecoveryValidation
from orchestrator.ledger.events import Started
from orchestrator.measure.begin import begin
from orchestrator.measure.candidate import is_complete, run_candidate
from orchestrator.recovery.restore import recovery_load_checks, restore
from orchestrator.servers.context import SweepContext
from tests.unit.composed import load
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams, summary

OVERRIDES = ["run.repeats=2", "run.profiles=[serial,decode_heavy]", "run.recovery_profiles=[decode_heavy]"]
MEGA = StartupFailure(
    "exited", kind="incompatible", exit_code=1, matched_line="DeepGEMM MegaMoE requires SM100 GPUs."
)


def make(tmp_path: Path, sup: FakeSupervisor, fake: FakeLoad, *extra: str) -> tuple[SweepContext, list[str]]:
    cfg, _ = load([*OVERRIDES, *extra])
    messages: list[str] = []
    return SweepContext.open(cfg, tmp_path / "sweep", fake_seams(sup, fake, messages)), messages


def candidate(name: str, *extra: str):  # type: ignore[no-untyped-def]
    cfg, _ = load([*OVERRIDES, f"candidate={name}", *extra])
    return cfg.candidate


def assert_one_retained(life: SweepContext, sup: FakeSupervisor) -> None:
    state = life.journal.replay()
    assert len(state.live) == 1
    (live,) = state.live.values()
    assert live.role == "retained" and live.fingerprint == state.retained_fingerprint
    assert list(sup.alive) == [live.pid]


def test_sweep_measures_fails_fast_restores_and_validates(tmp_path: Path) -> None:
    sup, fake = FakeSupervisor(failures={"mega_moe": MEGA}), FakeLoad()
    life, _ = make(tmp_path, sup, fake)
    begin(life)
    base = run_candidate(life, life.cfg.baseline, role="baseline")
    tp4 = run_candidate(life, candidate("tp4_dp2"))
    mega = run_candidate(life, candidate("mega_moe"))
    assert base.startup.ok and tp4.startup.ok
    assert (mega.startup.ok, mega.startup.kind) == (False, "incompatible")
    assert tp4.profiles == ["serial/r1", "decode_heavy/r1", "serial/r2", "decode_heavy/r2"]
    assert not [c for c in fake.calls if c[0] == "mega_moe"]
    result = restore(life, reason="sweep completed")
    assert result.ok, result.reason
    assert read_model(life.dir / "recovery" / "validation.json", RecoveryValidation) == result
    assert {c.name for c in result.checks} >= {
        "fingerprint",
        "max_model_len",
        "cache_config_info.cache_dtype",
    }
    assert_one_retained(life, sup)
    events = [e.name for e in life.journal.events()]
    assert events.index("launching") < events.index("started") < events.index("ready")
    assert events[-1] == "validated"


def test_resume_skips_complete_candidates_and_reruns_an_interrupted_one(tmp_path: Path) -> None:
    sup, fake = FakeSupervisor(), FakeLoad()
    life, _ = make(tmp_path, sup, fake)
    begin(life)
    run_candidate(life, life.cfg.baseline, role="baseline")
    run_candidate(life, candidate("tp4_dp2"))
    # The second candidate was interrupted: its last summary says so.
    run_candidate(life, candidate("spec_probabilistic"))
    target = life.dir / "candidates" / "spec_probabilistic" / "decode_heavy" / "r2" / "summary.json"
    data = json.loads(target.read_text())
    data["interrupted"] = True
    target.write_text(json.dumps(data))
    fake.calls.clear()
    again, messages = make(tmp_path, sup, fake)
    begin(again)
    run_candidate(again, again.cfg.baseline, role="baseline")
    run_candidate(again, candidate("tp4_dp2"))
    run_candidate(again, candidate("spec_probabilistic"))
    assert {c[0] for c in fake.calls} == {"spec_probabilistic"}
    assert sum("skipping (resume)" in m for m in messages) == 2


def test_a_server_that_dies_mid_profile_is_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    sup = FakeSupervisor()

    def kill(name: str, profile: str, repeat: int) -> None:
        if name == "tp4_dp2" and profile == "decode_heavy":
            sup.dead.update(sup.alive)

    fake = FakeLoad(before=kill)
    life, _ = make(tmp_path, sup, fake)
    begin(life)
    run = run_candidate(life, candidate("tp4_dp2"))
    assert [e.kind for e in run.watch] == ["died"]
    assert run.profiles == ["serial/r1", "decode_heavy/r1"]
    assert read_model(life.dir / "candidates" / "tp4_dp2" / "run.json", CandidateRun).watch[0].kind == "died"
    later = run_candidate(life, candidate("spec_probabilistic"))
    assert len(later.profiles) == 4
    assert sup.alive == {}


def test_ctrl_c_under_load_tears_the_candidate_down_before_propagating(tmp_path: Path) -> None:
    sup = FakeSupervisor()

    def interrupt(name: str, profile: str, repeat: int) -> None:
        if name == "tp4_dp2":
            raise KeyboardInterrupt

    life, _ = make(tmp_path, sup, FakeLoad(before=interrupt))
    begin(life)
    with pytest.raises(KeyboardInterrupt):
        run_candidate(life, candidate("tp4_dp2"))
    assert sup.alive == {}
    assert life.journal.replay().live == {}
    assert restore(life, reason="interrupted").ok
    assert_one_retained(life, sup)


def test_restore_refuses_a_tampered_retained_spec_and_says_what_differs(tmp_path: Path) -> None:
    sup = FakeSupervisor()
    life, _ = make(tmp_path, sup, FakeLoad())
    begin(life)
    assert restore(life, reason="sweep completed").ok
    (live_pid,) = sup.alive
    spec_file = life.retained_spec_path
    data = json.loads(spec_file.read_text())
    data["argv"][data["argv"].index("0.81")] = "0.9"
    spec_file.write_text(json.dumps(data))
    with pytest.raises(RollbackError) as info:
        restore(life, reason="rollback")
    text = str(info.value)
    assert "refusing to restore" in text
    assert "recorded '0.81', now '0.9'" in text
    assert list(sup.alive) == [live_pid]  # the refused restore left the live service alone


def test_a_second_begin_adopts_and_stops_leftovers_of_this_sweep(tmp_path: Path) -> None:
    sup = FakeSupervisor()
    life, _ = make(tmp_path, sup, FakeLoad())
    begin(life)
    spec = life.render(candidate("tp4_dp2"))
    spec_file = life.dir / "candidates" / "tp4_dp2" / "spec.json"
    spec_file.parent.mkdir(parents=True)
    spec_file.write_text(spec.to_json())
    server = sup.start(spec, tmp_path / "log")
    life.journal.append(
        Started(
            candidate="tp4_dp2",
            role="candidate",
            fingerprint=spec.fingerprint,
            pid=server.pid,
            pgid=server.pgid,
            create_time=server.create_time,
            port=8000,
            spec_file=str(spec_file),
            log_path="x",
        )
    )
    # The orchestrator was SIGKILLed here. A new run of the same sweep stops what it left.
    again, messages = make(tmp_path, sup, FakeLoad())
    begin(again)
    assert sup.alive == {}
    assert any("stopping tp4_dp2" in m for m in messages)


@pytest.mark.parametrize(
    ("error", "seen"),
    [
        (LoadError("the load runner could not open its connections"), "unhealthy"),
        (HarnessError("load.ca_bundle /etc/ca.pem: missing"), "harness"),
    ],
)
def test_a_recovery_run_without_a_summary_is_a_failed_validation_saying_why(
    tmp_path: Path, error: Exception, seen: str
) -> None:
    """A recovery run that ends without its summary (the load runner failed, the server was lost) fails the
    validation with a check naming what the watcher saw; before, the restore stopped on "summary.json:
    missing", a result-file error that named neither the run nor its cause."""

    def fail_the_recovery(candidate: str, profile: str, repeat: int) -> None:
        if phase["recovery"]:
            raise error

    phase = {"recovery": False}
    sup, fake = FakeSupervisor(), FakeLoad(before=fail_the_recovery)
    life, _ = make(tmp_path, sup, fake)
    begin(life)
    run_candidate(life, life.cfg.baseline, role="baseline")
    phase["recovery"] = True
    result = restore(life, reason="sweep completed")
    assert not result.ok
    (check,) = [c for c in result.checks if c.name == "decode_heavy/r1 ran"]
    assert not check.ok and check.observed.startswith(f"no summary written ({seen}: ")
    assert str(error).splitlines()[0] in check.observed
    assert "decode_heavy/r1 ran: expected a finished run" in result.reason


def test_recovery_checks_table() -> None:
    clean = summary("baseline", "decode_heavy", 1, "sha256:b")
    assert all(c.ok for c in recovery_load_checks([clean], []))
    queued = clean.model_copy(update={"server": clean.server.model_copy(update={"waiting_at_end": 3.0})})  # type: ignore[union-attr]
    failed = clean.model_copy(update={"completed": 3, "failed": 1})
    preempt = clean.model_copy(update={"server": clean.server.model_copy(update={"preemptions": 2.0})})  # type: ignore[union-attr]
    for bad, name in ((queued, "queued at end"), (failed, "completed"), (preempt, "preemptions")):
        broken = [c.name for c in recovery_load_checks([bad], []) if not c.ok]
        assert broken == [f"decode_heavy/r1 {name}"]


def test_an_unrecorded_launch_is_found_only_by_its_exact_argv_and_start_time(tmp_path: Path) -> None:
    cfg, _ = load(OVERRIDES)
    from launch.spec import render_spec
    from orchestrator.ledger.events import Launching
    from orchestrator.servers.leftovers import find_unrecorded
    from orchestrator.servers.seams import ProcessInfo

    spec = render_spec(cfg.service, cfg.baseline, cfg.host)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(spec.to_json())
    pending = Launching(
        candidate="baseline",
        role="baseline",
        fingerprint=spec.fingerprint,
        port=8000,
        spec_file=str(spec_file),
        at="t",
        at_epoch=100.0,
    )
    argv = ("/usr/bin/python3.11", *spec.argv[1:])
    procs = [
        ProcessInfo(10, 10, argv, 7.5, 100.5),  # ours: same argv, started after the announcement
        ProcessInfo(11, 11, argv, 2.0, 50.0),  # same argv but older: somebody else's server
        ProcessInfo(12, 12, (*argv, "--extra"), 8.0, 101.0),  # different argv
        ProcessInfo(13, 10, argv, 8.0, 101.0),  # a child of the group, not the leader
    ]
    assert find_unrecorded(pending, procs) == [(10, 7.5)]  # its identity is its start after boot


def test_a_profile_can_run_fewer_repeats_than_the_sweep(tmp_path: Path) -> None:
    sup, fake = FakeSupervisor(), FakeLoad()
    life, _ = make(tmp_path, sup, fake, "workloads.serial.repeats=1")
    begin(life)
    run = run_candidate(life, candidate("tp4_dp2", "workloads.serial.repeats=1"))
    assert run.profiles == ["serial/r1", "decode_heavy/r1", "decode_heavy/r2"]
    assert is_complete(life, "tp4_dp2")


def test_a_load_error_is_evidence_not_a_crash_of_the_sweep(tmp_path: Path) -> None:
    from contracts.errors import LoadError

    def vanish(name: str, profile: str, repeat: int) -> None:
        if name == "tp4_dp2" and profile == "decode_heavy":
            raise LoadError("POST /tokenize: connection refused")

    sup = FakeSupervisor()
    life, messages = make(tmp_path, sup, FakeLoad(before=vanish))
    begin(life)
    run = run_candidate(life, candidate("tp4_dp2"))
    assert [(e.kind, e.detail) for e in run.watch] == [
        ("unhealthy", "decode_heavy r1: POST /tokenize: connection refused")
    ]
    assert run.profiles == ["serial/r1", "decode_heavy/r1"]
    assert any("could not complete" in m for m in messages)
    assert is_complete(life, "tp4_dp2")  # resume does not rerun it
    assert sup.alive == {}


@pytest.mark.parametrize(
    ("error", "detail"),
    [
        # bad workload data is the harness's fault (load.sources raises HarnessError), not the server's
        (
            HarnessError("trace.jsonl:3: not JSON (Expecting value)"),
            "trace.jsonl:3: not JSON (Expecting value)",
        ),
        # an exception inside the load runner (a bug) is the harness's too, with its type
        (KeyError("prompt"), "KeyError: 'prompt'"),
    ],
)
def test_a_harness_fault_is_recorded_as_such_and_measured_again_on_resume(
    tmp_path: Path, error: Exception, detail: str
) -> None:
    def broken(name: str, profile: str, repeat: int) -> None:
        if name == "tp4_dp2" and profile == "serial":
            raise error

    sup = FakeSupervisor()
    life, messages = make(tmp_path, sup, FakeLoad(before=broken))
    begin(life)
    run = run_candidate(life, candidate("tp4_dp2"))
    # Not "the server died": the other profiles still ran, the event says harness, resume measures again.
    assert {e.kind for e in run.watch} == {"harness"}
    assert run.watch[0].detail == f"serial r1: {detail}"
    assert "decode_heavy/r1" in run.profiles
    assert any("load harness error (not the server)" in m for m in messages)
    assert not any("the server died under load" in m for m in messages)
    assert not is_complete(life, "tp4_dp2")
    assert sup.alive == {}


def test_a_live_service_that_is_not_the_configured_baseline_is_a_preflight_refusal_exit_4(
    tmp_path: Path,
) -> None:
    """Exit 7 is for the journal and rollback; a live service the configuration does not describe is found
    before anything is touched, as the doctor finds it (PreflightError, exit 4)."""
    from contracts.errors import PreflightError
    from orchestrator.servers.context import SweepContext
    from tests.unit.fakes import fake_seams

    sup = FakeSupervisor()
    first, _ = make(tmp_path / "a", sup, FakeLoad())
    begin(first)
    assert restore(first, reason="sweep completed").ok  # the live service: this baseline
    (live_pid,) = sup.alive
    cfg, _ = load([*OVERRIDES, "candidate@baseline=tp4_dp2"])  # a baseline that renders another spec
    second = SweepContext.open(cfg, tmp_path / "b" / "sweep", fake_seams(sup, FakeLoad(), []))
    with pytest.raises(PreflightError) as info:
        begin(second)  # the live service is found from the port's ledger, not given
    assert info.value.exit_code == 4
    assert "but the configured baseline renders" in info.value.message
    assert list(sup.alive) == [live_pid]  # the live service keeps serving

"""Scale-out pieces without a cluster: node and job identity, journals per job, cancelling, the opening."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from contracts.errors import ConfigError
from contracts.files import read_model, write_model
from contracts.results import CandidateRun, ProfileSummary
from contracts.schema import GauntletConfig, RunConfig, WorkloadConfig
from load.signals import PREEMPT_SIGNAL
from orchestrator.app.jobs import run_job, scheduler_signals
from orchestrator.ledger.events import JobFinished, JobStarted, Started, TornDown
from orchestrator.ledger.journal import Journal, RemoteJob
from orchestrator.ledger.nodes import Place, acquire_slot, job_place, launching_place, this_node
from orchestrator.ledger.opening import (
    JobInterrupted,
    read_opening,
    stop_checkpoint,
    why_not_open,
    write_opening,
)
from orchestrator.servers.scheduler import cancel_job
from tests.unit.composed import load
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams, summary


@pytest.mark.parametrize(
    ("environ", "node"),
    [
        ({"GAUNTLET_NODE": "sim-node-1", "SLURMD_NODENAME": "gpu17"}, "sim-node-1"),
        ({"SLURMD_NODENAME": "gpu17"}, "gpu17"),
        ({}, None),  # the host name
    ],
)
def test_the_node_is_named_by_gauntlet_then_slurm_then_the_host(
    environ: dict[str, str], node: str | None
) -> None:
    import socket

    assert this_node(environ) == (node or socket.gethostname())


@pytest.mark.parametrize(
    ("job_id", "environ", "expected"),
    [
        (
            "4242_3",
            {"SUBMITIT_EXECUTOR": "slurm", "SLURMD_NODENAME": "gpu17"},
            Place("gpu17", "4242_3", "slurm"),
        ),
        ("8473", {"SUBMITIT_EXECUTOR": "local", "GAUNTLET_NODE": "n0"}, Place("n0", "8473", "local")),
        ("8473", {}, None),  # the basic launcher: jobs run inside the launching process
        (None, {"SUBMITIT_EXECUTOR": "slurm"}, None),
    ],
)
def test_a_job_place_comes_from_the_launcher(
    job_id: str | None, environ: dict[str, str], expected: Place | None
) -> None:
    assert job_place(job_id, environ) == expected


def test_a_job_journal_name_is_safe_on_any_filesystem() -> None:
    assert Place("gpu/17 a", "12:3", "slurm").journal_name() == "gpu_17_a-12_3.jsonl"


def started(pid: int, candidate: str = "c", role: str = "candidate") -> Started:
    return Started(
        candidate=candidate, role=role, fingerprint="sha256:c", port=8000, pid=pid, pgid=pid, create_time=1.0
    )  # type: ignore[arg-type]


def test_every_line_names_its_node_and_job_and_two_jobs_never_share_a_file(tmp_path: Path) -> None:
    a = Journal.of_sweep(tmp_path, Place("n0", "11", "local"))
    b = Journal.of_sweep(tmp_path, Place("n1", "12", "local"))
    main = Journal.of_sweep(tmp_path, Place("head"))
    assert len({a.path, b.path, main.path}) == 3
    assert main.path == tmp_path / "journal.jsonl"
    a.append(started(100))
    assert [(e.node, e.job) for e in a.events()] == [("n0", "11")]
    assert main.events() == []


def test_a_node_sees_its_own_jobs_servers_and_lists_the_other_nodes_jobs(tmp_path: Path) -> None:
    head = Journal.of_sweep(tmp_path, Place("head"))
    head.append(started(1, "baseline", "retained"))
    local_job = Journal.of_sweep(tmp_path, Place("head", "21", "local"))
    local_job.append(JobStarted(candidate="a", executor="local"))
    local_job.append(started(2, "a"))
    remote = Journal.of_sweep(tmp_path, Place("gpu17", "4242_0", "slurm"))
    remote.append(JobStarted(candidate="b", executor="slurm"))
    remote.append(started(2, "b"))  # the same pid on another machine: not this node's process
    done = Journal.of_sweep(tmp_path, Place("gpu18", "4242_1", "slurm"))
    done.append(JobStarted(candidate="c", executor="slurm"))
    done.append(started(5, "c"))
    done.append(TornDown(candidate="c", pid=5, fingerprint="sha256:c"))
    done.append(JobFinished(candidate="c", outcome="measured"))

    state = head.replay()
    assert {pid: s.candidate for pid, s in state.live.items()} == {1: "baseline", 2: "a"}
    jobs = {j.job: j for j in head.remote_jobs()}
    assert set(jobs) == {"4242_0", "4242_1"}
    assert jobs["4242_0"].executor == "slurm" and not jobs["4242_0"].finished
    assert [s.candidate for s in jobs["4242_0"].live] == ["b"]
    assert jobs["4242_1"].finished and jobs["4242_1"].live == []
    # A job's own journal is its own view: it does not fold in the others.
    assert list(remote.replay().live) == [2] and remote.replay().live[2].candidate == "b"


def test_a_journal_written_before_nodes_existed_still_replays(tmp_path: Path) -> None:
    old = Journal(tmp_path / "journal.jsonl")  # no place: lines without node or job
    old.append(started(7))
    assert list(Journal.of_sweep(tmp_path, launching_place()).replay().live) == [7]


def remote(executor: str | None, job: str = "4242_0") -> RemoteJob:
    return RemoteJob(node="gpu17", job=job, executor=executor, journal=Path("j"), live=[], finished=False)


def test_a_slurm_job_is_cancelled_with_scancel(tmp_path: Path) -> None:
    calls: list[Sequence[str]] = []

    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    assert "cancelled (scancel)" in cancel_job(remote("slurm"), tmp_path, run=run)
    assert calls[0][0] == "squeue" and calls[-1] == ["scancel", "4242_0"]


def test_a_slurm_job_that_already_ended_is_not_cancelled_but_said(tmp_path: Path) -> None:
    log = tmp_path / "jobcomp.log"
    log.write_text("JobId=4243 JobState=CANCELLED NodeList=gpu17 ArrayJobId=4242 ArrayTaskId=0\n")
    calls: list[Sequence[str]] = []

    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        if argv[:2] == ["scontrol", "show"] and argv[2] == "config":
            config = f"JobCompType = jobcomp/filetxt\nJobCompLoc = {log}\n"
            return subprocess.CompletedProcess(argv, 0, config, "")
        return subprocess.CompletedProcess(argv, 1, "", "slurm_load_jobs error: Invalid job id specified")

    said = cancel_job(remote("slurm"), tmp_path, run=run)
    assert "already ended (CANCELLED, per job completion log" in said, said
    assert not any(argv[0] == "scancel" for argv in calls)


@pytest.mark.parametrize(
    ("cmdline", "signalled", "said"),
    [
        (
            ["python", "-m", "submitit.local._local", "/s/.submitit/%j"],
            True,
            "SIGTERM to its submitit controller",
        ),
        (["nginx"], False, "not a submitit controller now; left alone"),  # the pid was reused
        (None, False, "already ended"),
    ],
)
def test_a_local_job_is_cancelled_only_through_its_submitit_controller(
    tmp_path: Path, cmdline: list[str] | None, signalled: bool, said: str
) -> None:
    kills: list[tuple[int, int]] = []
    text = cancel_job(
        remote("local", job="8473"),
        tmp_path,
        cmdline_of=lambda pid: cmdline,
        kill=lambda p, s: kills.append((p, s)),
    )
    assert said in text
    assert kills == ([(8473, signal.SIGTERM)] if signalled else [])


def test_an_unknown_executor_is_not_cancelled_but_said(tmp_path: Path) -> None:
    assert "cannot be cancelled from here" in cancel_job(remote(None), tmp_path)


@pytest.mark.parametrize(
    ("state", "reason", "why"),
    [
        (None, "", "was not opened"),
        ("opening", "", "still opening"),
        ("failed", "the baseline did not start", "did not open: the baseline did not start"),
        ("stopped", "rollback or stop requested", "was stopped: rollback or stop requested"),
        ("open", "", None),
    ],
)
def test_a_job_starts_nothing_unless_the_opening_marker_says_open(
    tmp_path: Path, state: str | None, reason: str, why: str | None
) -> None:
    if state is not None:
        write_opening(tmp_path, state, node="head", reason=reason)  # type: ignore[arg-type]
        opening = read_opening(tmp_path)
        assert opening is not None and opening.state == state and opening.node == "head"
    found = why_not_open(tmp_path)
    assert (found is None) if why is None else (found is not None and why in found)


def test_a_torn_opening_marker_reads_as_not_open(tmp_path: Path) -> None:
    (tmp_path / "opening.json").write_text('{"state": "op')
    assert read_opening(tmp_path) is None and why_not_open(tmp_path) is not None


def test_sigterm_inside_a_job_unwinds_like_ctrl_c_and_the_handler_is_put_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    unwound = False
    with pytest.raises(KeyboardInterrupt, match="SIGTERM from the scheduler"), scheduler_signals():
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before the next line
            unwound = False
        finally:
            unwound = True
    assert unwound and signal.getsignal(signal.SIGTERM) is before


def test_simulated_node_slots_are_exclusive_and_a_full_cluster_waits(tmp_path: Path) -> None:
    second = acquire_slot(tmp_path, 2, prefer=3)  # job 3 of a 2-node cluster starts at node 1
    first = acquire_slot(tmp_path, 2, prefer=1)  # node 1 taken: node 0
    assert (first.name, second.name) == ("sim-node-0", "sim-node-1")
    clock = iter(float(t) for t in range(100))
    waited: list[bool] = []
    with pytest.raises(TimeoutError, match="no simulated node of 2"):
        acquire_slot(
            tmp_path,
            2,
            wait_s=3.0,
            sleep=lambda s: None,
            clock=lambda: next(clock),
            on_wait=lambda: waited.append(True),
        )
    assert waited == [True]
    first.release()
    third = acquire_slot(tmp_path, 2, prefer=1)  # node 1 is busy: the free one
    assert third.name == first.name
    second.release()
    third.release()


@pytest.mark.parametrize(
    ("launcher", "nodes", "elsewhere"),
    [
        ("hydra._internal.core_plugins.basic_launcher.BasicLauncher", 0, False),
        ("hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher", 0, True),
        ("hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher", 2, True),
        ("hydra_plugins.hydra_ray_launcher.ray_launcher.RayLauncher", 0, True),
    ],
)
def test_which_launchers_run_jobs_on_other_nodes(launcher: str, nodes: int, elsewhere: bool) -> None:
    from orchestrator.app.controller import jobs_run_elsewhere

    cfg = GauntletConfig(run=RunConfig(simulated_nodes=nodes))
    assert jobs_run_elsewhere(launcher, cfg) is elsewhere


def test_submitit_local_without_simulated_nodes_is_refused_naming_the_setting() -> None:
    from orchestrator.app.controller import jobs_run_elsewhere

    with pytest.raises(ConfigError, match=r"run\.simulated_nodes"):
        jobs_run_elsewhere(
            "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher", GauntletConfig()
        )


@pytest.mark.parametrize(
    ("startup_s", "profiles", "minutes"),
    [
        (900.0, [(3, 600.0)] * 6, 732),  # 3 x (900 + 10,800) x 1.25 = 43,875 s
        (60.0, [(2, 30.0)], 10),  # never below 10 minutes
    ],
)
def test_a_jobs_time_limit_covers_three_launches_and_every_profile(
    startup_s: float, profiles: list[tuple[int, float]], minutes: int
) -> None:
    from orchestrator.config.compose import job_minutes

    assert job_minutes(startup_s, profiles) == minutes


@pytest.mark.parametrize(
    ("preset", "target", "gpus"),
    [
        ("gauntlet_slurm", "SlurmLauncher", 8),
        ("gauntlet_local", "LocalLauncher", None),
    ],
)
def test_the_launcher_presets_compose_with_the_hosts_gpus_and_a_computed_time_limit(
    preset: str, target: str, gpus: int | None
) -> None:
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from contracts.paths import CONF_DIR
    from orchestrator.config.compose import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(
                config_name="config",
                overrides=["host=h100x8", f"hydra/launcher={preset}"],
                return_hydra_config=True,
            )
    finally:
        GlobalHydra.instance().clear()
    launcher = cfg.hydra.launcher
    assert str(launcher._target_).endswith(target)
    assert launcher.gpus_per_node == gpus and launcher.tasks_per_node == 1 and launcher.nodes == 1
    assert isinstance(launcher.timeout_min, int) and launcher.timeout_min >= 60


OVERRIDES = ["run.repeats=2", "run.profiles=[serial,decode_heavy]", "run.recovery_profiles=[decode_heavy]"]


@dataclass
class _SpeedLoad(FakeLoad):
    """FakeLoad whose output tokens/s is ``tps`` (set between jobs: the node's hardware changes)."""

    tps: float = 1000.0

    def __call__(
        self, base_url: str, served_model: str, workload: WorkloadConfig, **kw: Any
    ) -> ProfileSummary:
        self.calls.append((kw["candidate"], workload.name, kw["repeat"]))
        if self.before is not None:
            self.before(kw["candidate"], workload.name, kw["repeat"])
        result = summary(kw["candidate"], workload.name, kw["repeat"], kw["fingerprint"], output_tps=self.tps)
        write_model(kw["out_dir"] / "summary.json", result)
        (kw["out_dir"] / "records.jsonl").write_text("")
        return result


def test_a_node_runs_baseline_candidate_baseline_and_reuses_its_baseline_only_without_drift(
    tmp_path: Path,
) -> None:
    """Three jobs on one node. The first measures the node's baseline, its candidate and a block after
    it; the node slows by 30% during that candidate, so its block drifts and the second job measures the
    node's baseline afresh; the third job reuses it (its block after the second candidate agrees)."""
    cfg, _ = load(OVERRIDES)
    write_opening(tmp_path, "open", node="head")
    sup, speed, messages = FakeSupervisor(), _SpeedLoad(), []
    place = Place(node="n1", job="1")

    def job(candidate: str) -> str:
        chosen, _ = load([f"candidate={candidate}", *OVERRIDES])
        return run_job(chosen, tmp_path, place, fake_seams(sup, speed, messages))

    speed.before = lambda name, profile, repeat: setattr(speed, "tps", 1300.0) if name == "tp4_dp2" else None
    assert "(and its block after it)" in job("tp4_dp2")
    assert sup.started == ["baseline@n1", "tp4_dp2", "baseline@n1"]
    block = tmp_path / "candidates/baseline@n1/blocks/after-tp4_dp2/run.json"
    assert read_model(block, CandidateRun).follows == "tp4_dp2"

    job("eplb")  # the block after tp4_dp2 ran at 1300 tok/s against an opening at 1000: drift
    assert sup.started[3:] == ["baseline@n1", "eplb", "baseline@n1"]
    assert any("drift on this node (BASELINE DRIFT" in m for m in messages), messages

    job("mega_moe")  # the fresh opening and the block after eplb agree: reused
    assert sup.started[6:] == ["mega_moe", "baseline@n1"]
    assert any("reusing the baseline measured on this node" in m for m in messages)
    assert cfg.run.interleave  # the default


@pytest.mark.parametrize(
    ("when", "launched", "measured"),
    [
        # stopped while the node's baseline runs its first profile: its second profile never starts
        (("baseline@n1", "serial", 1), ["baseline@n1"], 1),
        # stopped during the candidate's last profile: no block is launched after it
        (("tp4_dp2", "decode_heavy", 2), ["baseline@n1", "tp4_dp2"], 8),
    ],
)
def test_a_job_whose_signal_was_lost_stops_at_its_next_checkpoint(
    tmp_path: Path, when: tuple[str, str, int], launched: list[str], measured: int
) -> None:
    """``stop`` writes the marker, then signals; here no signal arrives (submitit's controller had not
    started the task, or the raise was swallowed). The job reads the marker before its next profile or
    launch, unwinds as if interrupted, tears its server down and says so in its journal."""
    chosen, _ = load(["candidate=tp4_dp2", *OVERRIDES])
    write_opening(tmp_path, "open", node="head")
    sup, load_fn = FakeSupervisor(), _SpeedLoad()

    def stop_without_a_signal(name: str, profile: str, repeat: int) -> None:
        if (name, profile, repeat) == when:
            write_opening(tmp_path, "stopped", node="head", reason="gauntlet stop")

    load_fn.before = stop_without_a_signal
    with pytest.raises(
        KeyboardInterrupt, match=r"the sweep was stopped \(gauntlet stop\), seen at a checkpoint"
    ):
        run_job(chosen, tmp_path, Place(node="n1", job="7"), fake_seams(sup, load_fn, []))
    assert sup.started == launched and not sup.alive  # every server it started is torn down
    assert len(load_fn.calls) == measured
    (journal,) = (tmp_path / "journals").glob("*.jsonl")
    events = Journal(journal).events()
    assert isinstance(events[-1], JobFinished) and "interrupted: the sweep was stopped" in events[-1].outcome
    assert [e.pid for e in events if isinstance(e, Started)] == [  # type: ignore[attr-defined]
        e.pid
        for e in events
        if isinstance(e, TornDown)  # type: ignore[attr-defined]
    ]


@dataclass
class _SignalledTeardown(FakeSupervisor):
    """A teardown that the scheduler's SIGTERM reaches halfway (``stop``: marker first, signal after)."""

    sweep_dir: Path = Path()
    signalled: int = 0

    def teardown(self, server: Any) -> Any:
        if (opening := read_opening(self.sweep_dir)) is not None and opening.state == "stopped":
            self.signalled += 1
            os.kill(os.getpid(), signal.SIGTERM)  # Python runs the handler before the next line
        return super().teardown(server)


def test_the_signal_after_a_checkpoint_stop_does_not_cut_the_teardown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The job sees the marker at a checkpoint and unwinds; the forwarded SIGTERM lands in each
    teardown. Each server is still torn down and journaled (a CI run lost the ``torn_down`` line)."""
    chosen, _ = load(["candidate=tp4_dp2", *OVERRIDES])
    write_opening(tmp_path, "open", node="head")
    sup, load_fn = _SignalledTeardown(sweep_dir=tmp_path), _SpeedLoad()

    def stop_then(name: str, profile: str, repeat: int) -> None:
        if (name, profile, repeat) == ("tp4_dp2", "serial", 1):
            write_opening(tmp_path, "stopped", node="head", reason="gauntlet stop")

    load_fn.before = stop_then
    with pytest.raises(JobInterrupted, match="seen at a checkpoint"):
        run_job(chosen, tmp_path, Place(node="n1", job="7"), fake_seams(sup, load_fn, []))
    assert sup.signalled == 1 and sup.started == ["baseline@n1", "tp4_dp2"] and not sup.alive
    (journal,) = (tmp_path / "journals").glob("*.jsonl")
    events = Journal(journal).events()
    started = [e.pid for e in events if isinstance(e, Started)]  # type: ignore[attr-defined]
    assert started == [e.pid for e in events if isinstance(e, TornDown)]  # type: ignore[attr-defined]
    assert isinstance(events[-1], JobFinished) and "the sweep was stopped" in events[-1].outcome
    assert "signal SIGTERM from the scheduler: already stopping" in capsys.readouterr().err


@dataclass
class _SigtermInFirstTeardown(FakeSupervisor):
    """``scancel`` lands while the job tears its node's baseline down, before anything asked it to stop."""

    signalled: int = 0

    def teardown(self, server: Any) -> Any:
        if not self.signalled:
            self.signalled += 1
            os.kill(os.getpid(), signal.SIGTERM)  # without a shield the handler raises right here
        return super().teardown(server)


def test_a_sigterm_during_a_teardown_waits_for_it_then_unwinds_the_job(tmp_path: Path) -> None:
    chosen, _ = load(["candidate=tp4_dp2", *OVERRIDES])
    write_opening(tmp_path, "open", node="head")
    sup, messages = _SigtermInFirstTeardown(), list[str]()
    with pytest.raises(JobInterrupted, match="signal SIGTERM from the scheduler"):
        run_job(chosen, tmp_path, Place(node="n1", job="7"), fake_seams(sup, _SpeedLoad(), messages))
    assert sup.started == ["baseline@n1"] and not sup.alive  # torn down whole; the candidate never ran
    (journal,) = (tmp_path / "journals").glob("*.jsonl")
    kinds = [e.name for e in Journal(journal).events()]
    assert kinds[-3:] == ["tearing_down", "torn_down", "job_finished"], kinds
    assert any(m.startswith("SIGTERM: stopping baseline@n1 (pid ") for m in messages), messages


def test_a_second_sigterm_is_said_not_raised_and_a_checkpoint_after_a_swallowed_one_raises() -> None:
    with pytest.raises(JobInterrupted) as first, scheduler_signals() as unwinding:
        check = unwinding.guard(lambda: None)
        check()  # the sweep is open: nothing to stop
        with contextlib.suppress(JobInterrupted):  # swallowed where it landed (a finalizer, a callback)
            os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # again: said, not raised
        check()  # the next checkpoint unwinds
    assert str(first.value) == "signal SIGTERM from the scheduler, seen at a checkpoint"


def test_the_stop_checkpoint_reads_the_marker(tmp_path: Path) -> None:
    check = stop_checkpoint(tmp_path)
    check()  # no marker: nothing to stop (the opening check decides whether a job starts at all)
    write_opening(tmp_path, "open", node="head")
    check()
    write_opening(tmp_path, "stopped", node="head", reason="rollback")
    with pytest.raises(JobInterrupted, match="stopped \\(rollback\\)"):
        check()


@contextlib.contextmanager
def _submitit_preemption() -> Iterator[list[int]]:
    """A preemption handler in place of submitit's: it checkpoints (here: counts) and exits with 144."""
    calls: list[int] = []

    def requeue(signum: int, frame: object) -> None:
        calls.append(signum)
        raise SystemExit(144)  # submitit_local's LOCAL_REQUEUE_RETURN_CODE

    before = signal.signal(PREEMPT_SIGNAL, requeue)
    try:
        yield calls
    finally:
        signal.signal(PREEMPT_SIGNAL, before)
    assert signal.getsignal(PREEMPT_SIGNAL) is before


def _preempt_swallowed() -> None:
    """The preemption signal, its handler's exit swallowed where it landed (a finalizer, a callback)."""
    with contextlib.suppress(SystemExit):
        os.kill(os.getpid(), PREEMPT_SIGNAL)


class _PreemptedInLastTeardown(FakeSupervisor):
    """The preemption lands in the job's last teardown, after its last checkpoint, and is swallowed there."""

    def teardown(self, server: Any) -> Any:
        if len(self.alive) == 1 and len(self.started) == 3:  # baseline, candidate, baseline again
            _preempt_swallowed()
        return super().teardown(server)


@pytest.mark.parametrize("where", ["under the candidate's first profile", "in the last teardown"])
def test_a_preemption_whose_exit_is_swallowed_still_requeues_the_job(tmp_path: Path, where: str) -> None:
    """CI: submitit's SIGUSR2 handler raised SystemExit inside a uvloop callback, which swallowed it; the
    job measured on and was never requeued. The job remembers the exit and raises it again at its next
    checkpoint, or at its end, and journals the requeue."""
    chosen, _ = load(["candidate=tp4_dp2", *OVERRIDES])
    write_opening(tmp_path, "open", node="head")
    load_ = _SpeedLoad()
    if where.startswith("under"):
        load_.before = lambda *key: _preempt_swallowed() if key == ("tp4_dp2", "serial", 1) else None
        sup: FakeSupervisor = FakeSupervisor()
    else:
        sup = _PreemptedInLastTeardown()
    with _submitit_preemption() as calls, pytest.raises(SystemExit) as exited:
        run_job(chosen, tmp_path, Place(node="n1", job="7"), fake_seams(sup, load_, []))
    assert exited.value.code == 144 and calls == [PREEMPT_SIGNAL]
    assert not sup.alive
    (journal,) = (tmp_path / "journals").glob("*.jsonl")
    finished = [e for e in Journal(journal).events() if isinstance(e, JobFinished)]
    assert [e.outcome for e in finished] == ["interrupted: requeued (exit 144)"]
    candidate_runs = [c for c in load_.calls if c[0] == "tp4_dp2"]
    if where.startswith("under"):  # its next checkpoint stopped it: no other profile was measured
        assert candidate_runs == [("tp4_dp2", "serial", 1)], load_.calls
    else:  # measured whole, then requeued all the same (the rerun skips what is complete)
        assert len(candidate_runs) == 4, load_.calls

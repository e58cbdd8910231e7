"""The sweep controller behind ``python -m orchestrator -m ...``: Hydra in-process, fake servers and load."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from contracts.errors import GauntletError
from orchestrator.app import hydra_app
from orchestrator.ledger.events import SweepFinished
from orchestrator.ledger.journal import Journal
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams

SMALL = ["run.repeats=1", "run.profiles=[serial,decode_heavy]", "run.recovery_profiles=[decode_heavy]"]


def run_sweep(
    tmp_path: Path, sup: FakeSupervisor, *overrides: str, load: FakeLoad | None = None
) -> tuple[int, list[str], Path]:
    messages: list[str] = []
    code = hydra_app.main(
        ["-m", "candidate=tp4_dp2", f"run.sweeps_dir={tmp_path}", *SMALL, *overrides],
        seams_factory=lambda: fake_seams(sup, load or FakeLoad(), messages),
    )
    return code, messages, (tmp_path / "latest").resolve()


@pytest.mark.parametrize(
    ("interleave", "launches"),
    [
        # ABA: the opening baseline, the candidate, the baseline's block after it, the restore.
        ("true", ["baseline", "tp4_dp2", "baseline", "baseline"]),
        ("false", ["baseline", "tp4_dp2", "baseline"]),
    ],
)
def test_a_stop_sweep_ends_with_nothing_running_and_says_so(
    tmp_path: Path, interleave: str, launches: list[str]
) -> None:
    sup = FakeSupervisor()
    code, messages, sweep = run_sweep(
        tmp_path, sup, "run.retained_after_sweep=stop", f"run.interleave={interleave}"
    )
    assert code == 0
    assert sup.started == launches
    assert (sweep / "candidates/baseline/blocks/after-tp4_dp2/run.json").exists() == (interleave == "true")
    assert sup.alive == {}
    assert messages[-1] == "retained server stopped (run.retained_after_sweep=stop): nothing left running"
    finished = [e for e in Journal(sweep / "journal.jsonl").events() if isinstance(e, SweepFinished)]
    assert [(e.validated, e.retained) for e in finished] == [(True, "stopped")]
    assert hydra_app._ACTIVE.get() is None  # the controller was published only while Hydra ran


def test_a_keep_sweep_ends_naming_the_live_retained_server(tmp_path: Path) -> None:
    sup = FakeSupervisor()
    code, messages, sweep = run_sweep(tmp_path, sup)
    assert code == 0
    (pid,) = sup.alive
    assert messages[-1].startswith(f"retained server live: pid {pid} at http://127.0.0.1:8000 (fingerprint ")
    assert messages[-1].endswith(f"`make stop SWEEP={sweep}` or `python -m orchestrator stop {sweep}`")


def test_ctrl_c_in_a_job_restores_then_says_what_runs(tmp_path: Path) -> None:
    sup = FakeSupervisor()

    def interrupt(name: str, profile: str, repeat: int) -> None:
        if name == "tp4_dp2":
            raise KeyboardInterrupt

    code, messages, sweep = run_sweep(tmp_path, sup, load=FakeLoad(before=interrupt))
    assert code == 130
    state = Journal(sweep / "journal.jsonl").replay()
    (live,) = state.live.values()
    assert live.role == "retained" and list(sup.alive) == [live.pid]
    assert state.last_event == "sweep_finished"
    assert messages[-1].startswith(f"retained server live: pid {live.pid}")


def test_a_baseline_that_does_not_start_fails_the_sweep_with_its_exit_code(tmp_path: Path) -> None:
    from contracts.errors import StartupFailure

    failure = StartupFailure("exited", kind="bad-args", exit_code=2, matched_line="error: --x")
    sup = FakeSupervisor(failures={"baseline": failure})
    code, messages, _ = run_sweep(tmp_path, sup)
    assert code == GauntletError.exit_code
    assert not any(m.startswith("tp4_dp2:") for m in messages)  # the jobs did not run
    assert messages[-1] == "nothing gauntlet started for this sweep is running"


def test_the_callback_needs_the_controller_main_publishes() -> None:
    with pytest.raises(GauntletError, match="outside `python -m orchestrator`"):
        hydra_app.active_controller()


def test_sigint_interrupts_the_sweep_even_when_the_parent_ignored_it(tmp_path: Path) -> None:
    """A sweep started with `&` from a script inherits SIGINT ignored; Ctrl-C must still restore."""
    sup = FakeSupervisor()

    def interrupt(name: str, profile: str, repeat: int) -> None:
        if name == "tp4_dp2":
            os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        code, messages, sweep = run_sweep(tmp_path, sup, load=FakeLoad(before=interrupt))
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # put back when the sweep ended
    finally:
        signal.signal(signal.SIGINT, previous)
    assert code == 130
    assert Journal(sweep / "journal.jsonl").replay().last_event == "sweep_finished"
    assert messages[-1].startswith("retained server live: pid ")

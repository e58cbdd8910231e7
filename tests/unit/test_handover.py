"""One owner of a sweep's servers: a request from `stop`/`rollback` unwinds the sweep (fake servers and load,
Hydra in-process); the pieces behind it (the lock's holder, the request file, the copy beside the lock, the
status states, the rollback's own directory, the 401 message) as tables."""

from __future__ import annotations

import os
import shutil
import signal
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from contracts.errors import SweepLockedError
from contracts.layout import retained_spec_file
from orchestrator.ledger import offsite
from orchestrator.ledger.events import (
    Event,
    LiveServer,
    Restoring,
    Role,
    Started,
    StopFinished,
    StopRequested,
    SweepFinished,
    TornDown,
    Validated,
    ValidationFailed,
)
from orchestrator.ledger.journal import Journal, JournalState
from orchestrator.ledger.lock import Holder, SweepLock
from orchestrator.ledger.requests import STOPPED_BY_USER, read_request, request_file, write_request
from orchestrator.recovery.handover import acting_on, port_refusal, validated_since_start
from orchestrator.recovery.restore import UNAUTHORIZED, refused
from orchestrator.recovery.rollback import new_rollback_dir
from orchestrator.recovery.status import StatusLine, sweep_state
from tests.unit.fakes import FakeLoad, FakeSupervisor
from tests.unit.test_controller import run_sweep

# ---------------------------------------------------------------- the sweep honours a request


def _ask(action: str, sweep_dir: Path) -> None:
    """What `stop`/`rollback` do to a running sweep: the request beside the lock, then the signal."""
    write_request(SweepLock.for_port(8000).path, action, sweep_dir)  # type: ignore[arg-type]
    os.kill(os.getpid(), signal.SIGUSR1)


def test_stop_unwinds_the_sweep_at_once_and_restores_nothing(tmp_path: Path) -> None:
    sup = FakeSupervisor()

    def stop_under_load(name: str, profile: str, repeat: int) -> None:
        if name == "tp4_dp2":
            _ask("stop", (tmp_path / "latest").resolve())

    code, messages, sweep = run_sweep(
        tmp_path, sup, load=FakeLoad(before=stop_under_load), candidates="tp4_dp2,eplb"
    )
    assert code == 130
    assert sup.started == ["baseline", "tp4_dp2"]  # no later candidate launched, nothing restored
    assert sup.alive == {}
    events = Journal(sweep / "journal.jsonl").events()
    assert not any(isinstance(e, Restoring) for e in events)
    finished = [e for e in events if isinstance(e, SweepFinished)]
    assert [(e.reason, e.validated, e.retained) for e in finished] == [(STOPPED_BY_USER, False, "stopped")]
    # run.retained_after_sweep is `keep` here: the last line names the user's stop, not the setting
    assert messages[-1] == "stopped by the user: nothing gauntlet started for this sweep is running"


def test_rollback_unwinds_the_sweep_which_restores_and_validates(tmp_path: Path) -> None:
    sup = FakeSupervisor()

    def rollback_under_load(name: str, profile: str, repeat: int) -> None:
        if name == "tp4_dp2":
            _ask("rollback", (tmp_path / "latest").resolve())

    code, _, sweep = run_sweep(
        tmp_path, sup, load=FakeLoad(before=rollback_under_load), candidates="tp4_dp2,eplb"
    )
    assert code == 130
    assert sup.started == ["baseline", "tp4_dp2", "baseline"]  # the restore; eplb never launched
    state = Journal(sweep / "journal.jsonl").replay()
    (live,) = state.live.values()
    assert live.role == "retained" and list(sup.alive) == [live.pid]
    assert any(isinstance(e, Validated) for e in Journal(sweep / "journal.jsonl").events())


def test_a_second_request_during_the_unwinding_is_said_and_does_not_cut_the_teardown(tmp_path: Path) -> None:
    """`rollback` unwinds the sweep; `stop` arrives inside the candidate's teardown. A second raise there
    would skip the teardown's end; instead it is said, the server is torn down and journaled, and the
    stop (asked last) decides how the sweep ends."""
    sweep_dir = (tmp_path / "latest").resolve

    @dataclass
    class StopInTeardown(FakeSupervisor):
        asked: int = 0

        def teardown(self, server: Any) -> Any:
            if server.spec.candidate == "tp4_dp2" and not self.asked:
                self.asked += 1
                _ask("stop", sweep_dir())
            return super().teardown(server)

    def rollback_under_load(name: str, profile: str, repeat: int) -> None:
        if name == "tp4_dp2":
            _ask("rollback", sweep_dir())

    sup = StopInTeardown()
    code, messages, sweep = run_sweep(
        tmp_path, sup, load=FakeLoad(before=rollback_under_load), candidates="tp4_dp2,eplb"
    )
    assert code == 130 and sup.asked == 1
    assert any("already unwinding; the teardown goes on" in m for m in messages), messages
    events = Journal(sweep / "journal.jsonl").events()
    started = {e.pid for e in events if isinstance(e, Started)}  # type: ignore[attr-defined]
    assert started == {e.pid for e in events if isinstance(e, TornDown)}  # type: ignore[attr-defined]
    assert sup.started == ["baseline", "tp4_dp2"] and sup.alive == {}  # stopped: nothing restored
    finished = [e for e in events if isinstance(e, SweepFinished)]
    assert [(e.reason, e.retained) for e in finished] == [(STOPPED_BY_USER, "stopped")]


def test_a_stop_during_the_restore_waits_for_it_then_stops_the_restored_server(tmp_path: Path) -> None:
    sup = FakeSupervisor()
    asked: list[bool] = []

    def stop_during_restore(name: str, profile: str, repeat: int) -> None:
        sweep = (tmp_path / "latest").resolve()
        restoring = any(isinstance(e, Restoring) for e in Journal(sweep / "journal.jsonl").events())
        if restoring and not asked:
            asked.append(True)
            _ask("stop", sweep)

    code, messages, sweep = run_sweep(tmp_path, sup, load=FakeLoad(before=stop_during_restore))
    assert asked and code == 0
    assert sup.alive == {}
    assert any("honoured once the restore in progress has ended" in m for m in messages)
    events = Journal(sweep / "journal.jsonl").events()
    finished = [e for e in events if isinstance(e, SweepFinished)]
    assert [(e.reason, e.validated, e.retained) for e in finished] == [(STOPPED_BY_USER, True, "stopped")]


# ---------------------------------------------------------------- the lock and the request


def test_the_lock_names_its_holder_and_waits_with_a_deadline(tmp_path: Path) -> None:
    held = SweepLock.for_port(8300, tmp_path)
    held.acquire(tmp_path / "a")
    other = SweepLock.for_port(8300, tmp_path)
    holder = other.try_acquire(tmp_path / "b", role="stop")
    assert holder is not None and holder.owns(tmp_path / "a") and holder.role == "sweep"
    assert holder.pid == os.getpid()
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    still = other.wait_acquire(
        tmp_path / "a", role="stop", timeout_s=1.0, poll_s=0.25, clock=lambda: now[0], sleep=sleep
    )
    assert still is not None and slept == [0.25] * 4
    held.release()
    assert other.wait_acquire(tmp_path / "a", role="stop", timeout_s=1.0) is None
    again = SweepLock.for_port(8300, tmp_path).try_acquire(tmp_path / "c")
    assert again is not None and again.role == "stop"
    other.release()


@pytest.mark.parametrize(
    ("text", "action"),
    [
        (None, "rollback"),  # no request: the safe reading brings the service back
        ("not json", "rollback"),
        ('{"action": "stop", "sweep_dir": "OTHER", "pid": 7}', "rollback"),  # another sweep's request
        ('{"action": "stop", "sweep_dir": "SWEEP", "pid": 7}', "stop"),
        ('{"action": "rollback", "sweep_dir": "SWEEP", "pid": 7}', "rollback"),
    ],
)
def test_a_request_is_read_for_its_sweep_and_a_rollback_when_unreadable(
    tmp_path: Path, text: str | None, action: str
) -> None:
    lock = tmp_path / "port-1.lock"
    sweep = tmp_path / "s"
    if text is not None:
        text = text.replace("SWEEP", str(sweep.resolve())).replace("OTHER", str(tmp_path / "o"))
        request_file(lock).write_text(text)
    assert read_request(lock, sweep).action == action


def test_a_written_request_round_trips(tmp_path: Path) -> None:
    lock = tmp_path / "port-1.lock"
    written = write_request(lock, "stop", tmp_path / "s")
    assert read_request(lock, tmp_path / "s") == written and written.pid == os.getpid()


# ---------------------------------------------------------------- the copy beside the lock


def test_the_copy_beside_the_lock_mirrors_the_journal_and_puts_a_lost_sweep_back(tmp_path: Path) -> None:
    sweep, base = tmp_path / "sweep", tmp_path / "locks"
    spec = retained_spec_file(sweep)
    spec.parent.mkdir(parents=True)
    spec.write_text('{"fingerprint": "sha256:abc", "candidate": "baseline"}')
    (sweep / "config.yaml").write_text("service: {port: 8400}\n")
    journal = Journal(sweep / "journal.jsonl")
    journal.append(StopRequested(live=0))
    kept = offsite.keep_offsite(journal, sweep, 8400, base=base)
    cand = sweep / "candidates" / "tp4_dp2" / "spec.json"
    cand.parent.mkdir(parents=True)
    cand.write_text("{}")
    journal.append(_started("tp4_dp2", str(cand)))
    assert offsite.find_offsite(sweep, base=base) == kept
    assert offsite.find_offsite(tmp_path / "elsewhere", base=base) is None
    assert not offsite.sweep_dir_gone(sweep)
    shutil.rmtree(sweep)
    assert offsite.sweep_dir_gone(sweep)
    assert offsite.needs_reinstating(sweep)
    assert offsite.reinstate(kept, sweep) == ["config.yaml", "journal.jsonl"]
    assert not offsite.sweep_dir_gone(sweep)
    state = Journal(sweep / "journal.jsonl").replay()
    (live,) = state.live.values()
    assert Path(live.spec_file).read_text() == "{}"  # the server's spec survives in the copy
    assert not Path(live.spec_file).is_relative_to(sweep)


def _started(candidate: str, spec_file: str, pid: int = 4242) -> Started:
    return Started(
        candidate=candidate,
        fingerprint="fp",
        port=8400,
        spec_file=spec_file,
        pid=pid,
        pgid=pid,
        create_time=1.0,
    )


# ---------------------------------------------------------------- status states


def _line(role: Role = "retained", alive: bool = True, healthy: bool = True, pid: int = 10) -> StatusLine:
    live = LiveServer(
        candidate="baseline",
        role=role,
        fingerprint="fp",
        port=1,
        pid=pid,
        pgid=pid,
        create_time=1.0,
    )
    return StatusLine(live, alive, healthy, role == "retained")


STARTED = Started(
    candidate="baseline", role="retained", fingerprint="fp", port=1, pid=10, pgid=10, create_time=1.0
)


@pytest.mark.parametrize(
    ("events", "lines", "running", "word"),
    [
        ([STARTED, Validated(candidate="baseline", pid=10, reason="ok")], [_line()], False, "settled"),
        ([STARTED], [_line()], False, "restored_not_validated"),  # killed during its restore's validation
        ([Validated(candidate="baseline", pid=10, reason="ok"), STARTED], [_line()], False,
         "restored_not_validated"),  # validated an earlier server of the same pid, not this one
        ([STARTED, ValidationFailed(candidate="baseline", pid=10, reason="x")], [_line()], False,
         "validation_failed"),
        ([STARTED, StopFinished(stopped=1)], [], False, "stopped_by_user"),
        ([STARTED, SweepFinished(reason=STOPPED_BY_USER, validated=False, retained="stopped")], [], False,
         "stopped_by_user"),
        ([STARTED, SweepFinished(reason="sweep completed", validated=True, retained="stopped")], [], False,
         "stopped_by_setting"),  # the demo's intended stop
        ([STARTED], [], False, "not_settled"),  # the retained server died
        ([STARTED], [_line(), _line(role="candidate", pid=11)], False, "not_settled"),
        ([STARTED], [_line(healthy=False)], False, "not_settled"),
        ([STARTED], [_line()], True, "running"),
    ],
)  # fmt: skip
def test_status_states(events: list[Event], lines: list[StatusLine], running: bool, word: str) -> None:
    from orchestrator.ledger.journal import replay

    state: JournalState = replay(events)
    assert sweep_state(events, state, lines, running=running) == word


# ---------------------------------------------------------------- evidence


def test_each_rollback_gets_a_new_directory(tmp_path: Path) -> None:
    when = datetime(2026, 12, 4, 9, 30, tzinfo=UTC)
    first = new_rollback_dir(tmp_path, lambda: when)
    first.mkdir(parents=True)
    second = new_rollback_dir(tmp_path, lambda: when)
    assert first.name == "20261204T093000Z" and second.name == "20261204T093000Z-2"
    assert first.parent.name == second.parent.name == "rollbacks"


@pytest.mark.parametrize(
    ("status", "said"),
    [
        (200, None),
        (401, f"{UNAUTHORIZED} (HTTP 401 from /v1/models)"),
        (403, f"{UNAUTHORIZED} (HTTP 403 from /v1/models)"),
        (500, "HTTP 500 from /v1/models"),
    ],
)
def test_a_refused_answer_names_its_cause(status: int, said: str | None) -> None:
    response = httpx.Response(status, request=httpx.Request("GET", "http://h/v1/models"))
    assert refused(response) == said


@pytest.mark.parametrize(
    ("events", "found"),
    [
        ([STARTED, Validated(candidate="baseline", pid=10, reason="ok")], True),
        ([STARTED], False),
        ([Validated(candidate="baseline", pid=10, reason="ok"), STARTED], False),  # before this server
        ([STARTED, Validated(candidate="baseline", pid=11, reason="ok")], False),  # another server
        ([STARTED, Validated(candidate="baseline", pid=10, reason="ok"),
          ValidationFailed(candidate="baseline", pid=10, reason="x")], False),
    ],
)  # fmt: skip
def test_a_rollback_reports_the_sweeps_validation_only_for_the_running_server(
    events: list[Event], found: bool
) -> None:
    assert (validated_since_start(events, 10) is not None) == found


@pytest.mark.parametrize(
    ("holder", "said"),
    [
        (Holder("SWEEP", 42, "rollback"), "another rollback (pid 42) of this sweep is running; wait for it"),
        (Holder("SWEEP", 42, "stop"), "another stop (pid 42) of this sweep is running; wait for it"),
        (Holder("OTHER", 7, "sweep"), "service port 8000 is held by the sweep of OTHER (pid 7), "
                                      "not by SWEEP"),
        (Holder("OTHER", 7, "rollback"), "service port 8000 is held by a `rollback` of OTHER (pid 7), "
                                         "not by SWEEP"),
    ],
)  # fmt: skip
def test_a_port_held_by_another_stop_or_rollback_is_named_for_what_it_is(
    tmp_path: Path, holder: Holder, said: str
) -> None:
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    resolved = Holder(
        str(sweep.resolve()) if holder.sweep_dir == "SWEEP" else holder.sweep_dir, holder.pid, holder.role
    )
    error = port_refusal(8000, resolved, sweep, "rollback")
    assert error.message == said.replace("SWEEP", str(sweep)).replace("OTHER", resolved.sweep_dir)
    assert error.exit_code == 4


def test_a_second_rollback_of_a_sweep_is_told_to_wait_for_the_first(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    first = SweepLock.for_port(8000)
    assert first.try_acquire(sweep, role="rollback") is None  # a rollback of this sweep holds the port
    try:
        with pytest.raises(SweepLockedError) as info, acting_on(sweep, 8000, "rollback", None, wait_s=0):  # type: ignore[arg-type]
            pass
    finally:
        first.release()
    assert info.value.message == f"another rollback (pid {os.getpid()}) of this sweep is running; wait for it"

"""The journal: typed events, written as flat JSON lines; replaying them says what may still run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contracts.errors import JournalError
from orchestrator.ledger.events import (
    Launching,
    LoadFinished,
    RetainedRecorded,
    Started,
    SweepFinished,
    SweepStarted,
    TornDown,
    UnknownEvent,
    parse_event,
)
from orchestrator.ledger.journal import Journal, replay


def started(pid: int, role: str = "candidate", fp: str = "sha256:c") -> dict[str, Any]:
    """A ``started`` line as the previous version wrote it (no spec_file or log_path in old tests)."""
    return {
        "at": "t",
        "event": "started",
        "candidate": f"c{pid}",
        "role": role,
        "fingerprint": fp,
        "pid": pid,
        "pgid": pid,
        "create_time": 1.0,
        "port": 8000,
    }


def gone(event: str, pid: int, fp: str = "sha256:c") -> dict[str, Any]:
    return {"at": "t", "event": event, "candidate": f"c{pid}", "pid": pid, "fingerprint": fp}


def launching(fp: str) -> dict[str, Any]:
    return {"at": "t", "event": "launching", "candidate": "x", "fingerprint": fp, "port": 1}


@pytest.mark.parametrize(
    ("lines", "live", "pending"),
    [
        ([], [], 0),
        ([started(1)], [1], 0),
        ([started(1), gone("torn_down", 1)], [], 0),
        ([started(1), started(2, "retained")], [1, 2], 0),
        ([started(1), {**gone("startup_failed", 1), "kind": "bad-args"}], [], 0),
        ([started(1), gone("vanished", 1)], [], 0),
        ([launching("sha256:x")], [], 1),
        ([launching("sha256:c"), started(3)], [3], 0),
        ([launching("sha256:c"), {**gone("vanished", 0), "pid": None}], [], 0),
    ],
)
def test_replay_table(lines: list[dict[str, Any]], live: list[int], pending: int) -> None:
    state = replay([parse_event(line) for line in lines])
    assert sorted(state.live) == live
    assert len(state.pending) == pending


def test_append_is_durable_and_replayable(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl", clock=lambda: "2026-12-02T00:00:00Z")
    journal.append(RetainedRecorded(candidate="baseline", fingerprint="sha256:b", spec_file="s.json"))
    journal.append(parse_event(started(7, "retained", "sha256:b")))
    state = journal.replay()
    assert state.retained_fingerprint == "sha256:b"
    assert [s.pid for s in state.retained_live] == [7]
    assert state.retained_live[0].at == "2026-12-02T00:00:00Z"
    assert state.events == 2


@pytest.mark.parametrize(
    ("event", "line"),
    [
        (
            RetainedRecorded(candidate="baseline", fingerprint="sha256:b", spec_file="r/spec.json"),
            {"candidate": "baseline", "event": "retained_recorded", "fingerprint": "sha256:b",
             "spec_file": "r/spec.json"},
        ),
        (
            LoadFinished(candidate="tp4", profile="serial", repeat=2, events=0),
            {"candidate": "tp4", "event": "load_finished", "events": 0, "profile": "serial", "repeat": 2},
        ),
        (
            TornDown(candidate="tp4", pid=5, fingerprint="sha256:t", survivors=[], port_free=True),
            {"candidate": "tp4", "event": "torn_down", "fingerprint": "sha256:t", "pid": 5,
             "port_free": True, "survivors": []},
        ),
        (
            SweepStarted(phase="begin", resumed=True),
            {"event": "sweep_started", "phase": "begin", "resumed": True},
        ),
    ],
)  # fmt: skip
def test_events_are_written_as_the_flat_lines_earlier_versions_wrote(
    tmp_path: Path, event: Any, line: dict[str, Any]
) -> None:
    journal = Journal(tmp_path / "j.jsonl", clock=lambda: "T")
    journal.append(event)
    written = json.loads((tmp_path / "j.jsonl").read_text())
    assert written == {"at": "T", **line}
    assert journal.events() == [event.model_copy(update={"at": "T"})]


def test_a_journal_of_the_previous_version_replays(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    spec = {
        "candidate": "baseline",
        "role": "retained",
        "fingerprint": "sha256:b",
        "spec_file": "r/spec.json",
    }
    old = [
        {"at": "a", "event": "sweep_started", "phase": "begin", "resumed": False},
        {"at": "b", "event": "retained_recorded", "candidate": "baseline", "fingerprint": "sha256:b",
         "spec_file": "r/spec.json"},
        {"at": "c", "event": "launching", **spec, "port": 8000, "at_epoch": 1.5},
        {"at": "d", "event": "started", **spec, "pid": 9, "pgid": 9, "create_time": 2.0, "port": 8000,
         "log_path": "recovery/server.log"},
        {"at": "e", "event": "load_finished", "candidate": "baseline", "profile": "decode_heavy", "repeat": 1,
         "events": 0, "error": None},
        {"at": "f", "event": "sweep_finished", "reason": "sweep completed", "validated": True},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in old))
    events = Journal(path).events()
    assert [e.name for e in events] == [line["event"] for line in old]
    assert isinstance(events[-1], SweepFinished) and events[-1].retained is None
    state = replay(events)
    (live,) = state.live.values()
    assert isinstance(live, Started) and (live.pid, live.role, live.at) == (9, "retained", "d")
    assert state.finished and state.retained_spec_file == "r/spec.json"


def test_an_unknown_kind_is_kept_and_a_broken_known_one_is_an_error() -> None:
    unknown = parse_event({"at": "t", "event": "from_the_future", "x": 1})
    assert isinstance(unknown, UnknownEvent) and unknown.name == "from_the_future"
    assert replay([unknown]).last_event == "from_the_future"
    with pytest.raises(JournalError, match=r"j.jsonl:3: a 'started' entry that is not one \(pid: "):
        parse_event({**started(1), "pid": "one"}, where="j.jsonl:3")


def test_a_torn_last_line_is_ignored_but_a_corrupt_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal = Journal(path)
    journal.append(SweepStarted())
    with path.open("a") as handle:
        handle.write('{"event": "start')  # the orchestrator was killed mid-write
    assert journal.replay().events == 1
    with path.open("a") as handle:
        handle.write('\n{"at": "t", "event": "sweep_finished", "reason": "r", "validated": true}\n')
    with pytest.raises(JournalError, match=r"j.jsonl:2: not JSON"):
        journal.replay()


def test_an_append_after_a_torn_line_sets_the_fragment_aside_and_both_events_stand(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal = Journal(path)
    journal.append(SweepStarted())
    with path.open("a") as handle:
        handle.write('{"event": "start')  # the orchestrator was killed mid-write
    journal.append(SweepFinished(reason="rollback", validated=True))
    journal.append(SweepStarted(phase="again"))
    assert [e.name for e in journal.events()] == ["sweep_started", "sweep_finished", "sweep_started"]
    assert journal.torn_path.read_text() == '{"event": "start\n'


def test_files_recorded_relative_to_another_directory_are_found_under_the_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep run from its checkout records ``sweeps/X/...``; stop or rollback may run from anywhere."""
    sweep = tmp_path / "checkout" / "sweeps" / "20261203-034329"
    (sweep / "retained").mkdir(parents=True)
    (sweep / "retained" / "spec.json").write_text("{}")
    journal = Journal(sweep / "journal.jsonl")
    journal.append(
        RetainedRecorded(
            candidate="baseline",
            fingerprint="sha256:x",
            spec_file="sweeps/20261203-034329/retained/spec.json",
        )
    )
    journal.append(
        Launching(candidate="baseline", fingerprint="sha256:x", port=8000, spec_file="elsewhere/spec.json")
    )
    monkeypatch.chdir(tmp_path)
    state = journal.replay()
    assert state.retained_spec_file == str(sweep / "retained" / "spec.json")
    assert state.pending[0].spec_file == "elsewhere/spec.json"  # not under the sweep: left as recorded
    monkeypatch.chdir(tmp_path / "checkout")
    assert journal.replay().retained_spec_file == "sweeps/20261203-034329/retained/spec.json"

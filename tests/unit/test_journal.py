"""The journal: replaying it says what may still run and what the retained configuration is."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.errors import JournalError
from orchestrator.journal import Journal, replay


def started(pid: int, role: str = "candidate", fp: str = "sha256:c") -> dict[str, object]:
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


@pytest.mark.parametrize(
    ("events", "live", "pending"),
    [
        ([], [], 0),
        ([started(1)], [1], 0),
        ([started(1), {"at": "t", "event": "torn_down", "pid": 1}], [], 0),
        ([started(1), started(2, "retained")], [1, 2], 0),
        ([started(1), {"at": "t", "event": "startup_failed", "pid": 1, "fingerprint": "sha256:c"}], [], 0),
        (
            [{"at": "t", "event": "launching", "candidate": "x", "fingerprint": "sha256:x", "port": 1}],
            [],
            1,
        ),
        (
            [
                {"at": "t", "event": "launching", "candidate": "x", "fingerprint": "sha256:c", "port": 1},
                started(3),
            ],
            [3],
            0,
        ),
    ],
)
def test_replay_table(events: list[dict[str, object]], live: list[int], pending: int) -> None:
    state = replay(events)  # type: ignore[arg-type]
    assert sorted(state.live) == live
    assert len(state.pending) == pending


def test_append_is_durable_and_replayable(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl", clock=lambda: "2026-12-02T00:00:00Z")
    journal.append("retained_recorded", candidate="baseline", fingerprint="sha256:b", spec_file="s.json")
    journal.append(
        "started", **{k: v for k, v in started(7, "retained", "sha256:b").items() if k not in ("at", "event")}
    )
    state = journal.replay()
    assert state.retained_fingerprint == "sha256:b"
    assert [s.pid for s in state.retained_live] == [7]
    assert state.events == 2


def test_a_torn_last_line_is_ignored_but_a_corrupt_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal = Journal(path)
    journal.append("sweep_started")
    with path.open("a") as handle:
        handle.write('{"event": "start')  # the orchestrator was killed mid-write
    assert journal.replay().events == 1
    with path.open("a") as handle:
        handle.write('\n{"at": "t", "event": "sweep_finished"}\n')
    with pytest.raises(JournalError, match=r"j.jsonl:2: not JSON"):
        journal.replay()

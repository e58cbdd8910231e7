"""The journal: an append-only record of every server gauntlet starts or stops, written before it happens.

Pipeline position: beside every stage of a sweep. Each line is appended, flushed and fsync'ed *before*
the state change it announces (``launching`` before the spawn; ``started`` with pid, process group and
create time right after it), so after any crash of the orchestrator, SIGKILL included, replaying the file
says exactly what may still be running and what the retained configuration is. ``rollback`` and
``status`` read nothing else.

Example::

    journal = Journal(sweep_dir / "journal.jsonl")
    journal.append("launching", candidate="tp4_dp2", fingerprint=spec.fingerprint, port=8000)
    state = journal.replay()        # JournalState: live servers, the retained spec, last event
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from contracts.errors import JournalError

#: Events that mean a server process may now exist (it carries pid, pgid and create_time).
STARTED = "started"
#: Events after which a server recorded by pid is known to be gone.
GONE = frozenset({"torn_down", "startup_failed", "vanished"})
ROLES = ("baseline", "candidate", "retained")


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class LiveServer:
    """A server the journal says gauntlet started and has not seen stopped."""

    candidate: str
    role: str  # baseline (measured), candidate, retained (the live service)
    fingerprint: str
    pid: int
    pgid: int
    create_time: float
    port: int
    spec_file: str
    log_path: str
    since: str = ""  # when the journal recorded it (filled on replay)


@dataclass(frozen=True)
class Launching:
    """A spawn that was announced but whose pid was never recorded (crash between the two lines)."""

    candidate: str
    role: str
    fingerprint: str
    port: int
    spec_file: str
    at: str
    at_epoch: float


@dataclass
class JournalState:
    """What replaying the journal says."""

    live: dict[int, LiveServer] = field(default_factory=dict)
    pending: list[Launching] = field(default_factory=list)
    retained_spec_file: str | None = None
    retained_fingerprint: str | None = None
    last_event: str | None = None
    events: int = 0
    finished: bool = False
    phase: str | None = None

    @property
    def retained_live(self) -> list[LiveServer]:
        return [s for s in self.live.values() if s.role == "retained"]


class Journal:
    """Append-only JSON-lines file; each append is durable before it returns."""

    def __init__(self, path: Path, *, clock: Callable[[], str] = utc_now) -> None:
        self.path = path
        self._clock = clock

    def append(self, event: str, **data: Any) -> dict[str, Any]:
        entry: dict[str, Any] = {"at": self._clock(), "event": event, **data}
        line = json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return entry

    def append_server(self, event: str, server: LiveServer, **extra: Any) -> dict[str, Any]:
        """Record a server process (``started``, ``adopted``) in the form :func:`replay` reads back."""
        fields = {k: v for k, v in asdict(server).items() if k != "since"}
        return self.append(event, **fields, **extra)

    def entries(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out: list[dict[str, Any]] = []
        lines = self.path.read_text().splitlines()
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as exc:
                if number == len(lines):
                    break  # a torn last line from a crash mid-write: everything before it stands
                raise JournalError(f"{self.path}:{number}: not JSON ({exc})") from exc
            if not isinstance(entry, dict) or "event" not in entry:
                raise JournalError(f"{self.path}:{number}: not a journal entry")
            out.append(entry)
        return out

    def replay(self) -> JournalState:
        return replay(self.entries())


def replay(entries: list[dict[str, Any]]) -> JournalState:
    """Fold journal entries into the state they describe (pure)."""
    state = JournalState()
    for entry in entries:
        event = entry["event"]
        state.events += 1
        state.last_event = event
        if event == "retained_recorded":
            state.retained_spec_file = entry["spec_file"]
            state.retained_fingerprint = entry["fingerprint"]
        elif event == "launching":
            state.pending.append(
                Launching(
                    candidate=entry["candidate"],
                    role=entry.get("role", "candidate"),
                    fingerprint=entry["fingerprint"],
                    port=int(entry["port"]),
                    spec_file=entry.get("spec_file", ""),
                    at=entry["at"],
                    at_epoch=float(entry.get("at_epoch", 0.0)),
                )
            )
        elif event in (STARTED, "adopted"):
            state.pending = [p for p in state.pending if p.fingerprint != entry["fingerprint"]]
            server = LiveServer(
                candidate=entry["candidate"],
                role=entry.get("role", "candidate"),
                fingerprint=entry["fingerprint"],
                pid=int(entry["pid"]),
                pgid=int(entry["pgid"]),
                create_time=float(entry["create_time"]),
                port=int(entry["port"]),
                spec_file=entry.get("spec_file", ""),
                log_path=entry.get("log_path", ""),
                since=entry["at"],
            )
            state.live[server.pid] = server
        elif event in GONE:
            pid = entry.get("pid")
            if pid is not None:
                state.live.pop(int(pid), None)
            fingerprint = entry.get("fingerprint")
            state.pending = [p for p in state.pending if p.fingerprint != fingerprint]
        elif event == "sweep_started":
            state.finished = False
        elif event == "sweep_finished":
            state.finished = True
        if "phase" in entry:
            state.phase = entry["phase"]
    return state

"""The journal: an append-only record of every server gauntlet starts or stops, written before it happens.

Pipeline position: beside every stage of a sweep. Each line is a typed event
(:mod:`orchestrator.ledger.events`)
appended, flushed and fsync'ed *before* the state change it announces (``launching`` before the spawn;
``started`` with pid, process group and create time right after it), so after any crash of the
orchestrator, SIGKILL included, replaying the file says exactly what may still be running and what the
retained configuration is. ``rollback``, ``stop`` and ``status`` read nothing else.

A sweep whose candidates run as jobs of a Hydra launcher in other processes or on other machines has one
journal per job (``journals/<node>-<job>.jsonl``, each line naming its node and job): appends from many
hosts never share a file (``O_APPEND`` is not atomic on NFS). Replaying a journal gives *its node's* view:
its own lines and those of the sweep's job journals written on the same node; :meth:`Journal.remote_jobs`
lists the jobs of other nodes, which are cancelled through their scheduler, never signalled by pid.

Example::

    journal = Journal(journal_file(sweep_dir))
    journal.append(Launching(candidate="tp4_dp2", fingerprint=spec.fingerprint, port=8000))
    state = journal.replay()        # JournalState: live servers, the retained spec, last event
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from contracts.errors import JournalError, SweepDirError
from contracts.layout import JOURNALS_DIR, journal_file, journals_dir
from orchestrator.ledger.events import (
    Adopted,
    Event,
    JobFinished,
    JobStarted,
    Launching,
    LiveServer,
    Promoted,
    PromotionFailed,
    PromotionStarted,
    Ready,
    RetainedRecorded,
    RollbackRequested,
    Started,
    StartupFailed,
    SweepFinished,
    SweepStarted,
    TornDown,
    Vanished,
    parse_event,
)
from orchestrator.ledger.nodes import Place

E = TypeVar("E", bound=Event)

#: Event fields that name a file in the sweep directory.
_FILE_FIELDS = ("spec_file", "log_path", "candidate_file")


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass
class JournalState:
    """What replaying the journal says."""

    live: dict[int, LiveServer] = field(default_factory=dict)  # by pid: started or adopted, not yet gone
    pending: list[Launching] = field(default_factory=list)  # announced spawns whose pid was never recorded
    retained_spec_file: str | None = None
    retained_fingerprint: str | None = None
    #: The retained configuration's candidate name, and its candidate file when a promotion made it the
    #: retained one (None: the sweep's configured baseline, recorded when it began).
    retained_candidate: str | None = None
    retained_candidate_file: str | None = None
    #: A promotion begun and not ended (interrupted: ``rollback`` restores the retained configuration).
    promoting: PromotionStarted | None = None
    last_event: str | None = None
    events: int = 0
    finished: bool = False

    @property
    def retained_live(self) -> list[LiveServer]:
        return [s for s in self.live.values() if s.role == "retained"]


@dataclass(frozen=True)
class RemoteJob:
    """A job of this sweep that ran on another node, and the servers its journal says may still run."""

    node: str
    job: str
    executor: str | None
    journal: Path
    live: list[LiveServer]
    finished: bool


class Journal:
    """Append-only JSON-lines file; each append is durable before it returns."""

    def __init__(self, path: Path, *, clock: Callable[[], str] = utc_now, place: Place | None = None) -> None:
        self.path = path
        self._clock = clock
        self.place = place
        #: (device, inode) of the file this object last appended to: a journal deleted under a running
        #: sweep (its sweep directory removed) is noticed, never silently started again from nothing.
        self._identity: tuple[int, int] | None = None
        #: Called with each stamped event before it is written here: the copy kept outside the sweep
        #: directory (:mod:`orchestrator.ledger.offsite`), so a lost sweep directory strands nothing.
        self.mirror: Callable[[Event], None] | None = None

    @classmethod
    def of_sweep(cls, sweep_dir: Path, place: Place | None = None) -> Journal:
        """The journal a process at ``place`` writes in ``sweep_dir`` (a job's own, or the main one)."""
        if place is not None and place.is_job:
            return cls(journals_dir(sweep_dir) / place.journal_name(), place=place)
        return cls(journal_file(sweep_dir), place=place)

    def append(self, event: E) -> E:
        """Write ``event`` stamped with the current time, fsync'ed; returns the stamped event."""
        stamp: dict[str, object] = {"at": self._clock()}
        if self.place is not None:
            stamp.update(node=self.place.node, job=self.place.job)
        stamped = event.model_copy(update=stamp)
        line = json.dumps(stamped.to_line(), sort_keys=True, separators=(",", ":")) + "\n"
        if self._identity is not None:
            self._check_still_there()
        if self.mirror is not None:
            self.mirror(stamped)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            info = os.fstat(fd)
            self._identity = (info.st_dev, info.st_ino)
            self._set_aside_torn_tail(fd)
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return stamped

    def _check_still_there(self) -> None:
        """The journal this object appended to is still the file at its path (not deleted, not replaced)."""
        try:
            info = self.path.stat()
            same = (info.st_dev, info.st_ino) == self._identity
        except FileNotFoundError:
            same = False
        if not same:
            sweep = self.path.parent
            raise SweepDirError(
                f"cannot write the sweep directory {sweep}: it was deleted ({self.path} is gone); "
                "the sweep stops here",
                hint="the copy beside the port's lock keeps what rollback needs: `python -m orchestrator "
                f"status {sweep}` says what runs, `rollback {sweep}` puts the directory back; keep "
                "run.sweeps_dir where nothing cleans it up",
            )

    def events(self) -> list[Event]:
        """Every event written so far, typed; a torn last line (a crash mid-write) is ignored."""
        if not self.path.exists():
            return []
        out: list[Event] = []
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
            if not isinstance(entry, dict):
                raise JournalError(f"{self.path}:{number}: not a journal entry")
            out.append(self._located(parse_event(entry, where=f"{self.path}:{number}")))
        return out

    @property
    def torn_path(self) -> Path:
        """Where a torn last line (a crash mid-write) is kept once the next append sets it aside."""
        return self.path.with_name(self.path.name + ".torn")

    def _set_aside_torn_tail(self, fd: int) -> None:
        """A crash mid-write leaves a last line without its newline; an append glued to it would make
        both unreadable (and, once more lines follow, the journal corrupt in the middle). Move the
        fragment to :attr:`torn_path` and cut the journal back to its last whole line first."""
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return
        data = os.pread(fd, size, 0)
        keep = data.rfind(b"\n") + 1
        with self.torn_path.open("ab") as torn:
            torn.write(data[keep:] + b"\n")
        os.ftruncate(fd, keep)
        os.fsync(fd)

    def locate(self, recorded: str) -> str:
        """A file the journal names, as a path that works from here.

        A sweep records files as it named them (relative to its own working directory); ``rollback``,
        ``stop`` and ``status`` may run from elsewhere, so a relative path that does not exist here is
        looked up under this journal's sweep directory, by the part after the sweep directory's name.
        """
        path = Path(recorded)
        if not recorded or path.is_absolute() or path.exists():
            return recorded
        sweep = self.path.parent
        parts = path.parts
        if sweep.name in parts:
            last = len(parts) - 1 - parts[::-1].index(sweep.name)
            moved = sweep.joinpath(*parts[last + 1 :])
            if moved.exists():
                return str(moved)
        return recorded

    def _located(self, event: E) -> E:
        update = {
            name: self.locate(value)
            for name in _FILE_FIELDS
            if isinstance(value := getattr(event, name, None), str) and value
        }
        return event.model_copy(update=update) if update else event

    def replay(self) -> JournalState:
        """This node's view: this file, plus the sweep's job journals written on the same node."""
        return replay(self.node_events())

    def _job_journals(self) -> list[Journal]:
        folder = journals_dir(self.path.parent)
        if self.path.parent.name == JOURNALS_DIR or not folder.is_dir():
            return []
        return [Journal(path) for path in sorted(folder.glob("*.jsonl"))]

    def node_events(self) -> list[Event]:
        """This file's events and those of job journals on this node, in the order they were written."""
        own = self.events()
        node = self.place.node if self.place is not None else None
        if node is None:
            return own
        others = [e for j in self._job_journals() for e in j.events() if e.node == node]
        if not others:
            return own
        return sorted([*own, *others], key=lambda e: e.at)  # stable: ties keep each file's order

    def remote_jobs(self) -> list[RemoteJob]:
        """Jobs of this sweep whose journals were written on other nodes than this journal's."""
        node = self.place.node if self.place is not None else None
        out: list[RemoteJob] = []
        for journal in self._job_journals():
            events = journal.events()
            first = next((e for e in events if e.node is not None), None)
            if first is None or first.node == node or first.job is None:
                continue
            state = replay(events)
            out.append(
                RemoteJob(
                    node=first.node or "?",
                    job=first.job,
                    executor=_executor_of(events),
                    journal=journal.path,
                    live=list(state.live.values()),
                    finished=state.finished,
                )
            )
        return out


def _executor_of(events: Iterable[Event]) -> str | None:
    for event in events:
        if isinstance(event, JobStarted):
            return event.executor
    return None


def replay(events: Iterable[Event]) -> JournalState:
    """Fold journal events into the state they describe (pure)."""
    state = JournalState()
    for event in events:
        state.events += 1
        state.last_event = event.name
        match event:
            case RetainedRecorded():
                state.retained_spec_file = event.spec_file
                state.retained_fingerprint = event.fingerprint
                state.retained_candidate, state.retained_candidate_file = event.candidate, None
            case PromotionStarted():
                state.promoting = event
            case Promoted():
                state.retained_spec_file = event.spec_file
                state.retained_fingerprint = event.fingerprint
                state.retained_candidate = event.candidate
                state.retained_candidate_file = event.candidate_file
                state.promoting = None
            case PromotionFailed() | RollbackRequested():  # a rollback abandons an unfinished promotion
                state.promoting = None
            case Launching():
                state.pending.append(event)
            case Started() | Adopted():
                state.pending = [p for p in state.pending if p.fingerprint != event.fingerprint]
                state.live[event.pid] = event
            case Ready() if event.followers and event.pid in state.live:  # located on their nodes
                state.live[event.pid] = state.live[event.pid].model_copy(
                    update={"followers": event.followers}
                )
            case TornDown() | StartupFailed() | Vanished():
                if event.pid is not None:
                    state.live.pop(event.pid, None)
                state.pending = [p for p in state.pending if p.fingerprint != event.fingerprint]
            case SweepStarted() | JobStarted():
                state.finished = False
            case SweepFinished() | JobFinished():
                state.finished = True
    return state

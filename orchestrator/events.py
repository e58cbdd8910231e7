"""Journal events: one small typed record per kind of state change a sweep announces.

Pipeline position: the vocabulary of :mod:`orchestrator.journal`. Every line of ``journal.jsonl`` is one
of these events as flat JSON (``{"at": ..., "event": "started", "candidate": ..., "pid": ...}``), the same
lines earlier versions wrote, so their journals still replay. Writers build an event
(``Started(candidate=..., pid=...)``) and :meth:`Journal.append` stamps ``at``; readers get the events back
typed (:func:`parse_event`). A kind this version does not know is kept as :class:`UnknownEvent`, so a
rollback never fails on a journal a newer gauntlet wrote.

The life of one server::

    launching ─▶ started ─▶ ready ─▶ load_started/load_finished ... ─▶ tearing_down ─▶ torn_down
             └─▶ (crash before the pid was recorded: the next run finds it by argv and start time)
    started ─▶ startup_failed          the server never became ready (the supervisor tore it down)
    adopted                            a server an earlier run left, now in this process's hands
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from contracts.errors import JournalError

#: Who a server is to the sweep: the baseline being measured, a candidate, or the retained (live) service.
Role = Literal["baseline", "candidate", "retained"]


class Event(BaseModel):
    """One journal line; subclasses name their kind in ``event``."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    event: ClassVar[str] = ""
    at: str = ""  # ISO 8601 UTC, stamped by Journal.append when the line is written

    @property
    def name(self) -> str:
        """The kind as written in the ``event`` field."""
        return self.event

    def to_line(self) -> dict[str, Any]:
        """The flat JSON object written to the journal (fields without a value are left out)."""
        return {"event": self.name, **self.model_dump(mode="json", exclude_none=True)}


class UnknownEvent(Event):
    """A line of a kind this version does not know (kept, counted, otherwise ignored)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    kind_written: str

    @property
    def name(self) -> str:
        return self.kind_written


# ---------------------------------------------------------------------------------------------- the sweep


class SweepStarted(Event):
    """A sweep opened (or re-opened to resume) its directory."""

    event = "sweep_started"
    phase: str = "begin"
    resumed: bool = False


class RetainedRecorded(Event):
    """The retained configuration's spec was recorded; restores are checked against this fingerprint."""

    event = "retained_recorded"
    candidate: str
    fingerprint: str
    spec_file: str


class SkippedComplete(Event):
    """A candidate's results are complete on disk: resume does not measure it again."""

    event = "skipped_complete"
    candidate: str


class DiscardingPartial(Event):
    """A candidate's incomplete results are deleted before it is measured again."""

    event = "discarding_partial"
    candidate: str


class SweepFinished(Event):
    """The sweep closed: restored (``validated`` says whether cleanly), and what became of the server."""

    event = "sweep_finished"
    reason: str
    validated: bool
    retained: Literal["kept", "stopped"] | None = None  # absent in journals of earlier versions


# ---------------------------------------------------------------------------------------------- a server


class Launching(Event):
    """A spawn is about to happen (written before it, so a crash in between is still found)."""

    event = "launching"
    candidate: str
    role: Role = "candidate"
    fingerprint: str
    port: int
    spec_file: str = ""
    at_epoch: float = 0.0  # time.time() just before the spawn: no process started earlier is ours


class LiveServer(Event):
    """A server process gauntlet is responsible for: enough to find it again and prove it is the same."""

    candidate: str
    role: Role = "candidate"
    fingerprint: str
    pid: int
    pgid: int
    create_time: float  # the process's start time: a pid whose start time differs is somebody else's
    port: int
    spec_file: str = ""
    log_path: str = ""

    def adopted(self, *, source: str, role: Role | None = None) -> Adopted:
        """This server as now adopted by another run (``source`` says where it was found)."""
        fields = self.model_dump(include=set(LiveServer.model_fields) - {"at"})
        return Adopted(**{**fields, "role": role or self.role}, source=source)


class Started(LiveServer):
    """The spawn happened: pid, process group and start time, written right after it."""

    event = "started"


class Adopted(LiveServer):
    """A server an earlier run started (or left unrecorded) is now in this process's hands."""

    event = "adopted"
    source: str = ""  # where it was found: a previous sweep's directory, or "unrecorded launch"


class Ready(Event):
    """The server answers /health and lists the model."""

    event = "ready"
    candidate: str
    pid: int
    ready_s: float


class StartupFailed(Event):
    """The server never became ready (classified); the supervisor has torn it down."""

    event = "startup_failed"
    candidate: str
    pid: int
    fingerprint: str
    kind: str
    matched_line: str | None = None


class TearingDown(Event):
    """A teardown is about to start."""

    event = "tearing_down"
    candidate: str
    pid: int
    role: Role = "candidate"


class TornDown(Event):
    """The server is gone (``survivors`` empty and ``port_free`` true, or the teardown raised)."""

    event = "torn_down"
    candidate: str
    pid: int
    fingerprint: str
    survivors: list[int] | None = None
    port_free: bool | None = None
    by: str | None = None  # written into a previous sweep's journal by the sweep that stopped its server


class Vanished(Event):
    """A server (or an announced launch) the journal knew of is not running any more."""

    event = "vanished"
    candidate: str
    fingerprint: str
    pid: int | None = None


class LoadStarted(Event):
    """A profile starts against a live server."""

    event = "load_started"
    candidate: str
    profile: str
    repeat: int


class LoadFinished(Event):
    """A profile ended; ``error`` says why it could not complete."""

    event = "load_finished"
    candidate: str
    profile: str
    repeat: int
    events: int  # watch events seen while it ran
    error: str | None = None


# ---------------------------------------------------------------------------------------------- restore


class Restoring(Event):
    """The retained configuration is about to be relaunched from its recorded spec."""

    event = "restoring"
    candidate: str
    fingerprint: str
    reason: str


class Restored(Event):
    """The retained configuration is ready again."""

    event = "restored"
    candidate: str
    pid: int
    fingerprint: str


class Validated(Event):
    """The recovery validation passed."""

    event = "validated"
    candidate: str
    pid: int
    reason: str


class ValidationFailed(Event):
    """The recovery validation failed, or the retained configuration did not start."""

    event = "validation_failed"
    candidate: str
    reason: str
    pid: int | None = None


class RollbackRequested(Event):
    """``python -m orchestrator rollback`` started on this sweep."""

    event = "rollback_requested"
    live: int  # servers the journal said were running


class StopRequested(Event):
    """``python -m orchestrator stop`` started on this sweep."""

    event = "stop_requested"
    live: int


class StopFinished(Event):
    """``stop`` ended: how many servers it stopped (0 when nothing was running)."""

    event = "stop_finished"
    stopped: int


#: Every kind this version writes, by the name in the ``event`` field.
EVENT_TYPES: dict[str, type[Event]] = {
    cls.event: cls
    for cls in (
        SweepStarted,
        RetainedRecorded,
        SkippedComplete,
        DiscardingPartial,
        SweepFinished,
        Launching,
        Started,
        Adopted,
        Ready,
        StartupFailed,
        TearingDown,
        TornDown,
        Vanished,
        LoadStarted,
        LoadFinished,
        Restoring,
        Restored,
        Validated,
        ValidationFailed,
        RollbackRequested,
        StopRequested,
        StopFinished,
    )
}


def parse_event(entry: dict[str, Any], *, where: str = "<journal>") -> Event:
    """One journal line (already JSON-decoded) as its typed event; ``where`` names it in errors."""
    data = dict(entry)
    kind = data.pop("event", None)
    if not isinstance(kind, str):
        raise JournalError(f"{where}: not a journal entry (no 'event' field)")
    cls = EVENT_TYPES.get(kind)
    try:
        if cls is None:
            return UnknownEvent(kind_written=kind, **data)
        return cls.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()[:5]
        )
        raise JournalError(
            f"{where}: a {kind!r} entry that is not one ({problems})",
            hint="the journal was edited by hand or truncated; `python -m orchestrator status` shows what "
            "runs",
        ) from exc

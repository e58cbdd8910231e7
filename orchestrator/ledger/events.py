"""Journal events: one small typed record per kind of state change a sweep announces.

Pipeline position: the vocabulary of :mod:`orchestrator.ledger.journal`. Every line of ``journal.jsonl`` is
one
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

A promotion (``promote``, or ``run.promote_keep`` at a sweep's end)::

    promotion_started ─▶ (the live service stopped) launching ... ready ─▶ validated ─▶ promoted
                     └─▶ promotion_failed ─▶ restoring ... (the previous retained configuration)
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from contracts.errors import JournalError
from launch.follower import NodeProcess

#: Who a server is to the sweep: the baseline being measured, a candidate, or the retained (live) service.
Role = Literal["baseline", "candidate", "retained"]


class Event(BaseModel):
    """One journal line; subclasses name their kind in ``event``."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    event: ClassVar[str] = ""
    at: str = ""  # ISO 8601 UTC, stamped by Journal.append when the line is written
    node: str | None = None  # the writer's node (orchestrator.ledger.nodes), stamped by Journal.append
    job: str | None = None  # the writer's scheduler job, when a launcher ran it as a job

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


class _Candidate(Event):
    """An event about one candidate (or the retained configuration, by its candidate name)."""

    candidate: str


class _Process(_Candidate):
    """An event about one server process of a candidate."""

    pid: int


class _Profile(_Candidate):
    """An event about one repeat of one load profile."""

    profile: str
    repeat: int


# ---------------------------------------------------------------------------------------------- the sweep


class SweepStarted(Event):
    """A sweep opened (or re-opened to resume) its directory."""

    event = "sweep_started"
    phase: str = "begin"
    resumed: bool = False


class RetainedRecorded(_Candidate):
    """The retained configuration's spec was recorded; restores are checked against this fingerprint."""

    event = "retained_recorded"
    fingerprint: str
    spec_file: str


class SkippedComplete(_Candidate):
    """A candidate's results are complete on disk: resume does not measure it again."""

    event = "skipped_complete"


class DiscardingPartial(_Candidate):
    """A candidate's incomplete results are deleted before it is measured again."""

    event = "discarding_partial"


class RepeatLooked(_Candidate):
    """Adaptive repeats: the gates judged a candidate after ``repeats`` repeats (gates.sequential)."""

    event = "repeat_looked"
    repeats: int
    decision: str


class RepeatsSettled(_Candidate):
    """Adaptive repeats: a candidate's measuring ended after ``repeats`` repeats (settled or at the most)."""

    event = "repeats_settled"
    repeats: int
    decision: str | None = None  # the last look's decision; None when no look was taken


class SweepFinished(Event):
    """The sweep closed: restored (``validated`` says whether cleanly), and what became of the server."""

    event = "sweep_finished"
    reason: str
    validated: bool
    retained: Literal["kept", "stopped"] | None = None  # absent in journals of earlier versions


class JobStarted(_Candidate):
    """A Hydra job of a launcher (its own process, maybe another node) starts measuring its candidate."""

    event = "job_started"
    executor: str | None = None  # submitit's executor ("slurm", "local"): what can cancel the job
    port: int | None = None  # the port its servers use on its node


class JobFinished(_Candidate):
    """A job ended: measured, skipped, interrupted (a scheduler's signal) or failed."""

    event = "job_finished"
    outcome: str


# ---------------------------------------------------------------------------------------------- a server


class _Launch(_Candidate):
    """What identifies a launch before its process exists: the spec, its fingerprint, the port."""

    role: Role = "candidate"
    fingerprint: str
    port: int
    spec_file: str = ""


class Launching(_Launch):
    """A spawn is about to happen (written before it, so a crash in between is still found)."""

    event = "launching"
    at_epoch: float = 0.0  # time.time() just before the spawn: no process started earlier is ours

    def started(
        self,
        *,
        pid: int,
        pgid: int,
        create_time: float,
        log_path: str,
        followers: list[NodeProcess] | None = None,
    ) -> Started:
        """The announced launch, now with its process (written right after the spawn)."""
        return Started(
            **self._launch_fields(),
            pid=pid,
            pgid=pgid,
            create_time=create_time,
            log_path=log_path,
            followers=followers or None,
        )

    def found(
        self, *, pid: int, create_time: float, log_path: str, followers: list[NodeProcess] | None = None
    ) -> Adopted:
        """The announced launch whose pid was never recorded, found later by argv and start time (with
        the followers of a multi-node launch found the same way)."""
        return Adopted(
            **self._launch_fields(),
            pid=pid,
            pgid=pid,  # spawned as a session leader
            create_time=create_time,
            log_path=log_path,
            source="unrecorded launch",
            followers=followers or None,
        )

    def _launch_fields(self) -> dict[str, Any]:
        return self.model_dump(include=set(_Launch.model_fields) - {"at"})


class LiveServer(_Launch):
    """A server process gauntlet is responsible for: enough to find it again and prove it is the same."""

    pid: int
    pgid: int
    #: The process's start, in seconds after boot (an epoch in journals before 2026-12-03): a pid whose
    #: start differs is somebody else's.
    create_time: float
    log_path: str = ""
    #: A multi-node server's other nodes' processes (None: a single-node server, its line as before).
    followers: list[NodeProcess] | None = None

    def adopted(self, *, source: str) -> Adopted:
        """This server as now adopted by another run (``source`` says where it was found)."""
        return Adopted(**self.model_dump(include=set(LiveServer.model_fields) - {"at"}), source=source)


class Started(LiveServer):
    """The spawn happened: pid, process group and start time, written right after it."""

    event = "started"


class Adopted(LiveServer):
    """A server an earlier run started (or left unrecorded) is now in this process's hands."""

    event = "adopted"
    source: str = ""  # where it was found: a previous sweep's directory, or "unrecorded launch"


class Ready(_Process):
    """The server answers /health and lists the model."""

    event = "ready"
    ready_s: float
    #: A multi-node server's followers once located on their nodes (``NodeProcess.node_pid``: a SLURM
    #: step's process there); None: as ``started`` recorded them.
    followers: list[NodeProcess] | None = None


class StartupFailed(_Process):
    """The server never became ready (classified); the supervisor has torn it down."""

    event = "startup_failed"
    fingerprint: str
    kind: str
    matched_line: str | None = None


class TearingDown(_Process):
    """A teardown is about to start."""

    event = "tearing_down"
    role: Role = "candidate"


class TornDown(_Process):
    """The server is gone (``survivors`` empty and ``port_free`` true, or the teardown raised)."""

    event = "torn_down"
    fingerprint: str
    survivors: list[int] | None = None
    port_free: bool | None = None
    by: str | None = None  # written into a previous sweep's journal by the sweep that stopped its server


class Vanished(_Candidate):
    """A server (or an announced launch) the journal knew of is not running any more."""

    event = "vanished"
    fingerprint: str
    pid: int | None = None


class LoadStarted(_Profile):
    """A profile starts against a live server."""

    event = "load_started"


class LoadFinished(_Profile):
    """A profile ended; ``error`` says why it could not complete."""

    event = "load_finished"
    events: int  # watch events seen while it ran
    error: str | None = None


# ---------------------------------------------------------------------------------------------- restore


class Restoring(_Candidate):
    """The retained configuration is about to be relaunched from its recorded spec."""

    event = "restoring"
    fingerprint: str
    reason: str


class Restored(_Process):
    """The retained configuration is ready again."""

    event = "restored"
    fingerprint: str


class Validated(_Process):
    """The recovery validation passed."""

    event = "validated"
    reason: str


class ValidationFailed(_Candidate):
    """The recovery validation failed, or the retained configuration did not start."""

    event = "validation_failed"
    reason: str
    pid: int | None = None


# ---------------------------------------------------------------------------------------------- promote


class PromotionStarted(_Candidate):
    """``promote`` begins: the kept candidate's spec (``spec_file``, copied from its recorded one) is about
    to replace the retained configuration (``previous``); until :class:`Promoted`, the retained one is
    still ``previous``, so a promotion interrupted here is undone by ``rollback``."""

    event = "promotion_started"
    fingerprint: str
    spec_file: str
    candidate_file: str  # the candidate as a file of Hydra's candidate group (the next sweep's baseline)
    previous: str | None = None  # the retained configuration's fingerprint until now
    previous_candidate: str | None = None


class Promoted(_Process):
    """The promoted candidate started and its validation under load passed: it is the retained
    configuration from here on (what ``rollback`` restores, ``status`` reports, the next sweep finds)."""

    event = "promoted"
    fingerprint: str
    spec_file: str
    candidate_file: str


class PromotionFailed(_Candidate):
    """The promoted candidate did not start, failed its validation or was interrupted: the retained
    configuration stays the previous one (restored next)."""

    event = "promotion_failed"
    fingerprint: str
    reason: str


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
        RepeatLooked,
        RepeatsSettled,
        SweepFinished,
        JobStarted,
        JobFinished,
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
        PromotionStarted,
        Promoted,
        PromotionFailed,
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

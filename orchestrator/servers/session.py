"""A server session: one server's life from launch (or adoption) to teardown, each step journaled first.

Pipeline position: between the orchestrator's steps and the launcher (:mod:`launch.supervisor`).
Measuring a candidate, restoring the retained configuration, rollback, ``stop`` and stopping the servers
an earlier run left all hold their server through a :class:`ServerSession`, so the order "journal, then
act" is written once::

    servers = Servers(journal, seams)
    with servers.launch(spec, spec_file, log_path, role="candidate") as session:
        # launching (journaled) -> start -> started (pid, pgid, start time) -> ready, or startup_failed
        if session.ready:
            with session.watching() as watch:      # a thread checks liveness and /health meanwhile
                run_profile(..., stop=watch.stop)  # set when the server dies
    # tearing_down -> teardown -> torn_down here, also on an exception or Ctrl-C, unless session.keep()
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from contracts.errors import StartupFailure
from contracts.results import StartupRecord, TeardownRecord, WatchEvent
from launch.failures import startup_record
from launch.spec import LaunchSpec
from orchestrator.ledger.events import (
    Launching,
    LiveServer,
    Ready,
    Role,
    StartupFailed,
    TearingDown,
    TornDown,
)
from orchestrator.ledger.journal import Journal
from orchestrator.servers.seams import Seams
from orchestrator.servers.shield import interrupts_held

if TYPE_CHECKING:
    from launch.supervisor import Server


@dataclass
class Servers:
    """Where server sessions come from: the journal that records them and the seams that run them."""

    journal: Journal
    seams: Seams
    #: True once this process started or stopped a server: only then does an early exit need a restore.
    touched: bool = False

    def launch(self, spec: LaunchSpec, spec_file: Path, log_path: Path, *, role: Role) -> ServerSession:
        """A session that launches ``spec`` when entered (``spec_file`` is what the journal points at)."""
        return ServerSession(
            self, spec, candidate=spec.candidate, role=role, spec_file=spec_file, log_path=log_path
        )

    def adopt(self, live: LiveServer, spec: LaunchSpec) -> ServerSession | None:
        """A session for a server the journal recorded, if it still runs (same pid AND same start time)."""
        handle = self.seams.supervisor.adopt(
            live.pid, live.pgid, live.create_time, spec, Path(live.log_path), followers=live.followers or []
        )
        if handle is None:
            return None
        return ServerSession(
            self, spec, candidate=live.candidate, role=live.role, server=handle, fingerprint=live.fingerprint
        )


@dataclass
class Watch:
    """What a watcher saw while load ran; ``stop`` is set when the server dies or hangs (the load runner
    then cancels its in-flight requests within its stop poll, 0.05 s, not at their request timeout)."""

    events: list[WatchEvent] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)


class ServerSession:
    """One server gauntlet is responsible for; entering launches it, leaving tears it down."""

    def __init__(
        self,
        servers: Servers,
        spec: LaunchSpec,
        *,
        candidate: str,
        role: Role,
        spec_file: Path | None = None,
        log_path: Path | None = None,
        server: Server | None = None,
        fingerprint: str | None = None,
    ) -> None:
        self.servers = servers
        self.spec = spec
        #: The fingerprint the journal knows the server by (an adopted server's spec is read untrusted).
        self.fingerprint = fingerprint or spec.fingerprint
        self.candidate = candidate
        self.role: Role = role
        self.spec_file = spec_file
        self.log_path = log_path
        #: The running server (launch.supervisor.Server); None before the launch or when it failed.
        self.server = server
        #: The teardown's record once the server was torn down.
        self.teardown_record: TeardownRecord | None = None
        self._startup: StartupRecord | None = None
        self._stopping = False  # a teardown was attempted (it is never attempted twice)
        self._kept = False

    @property
    def launched(self) -> bool:
        return self._startup is not None

    @property
    def startup(self) -> StartupRecord:
        """How the launch went: seconds to ready, or the classified failure (a launched session only)."""
        if self._startup is None:
            raise RuntimeError(f"{self.candidate}: this session did not launch its server")
        return self._startup

    @property
    def ready(self) -> bool:
        """The server runs and this session has not started tearing it down."""
        return self.server is not None and not self._stopping

    @property
    def running(self) -> Server:
        """The server process (launched or adopted); a RuntimeError when there is none."""
        if self.server is None:
            raise RuntimeError(f"{self.candidate}: no server process")
        return self.server

    @property
    def pid(self) -> int:
        return self.running.pid

    # ---------------------------------------------------------------- the context manager

    def __enter__(self) -> ServerSession:
        if self.server is None and self._startup is None:
            self._launch()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.ready and not self._kept:
            self.teardown()

    def keep(self) -> None:
        """Leave the server running when the session ends (the restored retained server: the live service)."""
        self._kept = True

    @property
    def kept(self) -> bool:
        return self._kept

    # ---------------------------------------------------------------- launch

    def _launch(self) -> None:
        journal, sup, spec = self.servers.journal, self.servers.seams.supervisor, self.spec
        if self.spec_file is None or self.log_path is None:
            raise RuntimeError(f"{self.candidate}: a launched session needs its spec file and log path")
        launch = journal.append(
            Launching(
                candidate=spec.candidate,
                role=self.role,
                fingerprint=spec.fingerprint,
                port=spec.port,
                spec_file=str(self.spec_file),
                at_epoch=time.time(),
            )
        )
        self.servers.seams.say(f"{spec.candidate}: launching ({self.role}) {spec.fingerprint[:19]}")
        server = sup.start(spec, self.log_path)
        self.servers.touched = True
        try:
            journal.append(
                launch.started(
                    pid=server.pid,
                    pgid=server.pgid,
                    create_time=server.create_time,
                    log_path=str(self.log_path),
                    followers=server.node_processes(),
                )
            )
        except BaseException:  # the journal cannot record it (its directory deleted): nothing runs unrecorded
            sup.teardown(server)
            raise
        try:
            ready_s = sup.wait_ready(server)
        except StartupFailure as failure:  # the supervisor has torn it down
            self._startup = startup_record(failure)
            journal.append(
                StartupFailed(
                    candidate=spec.candidate,
                    pid=server.pid,
                    fingerprint=spec.fingerprint,
                    kind=failure.kind,
                    matched_line=failure.matched_line,
                )
            )
            return
        except BaseException:
            self.server = server
            self.teardown()
            raise
        self.server, self._startup = server, startup_record(ready_s)
        try:
            located = sup.locate(server)  # a SLURM follower's pid on its node, beside its local srun's
            self.server = located
            followers = located.node_processes() if located != server else None
            journal.append(
                Ready(
                    candidate=spec.candidate, pid=server.pid, ready_s=round(ready_s, 3), followers=followers
                )
            )
        except BaseException:  # raised inside __enter__: no __exit__ will tear it down
            self.teardown()
            raise
        self.servers.seams.say(f"{spec.candidate}: ready in {ready_s:.1f} s (pid {server.pid})")

    # ---------------------------------------------------------------- watch

    @contextmanager
    def watching(self) -> Iterator[Watch]:
        """A background thread calls the supervisor's cheap check while load runs; a death stops the load."""
        seams = self.servers.seams
        watch = Watch()
        done = threading.Event()
        server = self.running

        def loop() -> None:
            while not done.wait(seams.watch_interval_s):
                new = seams.supervisor.check(server)
                watch.events.extend(new)
                if any(e.kind in ("died", "hung") for e in new):  # cancel the load's requests now
                    watch.stop.set()
                    return
                if seams.stop.is_set():
                    watch.stop.set()

        thread = threading.Thread(target=loop, name="gauntlet-watch", daemon=True)
        thread.start()
        try:
            yield watch
        finally:
            done.set()
            thread.join(timeout=10)
            watch.events.extend(seams.supervisor.check(server))

    # ---------------------------------------------------------------- teardown

    def teardown(self) -> TeardownRecord:
        """Stop the server and prove it is gone (journaled before and after); again: the same record.

        A teardown that raises (something survived) is not retried: the error carries the evidence.
        Ctrl-C, SIGTERM and a ``stop`` request wait until it ended (:mod:`orchestrator.servers.shield`).
        """
        if self.teardown_record is not None:
            return self.teardown_record
        if self._stopping:
            raise RuntimeError(f"{self.candidate}: the teardown of pid {self.pid} already failed")
        journal, server = self.servers.journal, self.running
        self._stopping = True
        self.servers.touched = True
        with interrupts_held(self.servers.seams.say, f"stopping {self.candidate} (pid {self.pid})"):
            try:
                journal.append(TearingDown(candidate=self.candidate, pid=self.pid, role=self.role))
            except BaseException:  # the journal cannot be written: the server is stopped all the same
                self.teardown_record = self.servers.seams.supervisor.teardown(server)
                raise
            record = self.servers.seams.supervisor.teardown(server)
            self.teardown_record = record
            journal.append(
                TornDown(
                    candidate=self.candidate,
                    pid=self.pid,
                    fingerprint=self.fingerprint,
                    survivors=record.survivors,
                    port_free=record.port_free,
                )
            )
        return record

"""The watcher's rules: what a check of a running server reports (died, restarted, unhealthy, recovered,
hung) and the state each report leaves it in.

Pipeline position: under :mod:`launch.supervisor`, whose :meth:`~launch.supervisor.Supervisor.check` the
sweep calls while load runs (``orchestrator.measure.profile``'s watcher thread). A teardown reads the
state (a hung server gets SIGKILL at once) and ends it (``dead``), under the same lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal

from contracts.results import WatchEvent
from launch.failures import death_cause, read_log_tail
from launch.process import Processes
from launch.readiness import HTTP_TIMEOUT_S
from launch.stopped import STOPPED_AFTER_S
from launch.tracking import Server, Tracked, Tracker, WatchStateName

#: A live process whose /health has not answered (no status at all: a timeout, a refused or reset
#: connection) for this long is ``hung``. With the watcher's 1 s interval and the 5 s probe timeout a
#: hang is declared at most 12 s after it began (two unanswered probes, the second ending 11 s after
#: the first began); a 503 is an answer (``unhealthy``), never a hang.
HUNG_AFTER_S = 10.0


def utc(now: datetime) -> str:
    return now.astimezone(UTC).isoformat(timespec="milliseconds")


class Watcher:
    """Checks one server at a time against the last state it reported; thread-safe for the state."""

    def __init__(
        self,
        tracker: Tracker,
        processes: Processes,
        health: Callable[[Server, float], int | str],
        *,
        clock: Callable[[], float],
        now: Callable[[], datetime],
        hung_after_s: float = HUNG_AFTER_S,
        stopped: Callable[[Server], tuple[str, float] | None] | None = None,
        stopped_after_s: float = STOPPED_AFTER_S,
    ) -> None:
        self._tracker = tracker
        self._procs = processes
        self._health = health
        self._clock = clock
        self._now = now
        self._hung_after_s = hung_after_s
        #: A follower's stopped process, described, and when it was seen so (launch.stopped.StoppedLook).
        self._stopped = stopped
        self._stopped_after_s = stopped_after_s
        self._lock = threading.Lock()

    def check(self, server: Server, *, timeout_s: float = HTTP_TIMEOUT_S) -> list[WatchEvent]:
        """New events since the last check: died, restarted, unhealthy (/health not 200), recovered, hung
        (alive, /health unanswered for ``hung_after_s``: nothing more is asked of it, teardown kills it)."""
        tracked = self._tracker.track(server)
        with self._lock:
            state = tracked.watch.state
        if state in ("dead", "hung"):
            return []
        for follower in server.followers:  # a lost node is a lost rank: the server died
            if self._tracker.gone(follower):
                self.set_state(tracked, "dead")
                return [self._died(follower, f"node {follower.node} ({follower.node_name})")]
        if (hung := self._follower_hung(server, tracked)) is not None:
            return [hung]
        if self._tracker.gone(server):
            named = f" ({server.node_name})" if server.node_name else ""
            head = f"node 0{named}, the head," if server.followers else "server"
            events = [self._died(server, head)]
            status = self._health(server, timeout_s)
            if status == 200:
                holders = ", ".join(h.describe() for h in self._procs.port_holders(server.spec.port))
                events.append(
                    self._event("restarted", f"port {server.spec.port} answers /health again: {holders}")
                )
            self.set_state(tracked, "dead")
            return events
        asked = self._clock()
        status = self._health(server, timeout_s)
        if isinstance(status, str):  # no answer at all: a hang when it lasts
            silent = tracked.watch.silent_since = tracked.watch.silent_since or asked
            if self._clock() - silent >= self._hung_after_s and not self._tracker.gone(server):
                self.set_state(tracked, "hung")
                events = [] if state == "unhealthy" else [self._unhealthy(server, status)]
                return [*events, self._hung(server, self._clock() - silent, status)]
        else:
            tracked.watch.silent_since = None
        if status == 200:
            if state == "unhealthy":
                self.set_state(tracked, "healthy")
                return [self._event("recovered", "/health is 200 again")]
            return []
        if state == "healthy":
            self.set_state(tracked, "unhealthy")
            return [self._unhealthy(server, status)]
        return []

    def _died(self, process: Server, what: str) -> WatchEvent:
        """How a gone process of the server ended: its exit code and, from its log, the cause; a multi-node
        server's also names its node (the event's ``node``, ``node_name``, ``exit_code``)."""
        code = self._tracker.exit_code(process)
        pid = (
            f"pid {process.pid}"
            if process.node_pid is None
            else f"pid {process.node_pid} (srun pid {process.pid})"
        )
        detail = f"{what} {pid} exited" + (f" with code {code}" if code is not None else "")
        cause = death_cause(code, read_log_tail(process.log_path))
        event = self._event("died", detail + (f"; {cause}" if cause is not None else ""))
        multi = process.node > 0 or bool(process.followers)
        if not multi:
            return event
        return event.model_copy(
            update={"node": process.node, "node_name": process.node_name, "exit_code": code}
        )

    def _follower_hung(self, server: Server, tracked: Tracked) -> WatchEvent | None:
        """A follower seen stopped for ``stopped_after_s``: the server is hung (the head, and vLLM's, still
        answers /health), and so is that follower (its teardown skips the grace period too)."""
        stopped = self._stopped
        if stopped is None:  # a Watcher made without a way to see a follower stopped
            return None
        for follower in server.followers:
            own = self._tracker.track(follower)
            seen = stopped(follower)
            if seen is None:
                own.watch.silent_since = None
                continue
            said, at = seen
            if own.watch.silent_since is None:  # the first look that saw it stopped
                own.watch.silent_since = at
            stopped_s = at - own.watch.silent_since  # between two looks that saw it stopped
            if stopped_s < self._stopped_after_s:
                continue
            self.set_state(tracked, "hung")
            self.set_state(own, "hung")
            detail = (
                f"node {follower.node} ({follower.node_name}) {said} for {stopped_s:.1f} s while the head "
                "answers /health; the server is killed"
            )
            event = self._event("hung", detail)
            return event.model_copy(update={"node": follower.node, "node_name": follower.node_name})
        return None

    def is_hung(self, server: Server) -> bool:
        """The watcher declared the server hung (its teardown skips the grace period)."""
        with self._lock:
            return self._tracker.track(server).watch.state == "hung"

    def set_state(self, tracked: Tracked, state: WatchStateName) -> None:
        with self._lock:
            tracked.watch.state = state

    def _unhealthy(self, server: Server, status: int | str) -> WatchEvent:
        said = f"returned {status}" if isinstance(status, int) else f"failed: {status}"
        return self._event("unhealthy", f"/health {said} while pid {server.pid} is alive")

    def _hung(self, server: Server, silent_s: float, status: str) -> WatchEvent:
        info = self._procs.info(server.pid)
        state = info.state if info is not None else ""
        return self._event(
            "hung",
            f"pid {server.pid} is alive{f' ({state})' if state else ''} but /health has not answered "
            f"for {silent_s:.1f} s (last: {status}); the server is killed",
        )

    def _event(
        self, kind: Literal["died", "hung", "restarted", "unhealthy", "recovered"], detail: str
    ) -> WatchEvent:
        return WatchEvent(at=utc(self._now()), kind=kind, detail=detail)

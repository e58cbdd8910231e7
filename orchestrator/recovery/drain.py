"""``rollback``'s wait for what it cancelled: the old jobs gone from SLURM's queue and their ports free,
before the retained configuration is started on them.

Pipeline position: under :mod:`.rollback`, between cancelling the sweep's unfinished jobs
(:func:`orchestrator.recovery.handover.cancel_remote_jobs`) and the restore. ``scancel`` returns at once,
while the job's head still holds the service port for a moment (0.3 s was enough for a restore to find it
taken); so the restore starts only once SLURM lists none of the cancelled jobs and every port is free, or
the wait's bound refuses it, saying what still holds on. Progress is said every few seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from contracts.errors import RollbackError

#: How long rollback waits for the cancelled jobs to leave the queue and their ports to be free.
DRAIN_WAIT_S = 120.0
DRAIN_POLL_S = 0.5
#: How often the wait says how it stands.
DRAIN_SAY_EVERY_S = 5.0


@dataclass(frozen=True)
class Held:
    """What still holds on: jobs SLURM lists, ports taken."""

    jobs: list[str]
    ports: list[int]

    def __bool__(self) -> bool:
        return bool(self.jobs or self.ports)

    def describe(self) -> str:
        parts = []
        if self.jobs:
            parts.append(f"job(s) {', '.join(self.jobs)} still listed by squeue")
        if self.ports:
            parts.append(f"port(s) {', '.join(map(str, self.ports))} still taken")
        return " and ".join(parts) or "nothing"


def wait_released(
    jobs: Sequence[str],
    ports: Sequence[int],
    *,
    queued: Callable[[Sequence[str]], list[str]],
    port_taken: Callable[[int], bool],
    say: Callable[[str], None],
    sweep_dir: str,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    wait_s: float = DRAIN_WAIT_S,
) -> float:
    """Wait until none of ``jobs`` is queued and none of ``ports`` is taken; the seconds it took. Past
    ``wait_s`` a :class:`RollbackError` names what still holds on (nothing was started)."""
    start = clock()
    said: float | None = None  # when progress was last said (None: not yet)
    while True:
        held = Held(sorted(queued(list(jobs))) if jobs else [], [p for p in ports if port_taken(p)])
        waited = clock() - start
        if not held:
            if waited > 0:
                say(f"the cancelled job(s) ended and the port(s) are free after {waited:.1f} s; restoring")
            return waited
        if waited >= wait_s:
            raise RollbackError(
                f"the restore was not started: {held.describe()} {wait_s:g} s after the sweep's jobs were "
                "cancelled",
                evidence=[held.describe()],
                hint=f"`python -m orchestrator status {sweep_dir}` says what runs on which node; end it "
                "(`scancel JOB`, or stop the process holding the port): nothing of the retained "
                "configuration was started",
            )
        if said is None or clock() - said >= DRAIN_SAY_EVERY_S:
            say(f"waiting for {held.describe()} ({waited:.0f} s of at most {wait_s:g} s)")
            said = clock()
        sleep(DRAIN_POLL_S)

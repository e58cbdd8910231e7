"""What in a run says the load client, not the server, failed: requests the client could not send, and a
client that stood still (paused) while streams were in flight.

Pipeline position: the runner (:mod:`load.runner`) asks :func:`harness_fault` after a profile's records
are written; a fault is raised as :class:`~contracts.errors.HarnessError` (:class:`ClientPaused` for a
pause), which the sweep records as a ``harness`` event: the run is evidence about nothing, never a
failure or a slow figure of the server. :class:`LoopWatch` is the one clock-reading part (a heartbeat in
each process that dispatches); :func:`client_failures` and :func:`paused` are pure, over records and the
heartbeat's stalls.

A pause is recognised by two things at once (docs/reliability.md, "paused orchestrator"): the process's own
event loop did not run for at least :data:`PAUSE_MIN_S` (SIGSTOP, Ctrl-Z, a VM pause, swap), and every
measured stream in flight across that window received nothing during it. A slow or stalled server never
stops the client's loop, and a busy machine delays it by scheduler time slices, not seconds.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from contracts.errors import ClientPaused, HarnessError
from contracts.results import RequestRecord

#: The shortest loop stall that is a pause, wall seconds. The client's own steps are bounded to
#: milliseconds (parsing in bounded steps, the garbage collector off in the measured window), and a loaded
#: 2-core machine delays a runnable process by scheduler slices (tens of milliseconds, at most about a
#: second); 5 s is far beyond both, and short enough to catch a VM pause or a Ctrl-Z.
PAUSE_MIN_S = 5.0
#: How often the heartbeat wakes, wall seconds (ten wakes a second: no cost to the streams).
BEAT_S = 0.1

#: A window in which a process's loop did not run: (start, end) in CLOCK_MONOTONIC nanoseconds.
Stall = tuple[int, int]


@dataclass
class LoopWatch:
    """A heartbeat in the event loop that dispatches: the windows in which the loop did not run at all.

    Run :meth:`run` as a task over the measured window; :attr:`stalls` holds every gap between two
    wakes of at least ``min_s`` (the loop stood still: the process was stopped or starved).
    """

    clock: Callable[[], int]
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    every_s: float = BEAT_S
    min_s: float = PAUSE_MIN_S
    stalls: list[Stall] = field(default_factory=list)

    async def run(self) -> None:
        last = self.clock()
        while True:
            await self.sleep(self.every_s)
            now = self.clock()
            if now - last >= self.min_s * 1e9:
                self.stalls.append((last, now))
            last = now


@dataclass(frozen=True)
class Pause:
    """A window in which the client stood still while measured streams were in flight (host seconds from
    the profile's t = 0, as the records count)."""

    start_s: float
    end_s: float
    streams: int  # measured streams in flight across it; none of them received anything during it

    def message(self, time_scale: float) -> str:
        seconds = (self.end_s - self.start_s) / time_scale
        return (
            f"the load client was paused for {seconds:.1f} s (from t = {self.start_s / time_scale:.1f} s) "
            f"with {self.streams} measured stream(s) in flight, none of which received anything meanwhile "
            "(SIGSTOP, a VM pause, swap): the run is no evidence about the server; discarded"
        )


def _events(record: RequestRecord) -> list[float]:
    """When the client saw something of ``record``: its send, each chunk, its end (host seconds)."""
    out = [record.sent_s, *(record.sent_s + c for c in record.chunk_offsets_s)]
    if record.end_s is not None:
        out.append(record.sent_s + record.end_s)
    return out


def paused(
    records: Sequence[RequestRecord],
    stalls: Sequence[Stall],
    *,
    t0_ns: int,
    time_scale: float = 1.0,
    min_s: float = PAUSE_MIN_S,
) -> Pause | None:
    """The first pause of one dispatching process, from its records and its loop's stalls (pure).

    A stall counts when it lasted at least ``min_s`` wall seconds and, within it, this process saw nothing
    of any measured stream (no send, chunk or end) for at least ``min_s`` while one or more were in flight
    (sent before that silence, and something seen after it or ended by a timeout or a stop): a common
    silence of every stream, inside a window in which the loop provably did not run.
    """
    measured = [(r, _events(r)) for r in records if not r.warmup]
    need = min_s * time_scale  # host seconds
    for start_ns, end_ns in stalls:
        a = (start_ns - t0_ns) / 1e9 * time_scale
        b = (end_ns - t0_ns) / 1e9 * time_scale
        if b - a < need:
            continue
        # The stall runs from the loop's last wake before it, so sends and chunks of its first beat may lie
        # inside it: the silence is the longest gap between anything this process saw within the stall.
        inside = sorted({a, b, *(t for _, seen in measured for t in seen if a < t < b)})
        length, x, y = max((y - x, x, y) for x, y in itertools.pairwise(inside))
        if length < need:
            continue
        # In flight: something of it seen after the silence, or it ended by a timeout or a stop, which may
        # have fired only when the loop ran again (its last read before the pause).
        inflight = sum(
            1
            for r, seen in measured
            if r.sent_s <= x and (max(seen) >= y or r.error in ("timeout", "cancelled"))
        )
        if inflight:
            return Pause(start_s=x, end_s=y, streams=inflight)
    return None


def client_failures(records: Sequence[RequestRecord]) -> str | None:
    """Requests the load client itself could not send (``client``: no descriptor, no local port, no
    buffer), said once with the first one's detail; None when there were none (pure)."""
    failed = [r for r in records if r.error == "client"]
    if not failed:
        return None
    return (
        f"the load client could not send {len(failed)} of {len(records)} request(s) "
        f"({failed[0].error_detail or 'no detail'}): a fault of the client's host, not the server"
    )


def harness_fault(
    records: Sequence[RequestRecord],
    stalls: Sequence[Sequence[Stall]],
    *,
    t0_ns: int,
    time_scale: float = 1.0,
    split: Sequence[Sequence[RequestRecord]] | None = None,
) -> HarnessError | None:
    """What makes a finished run a harness fault, as the error to raise: a pause of any dispatching
    process (:class:`ClientPaused`; process ``k`` sent ``split[k]`` and stalled ``stalls[k]``; one process:
    ``records`` and ``stalls[0]``), else requests the client could not send; None when neither."""
    parts = split if split is not None else [records]
    for own, own_stalls in zip(parts, stalls, strict=False):
        pause = paused(own, own_stalls, t0_ns=t0_ns, time_scale=time_scale)
        if pause is not None:
            return ClientPaused(
                pause.message(time_scale),
                hint="nothing to change: the sweep measures the run again (a resume does, if it stopped)",
            )
    failures = client_failures(records)
    if failures is None:
        return None
    return HarnessError(
        failures,
        hint="raise the open-files limit (ulimit -n), or spread the streams over load.workers processes",
    )

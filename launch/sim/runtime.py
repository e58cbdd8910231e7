"""The simulator's clock: drives the engine model on the asyncio loop in scaled virtual time.

Pipeline position: between the HTTP layer (:mod:`launch.sim.server`) and the pure engine
(:mod:`launch.sim.engine`). One task sleeps until the next step ends (``virtual = wall x time_scale``),
then lets the host complete every step due; steps are never slept per request or per token, so 128
streams cost one timer per engine step. The clock and the sleep are injected seams.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from launch.sim.engine import Host, SimRequest


class Runtime:
    """Runs a :class:`Host` against the wall clock: ``virtual seconds = wall seconds x scale``."""

    def __init__(
        self,
        host: Host,
        time_scale: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        coalesce_s: float = 0.001,
    ) -> None:
        self.host = host
        self.scale = time_scale
        self.clock = clock
        self.coalesce_s = coalesce_s
        self.t0 = clock()
        self._event = asyncio.Event()
        self._stopped = False
        self._held_since: float | None = None
        #: streams holding tokens not yet written (coalescing); flushed when due
        self.pending: dict[int, Callable[[float], bool]] = {}

    def vnow(self) -> float:
        """Virtual seconds since the runtime started (frozen while held)."""
        now = self.clock() if self._held_since is None else self._held_since
        return (now - self.t0) * self.scale

    def hold(self) -> None:
        """Stop the engine where it is (a rank stuck in a collective): no step ends, no token is written,
        virtual time stands still until :meth:`release`."""
        if self._held_since is None:
            self._held_since = self.clock()
            self._event.set()

    def set_held(self, held: bool) -> None:
        """:meth:`hold` when ``held``, else :meth:`release`."""
        if held:
            self.hold()
        else:
            self.release()

    def release(self) -> None:
        """Run on from where :meth:`hold` stopped: the wall time held is not virtual time."""
        if self._held_since is not None:
            self.t0 += self.clock() - self._held_since
            self._held_since = None
            self._event.set()

    def wall_of(self, virtual: float) -> float:
        return self.t0 + virtual / self.scale

    def submit(self, req: SimRequest) -> None:
        """Queue a request arriving now (its ``arrival`` must already be set)."""
        self.host.add(req)
        self._event.set()

    def abort(self, req: SimRequest) -> None:
        if self.host.abort(req, self.vnow()):
            self._event.set()

    def defer(self, key: int, flush: Callable[[float], bool]) -> None:
        """Hold a stream's unwritten tokens: ``flush(wall)`` is called each step until it returns True."""
        self.pending[key] = flush

    def undefer(self, key: int) -> None:
        """The stream wrote what it held (a flush removes itself)."""
        self.pending.pop(key, None)

    def stop(self) -> None:
        self._stopped = True
        self._event.set()

    def _flush_pending(self, wall: float) -> None:
        if not self.pending:
            return
        for key, flush in list(self.pending.items()):
            if flush(wall):
                self.pending.pop(key, None)  # a flush may already have removed itself

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        event = self._event
        host = self.host
        while not self._stopped:
            if self._held_since is not None:
                event.clear()
                await event.wait()
                continue
            host.advance(self.vnow())
            wall = self.clock()
            self._flush_pending(wall)
            target = host.next_end()  # advance() starts a step whenever one can start, so None = idle
            delays = []
            if target is not None:
                delays.append(max(0.0, self.wall_of(target) - wall))
            if self.pending:
                delays.append(self.coalesce_s)
            event.clear()
            if not delays:
                await event.wait()
                continue
            delay = min(delays)
            if delay <= 0.0:
                await asyncio.sleep(0)
                continue
            handle = loop.call_later(delay, event.set)
            await event.wait()
            handle.cancel()

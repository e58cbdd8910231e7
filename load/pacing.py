"""Open-loop pacing: wait until an absolute CLOCK_MONOTONIC time, precisely, without blocking the loop.

Pipeline position: the dispatcher (:mod:`load.dispatch`) awaits :meth:`Pacer.until` before each open-loop
send. asyncio's own timers round to the selector's millisecond timeout, so a plain ``asyncio.sleep`` leaves
up to ~1 ms late. :class:`TimerfdPacer` arms a Linux ``timerfd`` at the absolute time (through libc, the
helper AIPerf also paces with) and lets the event loop wake on its file descriptor: microsecond wake-ups
with no spinning. Where there is no timerfd (or the clock is a test's), :class:`SpinPacer` sleeps until a
short margin before the time, then yields to the loop until the clock reaches it (reads keep flowing).
Either one returns early on :meth:`Pacer.interrupt` (a stop).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import os
import time
from collections.abc import Callable
from typing import Protocol

CLOCK_MONOTONIC = 1
TFD_NONBLOCK = 0o4000
TFD_CLOEXEC = 0o2000000
TFD_TIMER_ABSTIME = 1
#: SpinPacer: how long before the time it stops sleeping and starts yielding (asyncio rounds to ~1 ms).
SPIN_NS = 1_500_000


class Pacer(Protocol):
    """Waits until absolute monotonic nanoseconds (or an interrupt)."""

    name: str

    async def until(self, when_ns: int) -> None: ...

    def interrupt(self) -> None: ...

    def close(self) -> None: ...


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _libc() -> ctypes.CDLL | None:
    """libc with timerfd_create/timerfd_settime, or None (not Linux)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.timerfd_create.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.timerfd_settime.argtypes = [
            ctypes.c_int,
            ctypes.c_int,
            ctypes.POINTER(_Itimerspec),
            ctypes.c_void_p,
        ]
    except (OSError, AttributeError):
        return None
    return libc


class TimerfdPacer:
    """A timerfd armed at each absolute time; the loop wakes on its descriptor (Linux)."""

    name = "timerfd"

    def __init__(self, libc: ctypes.CDLL) -> None:
        self._libc = libc
        fd = libc.timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        self._fd: int | None = fd
        self._spec = _Itimerspec()
        self._waiter: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def until(self, when_ns: int) -> None:
        if when_ns <= time.monotonic_ns() or self._fd is None:
            return
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            if self._loop is not None:
                self._loop.remove_reader(self._fd)
            loop.add_reader(self._fd, self._fired)
            self._loop = loop
        value = self._spec.it_value
        value.tv_sec, value.tv_nsec = divmod(when_ns, 1_000_000_000)
        if self._libc.timerfd_settime(self._fd, TFD_TIMER_ABSTIME, ctypes.byref(self._spec), None) < 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")
        waiter = self._waiter = loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    def _fired(self) -> None:
        if self._fd is None:
            return
        try:
            os.read(self._fd, 8)
        except BlockingIOError:
            return  # re-armed before this callback ran: not yet
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def interrupt(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def close(self) -> None:
        if self._fd is None:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._fd)
        os.close(self._fd)
        self._fd = None


class SpinPacer:
    """Sleep until ``spin_ns`` before the time, then yield to the loop until the clock reaches it."""

    name = "sleep-spin"

    def __init__(self, clock: Callable[[], int] = time.monotonic_ns, spin_ns: int = SPIN_NS) -> None:
        self.clock = clock
        self.spin_ns = spin_ns
        self._interrupted = False
        self._waiter: asyncio.Future[None] | None = None

    async def until(self, when_ns: int) -> None:
        self._interrupted = False
        delay_ns = when_ns - self.clock() - self.spin_ns
        if delay_ns > 0:
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            handle = loop.call_later(delay_ns / 1e9, _resolve, waiter)
            try:
                await waiter
            finally:
                handle.cancel()
                self._waiter = None
        while not self._interrupted and self.clock() < when_ns:
            await asyncio.sleep(0)  # every turn polls the sockets: reads are not held up

    def interrupt(self) -> None:
        self._interrupted = True
        if self._waiter is not None:
            _resolve(self._waiter)

    def close(self) -> None:
        pass


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def make_pacer(clock: Callable[[], int] = time.monotonic_ns) -> Pacer:
    """A timerfd pacer on Linux with the real monotonic clock; otherwise sleep-then-spin on ``clock``."""
    if clock is time.monotonic_ns:
        libc = _libc()
        if libc is not None:
            try:
                return TimerfdPacer(libc)
            except OSError:
                pass
    return SpinPacer(clock)

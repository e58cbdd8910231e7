"""Live progress of a profile run on stderr: a rich status line on a TTY, plain periodic lines otherwise.

Pipeline position: the runner calls :meth:`Progress.update` from its event loop (about twice a second);
rendering is synchronous and short so it never holds the loop for long. The output tokens/s it shows come
from :class:`LiveRate`, which reads two counters that already exist (nothing is added per socket read).
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

PLAIN_EVERY_S = 10.0
#: The live rate is over the last this many seconds (a few updates).
RATE_WINDOW_S = 2.0


class LiveRate:
    """Output tokens per host second as they arrive, from counters kept anyway (pure).

    ``reads`` is the stream client's count of socket reads so far, in flight included (O(streams) to
    read, nothing per read); ``tokens_per_read`` is what the streams completed so far delivered per read by
    their ``usage`` (it absorbs several tokens per chunk, several chunks per read, and the role, usage and
    ``[DONE]`` events); until the first completes, one token per read. The rate is over the last
    :data:`RATE_WINDOW_S` seconds.
    """

    def __init__(self, *, time_scale: float = 1.0, window_s: float = RATE_WINDOW_S) -> None:
        self.time_scale = time_scale
        self.window_s = window_s
        self._samples: deque[tuple[float, int]] = deque()

    def update(self, t_s: float, reads: int, tokens_per_read: float | None) -> float | None:
        """Add a sample (wall seconds, reads so far); the rate since the oldest one in the window."""
        samples = self._samples
        samples.append((t_s, reads))
        while len(samples) > 2 and samples[1][0] <= t_s - self.window_s:
            samples.popleft()
        t0, reads0 = samples[0]
        if t_s <= t0:
            return None
        per_read = tokens_per_read if tokens_per_read is not None else 1.0
        return (reads - reads0) * per_read / (t_s - t0) / self.time_scale


class Progress:
    """completed/total, live output tokens/s, errors; ``enabled=False`` prints nothing."""

    def __init__(
        self,
        label: str,
        total: int,
        *,
        enabled: bool = True,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.total = total
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.tty = enabled and self.stream.isatty()
        self._live: Live | None = None
        self._last_plain = -PLAIN_EVERY_S
        self._line = ""

    def start(self) -> None:
        if self.tty:
            console = Console(file=self.stream)
            self._live = Live(
                Text(f"{self.label}: starting"), console=console, auto_refresh=False, transient=False
            )
            self._live.start()

    def line(self, completed: int, errors: int, in_flight: int, tok_s: float | None, phase: str) -> str:
        rate = f"{tok_s:,.0f} tok/s" if tok_s is not None else "- tok/s"
        return (
            f"{self.label} [{phase}]: {completed}/{self.total} done, {in_flight} in flight, "
            f"{rate}, {errors} errors"
        )

    def update(self, completed: int, errors: int, in_flight: int, tok_s: float | None, phase: str) -> None:
        if not self.enabled:
            return
        self._line = self.line(completed, errors, in_flight, tok_s, phase)
        if self._live is not None:
            self._live.update(Text(self._line), refresh=True)
            return
        now = self.clock()
        if now - self._last_plain >= PLAIN_EVERY_S:
            self._last_plain = now
            print(self._line, file=self.stream, flush=True)

    def stop(self, final: str | None = None) -> None:
        if not self.enabled:
            return
        if self._live is not None:
            if final:
                self._live.update(Text(final), refresh=True)
            self._live.stop()
            self._live = None
        elif final:
            print(final, file=self.stream, flush=True)

"""The live progress line: its format, its pacing, and its output tokens/s (pure, as tables)."""

from __future__ import annotations

import io

import pytest

from load.progress import LiveRate, Progress


class NotATTY(io.StringIO):
    def isatty(self) -> bool:
        return False


def test_progress_prints_plain_lines_at_most_every_ten_seconds() -> None:
    now = [0.0]
    out = NotATTY()
    progress = Progress("base/short", 10, stream=out, clock=lambda: now[0])
    progress.start()
    for t in (0.0, 1.0, 10.5):
        now[0] = t
        progress.update(3, 1, 2, 1234.5, "measure")
    progress.stop("done")
    lines = out.getvalue().splitlines()
    assert lines == ["base/short [measure]: 3/10 done, 2 in flight, 1,234 tok/s, 1 errors"] * 2 + ["done"]


def test_disabled_progress_prints_nothing() -> None:
    out = NotATTY()
    progress = Progress("x", 1, enabled=False, stream=out)
    progress.start()
    progress.update(1, 0, 0, None, "measure")
    progress.stop("done")
    assert out.getvalue() == ""


@pytest.mark.parametrize(
    ("samples", "time_scale", "want"),
    [
        ([(0.0, 0, None)], 1.0, [None]),  # one sample: no rate yet
        ([(0.0, 0, None), (0.5, 50, None)], 1.0, [None, 100.0]),  # one token per read until calibrated
        ([(0.0, 0, None), (0.5, 50, 2.0)], 1.0, [None, 200.0]),  # usage says two tokens per read
        ([(0.0, 0, None), (0.5, 50, 1.0)], 10.0, [None, 10.0]),  # per host second
        # the window is the last two seconds: the idle start drops out of the rate
        (
            [(0.0, 0, 1.0), (1.0, 0, 1.0), (2.0, 0, 1.0), (3.0, 300, 1.0), (4.0, 600, 1.0)],
            1.0,
            [None, 0, 0, 150, 300],
        ),
        ([(0.0, 7, 1.0), (0.5, 7, 1.0)], 1.0, [None, 0.0]),  # streams stalled: zero, not unknown
    ],
)
def test_live_rate(
    samples: list[tuple[float, int, float | None]], time_scale: float, want: list[float | None]
) -> None:
    rate = LiveRate(time_scale=time_scale)
    got = [rate.update(t, reads, per_read) for t, reads, per_read in samples]
    assert got == [None if w is None else pytest.approx(w) for w in want]

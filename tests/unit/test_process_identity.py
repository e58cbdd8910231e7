"""A process's identity (pid, start after boot) survives a wall-clock step; psutil's create_time does not."""

from __future__ import annotations

import os
import sys

import psutil
import pytest

from launch.process import PsutilProcesses, started_since_boot

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_the_start_after_boot_agrees_with_psutil_on_a_steady_clock() -> None:
    me = psutil.Process(os.getpid())
    assert started_since_boot(me) == pytest.approx(me.create_time() - psutil.boot_time(), abs=1.5)
    assert 0.0 < started_since_boot(me) < psutil.boot_time()  # seconds since boot, not an epoch


def test_a_wall_clock_step_moves_psutils_create_time_but_not_the_identity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    procs = PsutilProcesses()
    before = procs.info(os.getpid())
    assert before is not None
    from psutil import _pslinux  # the boot time psutil adds is derived from the wall clock

    stepped = _pslinux.boot_time() + 3 * 3600.0
    monkeypatch.setattr(_pslinux, "boot_time", lambda: stepped)
    after = procs.info(os.getpid())
    assert after is not None
    assert after.wall_start == pytest.approx(before.wall_start + 3 * 3600.0, abs=0.01)  # psutil moved
    assert after.create_time == before.create_time  # the identity did not

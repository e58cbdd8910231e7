"""GPU memory back to its pre-launch level: the snapshot before a launch, the bounded wait after teardown.

Pipeline position: part of the launcher's teardown (:mod:`launch.supervisor`). The supervisor takes
:meth:`GpuRelease.snapshot` before it spawns a server and, once the server's tree is gone, calls
:meth:`GpuRelease.wait_released` for the ``gpu_released`` / ``gpu_after`` of its ``TeardownRecord``. GPUs
are read only through the probe (:mod:`launch.nvml`), time through the injected ``clock`` and ``sleep``::

    release = GpuRelease(NvmlProbe(), clock=time.monotonic, sleep=time.sleep, once_notes=notes)
    before = release.snapshot()                  # None without a driver ("GPU checks skipped: ...", once)
    release.wait_released(before, 30.0, notes)   # (True, [GpuMemory(...)]) or (False, ...) with a note why
"""

from __future__ import annotations

from collections.abc import Callable

from contracts.results import GpuMemory
from launch.nvml import GpuProbe

GPU_TOLERANCE_GIB = 0.25  # per GPU: "back to the pre-launch level" allows this much noise


class GpuRelease:
    """Per-GPU memory snapshots, and the wait until memory is back to a snapshot's level (bounded)."""

    def __init__(
        self,
        probe: GpuProbe,
        *,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
        once_notes: list[str],
        tolerance_gib: float = GPU_TOLERANCE_GIB,
        min_poll_s: float = 0.2,
    ) -> None:
        self._probe = probe
        self._clock = clock
        self._sleep = sleep
        self._once_notes = once_notes  # said once per supervisor (its ``notes``), e.g. no driver
        self._tolerance = tolerance_gib
        self._min_poll_s = min_poll_s

    def snapshot(self) -> list[GpuMemory] | None:
        """Per-GPU memory now; None without a driver (noted once, with the probe's reason)."""
        snapshot = self._probe.snapshot()
        if snapshot is None:
            reason = getattr(self._probe, "reason", None) or "no NVIDIA driver"
            note = f"GPU checks skipped: {reason}"
            if note not in self._once_notes:
                self._once_notes.append(note)
        return snapshot

    def wait_released(
        self, before: list[GpuMemory] | None, timeout_s: float, notes: list[str]
    ) -> tuple[bool | None, list[GpuMemory] | None]:
        """Poll GPU memory until it is back to ``before`` (bounded by ``timeout_s``); None without a driver.

        Without a pre-launch level (an adopted server), memory that stopped changing counts as released.
        What kept it from being released is appended to ``notes`` (the teardown record's).
        """
        current = self.snapshot()
        if current is None:
            return None, None
        deadline = self._clock() + timeout_s
        previous: list[GpuMemory] | None = None
        while True:
            if before is not None and _released(before, current, self._tolerance):
                return True, current
            if before is None and previous is not None and _stable(previous, current, self._tolerance):
                notes.append("no pre-launch GPU level recorded (adopted server): GPU memory is stable")
                return True, current
            if self._clock() >= deadline:
                break
            self._sleep(min(1.0, max(self._min_poll_s, timeout_s / 20)))
            previous, fresh = current, self.snapshot()
            if fresh is None:
                return None, previous
            current = fresh
        if before is not None:
            held = ", ".join(
                f"GPU {a.index}: {a.used_gib:.2f} GiB used, {b.used_gib:.2f} before"
                for a, b in zip(current, before, strict=False)
                if a.used_gib > b.used_gib + self._tolerance
            )
            notes.append(f"GPU memory not back to its pre-launch level within the release timeout: {held}")
        else:
            notes.append("GPU memory still changing at the end of the release timeout (adopted server)")
        return False, current


def _released(before: list[GpuMemory], after: list[GpuMemory], tolerance: float) -> bool:
    by_index = {gpu.index: gpu for gpu in before}
    return all(
        gpu.used_gib <= by_index[gpu.index].used_gib + tolerance for gpu in after if gpu.index in by_index
    )


def _stable(previous: list[GpuMemory], current: list[GpuMemory], tolerance: float) -> bool:
    by_index = {gpu.index: gpu for gpu in previous}
    return all(abs(gpu.used_gib - by_index[gpu.index].used_gib) <= tolerance / 5 for gpu in current
               if gpu.index in by_index)  # fmt: skip

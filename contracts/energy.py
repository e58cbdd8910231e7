"""Energy of a measured run from GPU counters or power readings: the pure arithmetic and the meter's seam.

Pipeline position: a shared contract, pure, so that both meters use it: NVML's (:mod:`launch.nvml`) and
the simulator's client (:mod:`launch.sim.client`, which may import only ``contracts`` and the spec). The
sweep opens an :class:`EnergyMeter` window at a measured run's start, the load runner narrows it to the
run's measured window (:meth:`EnergyWindow.edge`), and the sweep closes it at the run's end
(:meth:`orchestrator.measure.launch.Launch.measure`); the readings come from NVML
(:class:`launch.nvml.NvmlEnergy`) or the simulator's power model (``GET /sim/energy``). What a window
gives is a :class:`~contracts.results.RunEnergy`: joules over the run, average W per GPU, output tokens per
joule, the method, or "not measured" (None, never zero) with the reason::

    counter_joules(1_000, 901_000, duration_s=2.0)        # 900.0 (mJ counter, J out)
    integrate_power([(0.0, 300.0), (2.0, 500.0)])          # 800.0 (trapezoid, W over s)
    run_energy("nvml_counter", [900.0, 700.0], 2.0, output_tps=1600.0).output_tokens_per_joule   # 2.0
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Literal, Protocol

from contracts.results import EnergyMethod, RunEnergy

#: NVML's total-energy counter: an unsigned 64-bit count of millijoules since the driver loaded.
COUNTER_BITS = 64
#: The most one GPU can plausibly draw (W): a counter step that implies more is a reset, not energy (the
#: largest board power NVIDIA ships is about 1.4 kW).
PLAUSIBLE_MAX_W = 2000.0


def counter_joules(
    start_mj: int, end_mj: int, *, duration_s: float, max_w: float = PLAUSIBLE_MAX_W, bits: int = COUNTER_BITS
) -> float | None:
    """Joules one GPU drew between two readings of its millijoule counter; None when the readings cannot
    be energy: the counter went back (a driver reload reset it) by more than a wrap of ``bits`` bits could
    explain, or the step implies more than ``max_w`` W over ``duration_s``."""
    delta = end_mj - start_mj
    if delta < 0:
        delta += 2**bits  # wrapped past its width: plausible only if the step is small enough
    if duration_s <= 0 or not 0 <= delta <= max_w * duration_s * 1000:
        return None
    return delta / 1000


def integrate_power(samples: Sequence[tuple[float, float]]) -> float | None:
    """Joules from ``(time_s, watts)`` readings by the trapezoid rule; None with fewer than two readings,
    times that do not increase, or a reading that is not a finite, non-negative power."""
    if len(samples) < 2:
        return None
    joules = 0.0
    for (t0, w0), (t1, w1) in itertools.pairwise(samples):
        if not t1 > t0 or not all(math.isfinite(w) and w >= 0 for w in (w0, w1)):
            return None
        joules += (t1 - t0) * (w0 + w1) / 2
    return joules


def not_measured(reason: str, *, gpus: int = 0) -> RunEnergy:
    """A run whose energy was not measured: every figure None (never zero), and why."""
    return RunEnergy(
        method=None,
        joules=None,
        duration_s=None,
        gpus=gpus,
        watts_per_gpu=None,
        output_tokens_per_joule=None,
        reason=reason,
    )


def run_energy(
    method: EnergyMethod,
    per_gpu_joules: Sequence[float | None],
    duration_s: float,
    *,
    output_tps: float | None,
    samples: int | None = None,
    note: str | None = None,
) -> RunEnergy:
    """The run's record from each GPU's joules over ``duration_s``: not measured when a GPU has none (its
    counter reset) or the interval is empty; tokens per joule = ``output_tps`` / total average W."""
    gpus = len(per_gpu_joules)
    if not gpus:
        return not_measured(f"{method}: no GPU was read")
    missing = [i for i, j in enumerate(per_gpu_joules) if j is None]
    if missing:
        return not_measured(
            f"{method}: GPU {', '.join(map(str, missing))} gave no usable reading (a counter reset or power "
            "readings that cannot be integrated)",
            gpus=gpus,
        )
    if duration_s <= 0:
        return not_measured(f"{method}: the run's interval was empty", gpus=gpus)
    joules = [float(j) for j in per_gpu_joules if j is not None]
    total = sum(joules)
    watts = total / duration_s
    per_token = output_tps / watts if output_tps is not None and output_tps > 0 and watts > 0 else None
    return RunEnergy(
        method=method,
        joules=total,
        duration_s=duration_s,
        gpus=gpus,
        watts_per_gpu=[j / duration_s for j in joules],
        output_tokens_per_joule=per_token,
        samples=samples,
        reason=note,
    )


def with_throughput(energy: RunEnergy, output_tps: float | None) -> RunEnergy:
    """``energy`` with its tokens per joule from the run's measured output tokens/s (known only after the
    run's summary is written)."""
    if energy.joules is None or not energy.duration_s or output_tps is None or output_tps <= 0:
        return energy
    watts = energy.joules / energy.duration_s
    return energy.model_copy(update={"output_tokens_per_joule": output_tps / watts if watts > 0 else None})


Edge = Literal["start", "end"]


class EnergyWindow(Protocol):
    """A run's energy being read, from its opening; :meth:`edge` narrows it to the measured window (the
    load runner calls it at the window's start and end; never raises). :meth:`close` gives the record
    (tokens per joule left None: the caller adds them from the run's summary, :func:`with_throughput`)."""

    def edge(self, which: Edge) -> None: ...

    def close(self) -> RunEnergy: ...


class EnergyMeter(Protocol):
    """Opens a window at a run's start; never raises (a meter that cannot read says why in the record)."""

    def open(self) -> EnergyWindow: ...


class Unmeasured:
    """The window of a host with nothing to read (a CPU host, no NVIDIA driver): "not measured", why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def open(self) -> EnergyWindow:
        return self

    def edge(self, which: Edge) -> None:
        return None

    def close(self) -> RunEnergy:
        return not_measured(self.reason)

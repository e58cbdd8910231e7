"""What a token costs: $ per million output tokens from the host's prices, a throughput and a power draw.

Pipeline position: a shared contract, pure. The sweep records the host's prices with each launch
(:class:`~contracts.results.Pricing` in ``run.json``, :func:`pricing_of`); the cost gate, the report and
the bench-serve export work the figures out from a run's output tokens/s and its energy record, and a
search may take :func:`usd_per_mtok` as its objective::

    usd_per_mtok(2000.0, gpus=8, gpu_hour_price=2.5)                               # 2.777... $/Mtok
    usd_per_mtok(2000.0, gpus=8, gpu_hour_price=2.5, watts=4000.0, power_price_kwh=0.15)   # + 0.0833...
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from contracts.results import CapacityResult, Pricing, RunEnergy
from contracts.schema import HostConfig

SECONDS_PER_HOUR = 3600.0


def usd_per_mtok(
    output_tps: float,
    *,
    gpus: int,
    gpu_hour_price: float,
    watts: float | None = None,
    power_price_kwh: float | None = None,
) -> float | None:
    """$ per million output tokens at ``output_tps`` tokens/s on ``gpus`` GPUs at ``gpu_hour_price`` $ per
    GPU-hour, plus, when ``power_price_kwh`` is set, the energy of ``watts`` (all GPUs together) at that
    price. None when the throughput is not a positive number, or the power is priced but not known
    (a cost without its energy part would read as the whole cost)."""
    if not (math.isfinite(output_tps) and output_tps > 0):
        return None
    per_hour = gpus * gpu_hour_price
    if power_price_kwh is not None:
        if watts is None or not math.isfinite(watts) or watts < 0:
            return None
        per_hour += watts / 1000 * power_price_kwh
    return per_hour / (output_tps * SECONDS_PER_HOUR) * 1e6


def pricing_of(host: HostConfig) -> Pricing | None:
    """The host's prices as a launch records them; None without ``host.gpu_hour_price``."""
    if host.gpu_hour_price is None:
        return None
    return Pricing(
        gpus=host.gpu_count, gpu_hour_price=host.gpu_hour_price, power_price_kwh=host.power_price_kwh
    )


def total_watts(energy: RunEnergy | None) -> float | None:
    """The run's average power, every GPU together (W); None when not measured."""
    if energy is None or energy.joules is None or not energy.duration_s:
        return None
    return energy.joules / energy.duration_s


def run_usd_per_mtok(pricing: Pricing, output_tps: float, energy: RunEnergy | None) -> float | None:
    """One run's $ per million output tokens at its measured throughput (its energy priced when the host
    prices power)."""
    return usd_per_mtok(
        output_tps,
        gpus=pricing.gpus,
        gpu_hour_price=pricing.gpu_hour_price,
        watts=total_watts(energy),
        power_price_kwh=pricing.power_price_kwh,
    )


def capacity_output_tps(capacity: CapacityResult) -> float | None:
    """The output tokens/s at the capacity the SLO allows: the median over the runs at the capacity's level
    that held the SLO; None when even the smallest level failed."""
    if capacity.capacity is None:
        return None
    held = [p.output_tps for p in capacity.points if p.level == capacity.capacity and p.met]
    return statistics.median(held) if held else None


def slo_usd_per_mtok(pricing: Pricing, capacity: CapacityResult, watts: Sequence[float]) -> float | None:
    """$ per million output tokens at the capacity the SLO allows (:func:`capacity_output_tps`); the energy
    part, when power is priced, at the median of ``watts`` (the launch's measured runs' average power, all
    GPUs: the capacity search's own runs are not metered). None without a capacity or a needed power."""
    tps = capacity_output_tps(capacity)
    if tps is None:
        return None
    return usd_per_mtok(
        tps,
        gpus=pricing.gpus,
        gpu_hour_price=pricing.gpu_hour_price,
        watts=statistics.median(watts) if watts else None,
        power_price_kwh=pricing.power_price_kwh,
    )

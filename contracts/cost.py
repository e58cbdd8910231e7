"""What a token costs: $ per million output tokens from the host's prices, a throughput and a power draw.

Pipeline position: a shared contract, pure. The sweep records the host's prices with each launch
(:class:`~contracts.results.Pricing` in ``run.json``, :func:`pricing_of`); the cost gate, the report and
the bench-serve export work the figures out from a run's output tokens/s and its energy record, and a
search may take :func:`usd_per_mtok` as its objective::

    usd_per_mtok(2000.0, gpus=8, gpu_hour_price=2.5)                               # 2.777... $/Mtok
    usd_per_mtok(2000.0, gpus=8, gpu_hour_price=2.5, watts=4000.0, power_price_kwh=0.15)   # + 0.0833...

A candidate is priced on the GPUs it uses (TP x DP), one replica: a TP4 candidate on an 8-GPU host on 4
GPUs, which :func:`price_basis` says in words (the host as two such replicas costs the same per token).
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
    input_tps: float = 0.0,
    input_price_ratio: float | None = None,
) -> float | None:
    """$ per million output tokens at ``output_tps`` tokens/s on ``gpus`` GPUs at ``gpu_hour_price`` $ per
    GPU-hour, plus, when ``power_price_kwh`` is set, the energy of ``watts`` (all GPUs together) at that
    price. With ``input_price_ratio`` r, input tokens (``input_tps``) pay r times an output token's price
    and the output tokens the rest: per_hour / (output_tps + r x input_tps); None: every $ on the output
    tokens. None when the throughput is not a positive number, or the power is priced but not known (a
    cost without its energy part would read as the whole cost)."""
    if not (math.isfinite(output_tps) and output_tps > 0):
        return None
    per_hour = gpus * gpu_hour_price
    if power_price_kwh is not None:
        if watts is None or not math.isfinite(watts) or watts < 0:
            return None
        per_hour += watts / 1000 * power_price_kwh
    weighted = output_tps + (input_price_ratio or 0.0) * max(input_tps, 0.0)
    return per_hour / (weighted * SECONDS_PER_HOUR) * 1e6


def input_usd_per_mtok(pricing: Pricing, output_usd_per_mtok: float | None) -> float | None:
    """$ per million input tokens, priced apart (``host.input_token_price_ratio`` x the output tokens'
    price); None when the host does not price them apart."""
    if pricing.input_price_ratio is None or output_usd_per_mtok is None:
        return None
    return pricing.input_price_ratio * output_usd_per_mtok


def pricing_of(host: HostConfig, gpus: int | None = None) -> Pricing | None:
    """The host's prices as a launch records them, for a candidate on ``gpus`` GPUs (its TP x DP; None:
    the host's ``gpu_count``); None without ``host.gpu_hour_price``."""
    if host.gpu_hour_price is None:
        return None
    return Pricing(
        gpus=gpus or host.gpu_count,
        gpu_hour_price=host.gpu_hour_price,
        power_price_kwh=host.power_price_kwh,
        host_gpus=host.gpu_count,
        input_price_ratio=host.input_token_price_ratio,
    )


def price_basis(pricing: Pricing) -> str:
    """What the figure assumes, in words: one replica on the candidate's GPUs, and what the host's GPUs as
    replicas would change (nothing when they divide evenly; idle GPUs paid for when they do not)."""
    used, host = pricing.gpus, pricing.host_gpus
    if host is None:
        return f"priced on {used} GPUs"
    if used >= host:
        return f"priced on the host's {host} GPUs (one replica uses them all)"
    replicas = host // used
    basis = f"priced on the {used} GPUs one replica uses, of the host's {host}"
    if replicas * used == host:
        return f"{basis}; the host as {replicas} replicas costs the same per token (replicas scale linearly)"
    idle = host - replicas * used
    return (
        f"{basis}; the host holds {replicas} replica(s) on {replicas * used} GPUs, {idle} idle: "
        f"{host / (replicas * used):.2f}x this figure if the host is paid for whole"
    )


def total_watts(energy: RunEnergy | None) -> float | None:
    """The run's average power, every GPU together (W); None when not measured."""
    if energy is None or energy.joules is None or not energy.duration_s:
        return None
    return energy.joules / energy.duration_s


def run_usd_per_mtok(
    pricing: Pricing, output_tps: float, energy: RunEnergy | None, *, input_tps: float = 0.0
) -> float | None:
    """One run's $ per million output tokens at its measured throughput (its energy priced when the host
    prices power; input tokens priced apart when the host sets ``input_token_price_ratio``)."""
    return usd_per_mtok(
        output_tps,
        gpus=pricing.gpus,
        gpu_hour_price=pricing.gpu_hour_price,
        watts=total_watts(energy),
        power_price_kwh=pricing.power_price_kwh,
        input_tps=input_tps,
        input_price_ratio=pricing.input_price_ratio,
    )


def capacity_output_tps(capacity: CapacityResult) -> float | None:
    """The output tokens/s at the capacity the SLO allows: the median over the runs at the capacity's level
    that held the SLO; None when even the smallest level failed."""
    if capacity.capacity is None:
        return None
    held = [p.output_tps for p in capacity.points if p.level == capacity.capacity and p.met]
    return statistics.median(held) if held else None


def slo_point_costs(
    pricing: Pricing, capacity: CapacityResult, watts: Sequence[float], *, input_per_output: float = 0.0
) -> list[tuple[str, float]]:
    """Each run at the capacity's level that held the SLO, named (``12 req/s a1``), with its $ per million
    output tokens; the energy part at the median of ``watts`` (the search's runs are not metered), the
    input tokens at ``input_per_output`` per output token (the profile's own runs' ratio)."""
    if capacity.capacity is None:
        return []
    out = []
    for p in capacity.points:
        if p.level != capacity.capacity or not p.met:
            continue
        cost = usd_per_mtok(
            p.output_tps,
            gpus=pricing.gpus,
            gpu_hour_price=pricing.gpu_hour_price,
            watts=statistics.median(watts) if watts else None,
            power_price_kwh=pricing.power_price_kwh,
            input_tps=p.output_tps * input_per_output,
            input_price_ratio=pricing.input_price_ratio,
        )
        if cost is not None:
            out.append((f"{p.level:g} {capacity.unit} a{p.attempt}", cost))
    return out


def slo_usd_per_mtok(
    pricing: Pricing, capacity: CapacityResult, watts: Sequence[float], *, input_per_output: float = 0.0
) -> float | None:
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
        input_tps=tps * input_per_output,
        input_price_ratio=pricing.input_price_ratio,
    )

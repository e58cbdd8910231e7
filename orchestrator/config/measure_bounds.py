"""What a sweep measures against, checked when the config is composed: the SLO and the capacity search's
settings (docs/capacity.md), the host's prices and the cost gate's bounds (docs/accuracy-and-cost.md).

Pipeline position: :func:`orchestrator.config.validate.validate` calls :func:`capacity_problems` and
:func:`cost_problems`; each returns problems, never raises, so one run of ``plan`` names every one of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from contracts.errors import ConfigProblem
from contracts.schema import GauntletConfig
from orchestrator.config.accuracy import Origins


def _price(value: object) -> bool:
    """None, or a finite number >= 0."""
    if value is None:
        return True
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    )


def _origin(src: Origins, group: str, key_path: Sequence[str]) -> str:
    """The file (or command-line override) that set ``group.key_path``, else the group's file."""
    choice = src.choices.get(group)
    return src.origin(group, choice, key_path) if choice is not None else src.describe(group)


def cost_problems(cfg: GauntletConfig, src: Origins) -> list[ConfigProblem]:
    """``host.gpu_hour_price`` and ``host.power_price_kwh`` (each None or a price >= 0; a power price only
    with a GPU-hour price) and ``gates.cost``'s bounds (None, or a tolerance >= 0 and a budget > 0; a
    bound only with a GPU-hour price: without one the cost gate has nothing to judge, and a bound the
    user set would be dropped in silence)."""
    host, bounds, out = cfg.host, cfg.gates.cost, []
    host_file, gates_file = src.describe("host"), src.describe("gates")
    if not _price(host.gpu_hour_price):
        allowed = "$ per GPU-hour, a number >= 0, or null (no cost figures)"
        out.append(ConfigProblem(host_file, "host.gpu_hour_price", host.gpu_hour_price, allowed))
    if not _price(host.power_price_kwh):
        allowed = "$ per kWh, a number >= 0, or null (energy not priced)"
        out.append(ConfigProblem(host_file, "host.power_price_kwh", host.power_price_kwh, allowed))
    elif host.power_price_kwh is not None and host.gpu_hour_price is None:
        allowed = "null unless host.gpu_hour_price is set (the cost figures start from the GPU-hours)"
        out.append(ConfigProblem(host_file, "host.power_price_kwh", host.power_price_kwh, allowed))
    if not _price(host.input_token_price_ratio):
        allowed = "an input token's price over an output token's, a number >= 0 (0.25: a quarter), or null"
        out.append(
            ConfigProblem(host_file, "host.input_token_price_ratio", host.input_token_price_ratio, allowed)
        )
    if not _price(bounds.tolerance):
        allowed = "a fraction >= 0 (0.05: 5% dearer than the baseline), or null (not compared)"
        out.append(ConfigProblem(gates_file, "gates.cost.tolerance", bounds.tolerance, allowed))
    if not _price(bounds.max_usd_per_mtok) or bounds.max_usd_per_mtok == 0:
        allowed = "$ per million output tokens, a number > 0, or null (no budget)"
        out.append(ConfigProblem(gates_file, "gates.cost.max_usd_per_mtok", bounds.max_usd_per_mtok, allowed))
    if host.gpu_hour_price is None:
        price_at = _origin(src, "host", ["gpu_hour_price"])
        for key, value in (("tolerance", bounds.tolerance), ("max_usd_per_mtok", bounds.max_usd_per_mtok)):
            if value is None:
                continue
            allowed = (
                f"null unless host.gpu_hour_price is set: a cost bound needs the host's $ per GPU-hour, and "
                f"host.gpu_hour_price is null ({price_at}); set host.gpu_hour_price to your provider's $ per "
                f"GPU-hour (in the host's file, or e.g. host.gpu_hour_price=2.5 on the command line), or "
                f"leave gates.cost.{key} null"
            )
            out.append(
                ConfigProblem(_origin(src, "gates", ["cost", key]), f"gates.cost.{key}", value, allowed)
            )
    return out


def capacity_problems(cfg: GauntletConfig, slo_file: str, where: str) -> list[ConfigProblem]:
    """Problems of the SLO (``conf/slo/``) and capacity settings; checked with the rest of the config."""
    out: list[ConfigProblem] = []
    slo = cfg.slo
    if not 0 < slo.percentile <= 100:
        out.append(ConfigProblem(slo_file, "slo.percentile", slo.percentile, "a percentile in (0, 100]"))
    for name in ("ttft_s", "tpot_s", "first_visible_s", "e2e_s"):
        value = getattr(slo, name)
        if value is not None and value <= 0:
            out.append(ConfigProblem(slo_file, f"slo.{name}", value, "a positive time in seconds, or null"))
    cap = cfg.capacity
    if cap.profile is None:
        return out
    if cap.profile not in cfg.workloads:
        allowed = f"a workload name: {', '.join(sorted(cfg.workloads))}, or null (no capacity search)"
        out.append(ConfigProblem(where, "capacity.profile", cap.profile, allowed))
    if all(getattr(slo, n) is None for n in ("ttft_s", "tpot_s", "first_visible_s", "e2e_s")):
        out.append(ConfigProblem(slo_file, "slo", slo.name, "at least one threshold for a capacity search"))
    checks = [
        ("capacity.min_level", cap.min_level, cap.min_level > 0, "a positive load level"),
        ("capacity.max_level", cap.max_level, cap.max_level >= cap.min_level, ">= capacity.min_level"),
        ("capacity.growth", cap.growth, cap.growth > 1, "a factor > 1"),
        ("capacity.resolution", cap.resolution, cap.resolution > 0, "a fraction > 0"),
        ("capacity.max_points", cap.max_points, cap.max_points >= 2, "an integer >= 2"),
        ("capacity.noise", cap.noise, cap.noise >= 0, "a fraction >= 0"),
        ("capacity.max_repeats", cap.max_repeats, cap.max_repeats >= 1, "an integer >= 1"),
        ("capacity.waves", cap.waves, cap.waves > 0, "a positive number of waves"),
        ("capacity.duration_s", cap.duration_s, cap.duration_s > 0, "a positive duration in seconds"),
        ("capacity.min_requests", cap.min_requests, cap.min_requests >= 1, "an integer >= 1"),
    ]
    out.extend(ConfigProblem(where, key, value, allowed) for key, value, ok, allowed in checks if not ok)
    return out

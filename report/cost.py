"""Energy and cost in the report: tokens per joule, average W per GPU and $ per million output tokens, per
candidate and loaded profile, at the measured throughput and at the capacity the SLO allows.

Pipeline position: read from the launches' ``run.json`` (each run's energy, the host's prices) and the
runs' summaries (:mod:`contracts.cost` does the arithmetic); the decision table's cost cell, the "Energy
and cost" section and the terminal line are rendered from these rows. Decides nothing: the cost gate's
verdict is in the gates' results. A figure that was not measured is None and the row says why; simulated
figures (the simulator's power model) say so.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from contracts.cost import input_usd_per_mtok, price_basis, run_usd_per_mtok, slo_usd_per_mtok, total_watts
from contracts.layout import repeat_name
from contracts.sweepdir import Results


class CostRow(BaseModel):
    """One candidate's energy and cost on one loaded profile (medians over its runs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    candidate: str
    profile: str
    method: str | None  # nvml_counter, nvml_power, simulated; None: not measured
    runs: int  # runs of the profile that ran to their end
    metered: int  # of them, runs with an energy reading
    tokens_per_joule: float | None
    watts_per_gpu: float | None
    usd_per_mtok: float | None  # at the measured throughput
    usd_per_mtok_at_slo: float | None = None  # at the capacity the SLO allows (the capacity profile)
    usd_per_mtok_input: float | None = None  # input tokens priced apart (host.input_token_price_ratio)
    priced_on: str = (
        ""  # what the figure assumes: the GPUs priced, one replica or the host's (contracts.cost)
    )
    note: str = ""  # why a figure is missing; the GPUs metered (contracts.metering)
    metered_on: str = ""  # the GPUs read, in short ("4 of 8 GPUs, shared"); "" where not recorded

    @property
    def simulated(self) -> bool:
        return self.method == "simulated"


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def cost_row(name: str, results: Results, profile: str) -> CostRow | None:
    """``name``'s row for ``profile``; None when it has no finished run of it."""
    run = results.run
    reps = results.samples(profile)
    if run is None or not reps:
        return None
    energies = [run.energy.get(repeat_name(profile, r.summary.repeat)) for r in reps]
    metered = [e for e in energies if e is not None and e.measured]
    methods = sorted({e.method for e in metered if e.method is not None})
    watts = [w for e in metered if (w := total_watts(e)) is not None]
    costs = (
        [
            run_usd_per_mtok(run.pricing, r.summary.output_tps, e, input_tps=r.summary.prompt_tps)
            for r, e in zip(reps, energies, strict=True)
        ]
        if run.pricing is not None
        else []
    )
    at_slo = None
    cap = results.capacity
    if run.pricing is not None and cap is not None and cap.profile == profile:
        ratios = [r.summary.prompt_tps / r.summary.output_tps for r in reps if r.summary.output_tps > 0]
        per_output = statistics.median(ratios) if ratios else 0.0
        at_slo = slo_usd_per_mtok(run.pricing, cap, watts, input_per_output=per_output)
    cost = _median(costs) if costs and None not in costs else None
    notes = [price_basis(run.pricing)] if run.pricing is not None else []
    metering = next((e.metering for e in metered if e.metering is not None), None)
    if metering is not None:
        notes.append(f"metered on {metering.describe()}")
    if not metered:
        reason = next((e.reason for e in energies if e is not None and e.reason), None)
        notes.append(reason or "energy not measured")
    if run.pricing is None:
        notes.append("no host.gpu_hour_price")
    elif costs and None in costs:
        notes.append("power is priced but a run's energy was not measured")
    return CostRow(
        candidate=name,
        profile=profile,
        method="+".join(methods) or None,
        runs=len(reps),
        metered=len(metered),
        tokens_per_joule=_median([e.output_tokens_per_joule for e in metered]),
        watts_per_gpu=_median([w / e.gpus for e in metered if (w := total_watts(e)) is not None and e.gpus]),
        usd_per_mtok=cost,
        usd_per_mtok_at_slo=at_slo,
        usd_per_mtok_input=input_usd_per_mtok(run.pricing, cost) if run.pricing is not None else None,
        priced_on=price_basis(run.pricing) if run.pricing is not None else "",
        note="; ".join(notes),
        metered_on=(
            metering.short()
            if metering is not None
            else f"{metered[0].gpus} GPUs"  # the simulator's, or a record from before the metering
            if metered and metered[0].gpus
            else ""
        ),
    )


def cost_rows(results: Mapping[str, Results], profiles: Sequence[str]) -> list[CostRow]:
    """A row per candidate (in ``results``' order) and loaded profile; none at all when no launch has an
    energy reading or a price (a sweep from before these figures, or a host that has neither)."""
    rows = [row for name, res in results.items() for p in profiles if (row := cost_row(name, res, p))]
    if not any(r.metered or r.usd_per_mtok is not None for r in rows):
        return []
    return rows


def headline_profile(rows: Sequence[CostRow], capacity_profile: str | None) -> str | None:
    """The profile the decision table and the terminal quote: the capacity search's, else the first."""
    profiles = list(dict.fromkeys(r.profile for r in rows))
    if capacity_profile in profiles:
        return capacity_profile
    return profiles[0] if profiles else None


def cost_cell(row: CostRow | None) -> str:
    """A row's figures in a few words, e.g. ``2.31 tok/J, $0.347/Mtok ($0.301 at the SLO)``; ``-`` when
    nothing is known."""
    if row is None:
        return "-"
    parts = []
    if row.tokens_per_joule is not None:
        on = f" on {row.metered_on}" if row.metered_on else ""
        parts.append(f"{row.tokens_per_joule:.3g} tok/J{on}")
    if row.usd_per_mtok is not None:
        slo = f" (${row.usd_per_mtok_at_slo:.3g} at the SLO)" if row.usd_per_mtok_at_slo is not None else ""
        if row.usd_per_mtok_input is not None:
            parts.append(f"${row.usd_per_mtok:.3g}/Mtok out{slo}, ${row.usd_per_mtok_input:.3g}/Mtok in")
        else:
            parts.append(f"${row.usd_per_mtok:.3g}/Mtok{slo}")
    return ", ".join(parts) or "not measured"


def cost_label(rows: Sequence[CostRow], profile: str) -> str:
    """The figures' heading: the profile, and SIMULATED when the energy is the simulator's power model."""
    simulated = any(r.simulated for r in rows)
    return f"{profile}{', SIMULATED power model' if simulated else ''}"


#: The energy-and-cost table's columns, in report.md and report.html alike.
COST_HEADER = (
    "candidate",
    "profile",
    "energy read by",
    "tok/J",
    "W per GPU",
    "$/Mtok",
    "$/Mtok at the SLO",
    "note",
)


def cost_title(rows: Sequence[CostRow]) -> str:
    """The section's title, saying SIMULATED when any row's energy is the simulator's power model."""
    simulated = any(r.simulated for r in rows)
    return "Energy and cost" + (" (SIMULATED: the simulator's power model)" if simulated else "")

"""The report's SLO part: a capacity line per candidate and goodput per profile, as data and as Markdown.

Pipeline position: inside the report stage, used by :func:`report.model.build_model` and
:func:`report.markdown.render_markdown`. Capacities come from each candidate's ``capacity.json`` (the
search's bracket) and their ratios and intervals from the capacity gate in ``verdicts.json``; goodput
and attainment come from the summaries, shown as the mean over repeats with a Student-t interval (a
description of the repeats' spread, not a decision: the gates decide).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import fmean, stdev

from pydantic import BaseModel, ConfigDict, Field

from contracts.metrics import capacity_bound, fmt_bounds, fmt_capacity, fmt_ratio
from contracts.results import CapacityResult
from contracts.sweepdir import Results
from contracts.verdicts import GateStatus, SweepVerdict


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="constants")


class Interval(_Model):
    """A mean over repeats and its interval (None with a single repeat)."""

    mean: float
    low: float | None = None
    high: float | None = None
    n: int = 1


class CapacityLine(_Model):
    """One candidate's capacity at the SLO, against the baseline's."""

    candidate: str
    profile: str
    unit: str
    slo: str
    slo_text: str
    capacity: float | None
    high: float | None  # lowest level that failed above the capacity (None: unbounded)
    runs: int
    goodput_tps: float | None  # at the capacity level (median over its runs)
    tps_per_gpu: float | None  # output tok/s per GPU at the capacity level
    tps_per_user: float | None  # 1 / median TPOT at the capacity level
    ratio: float | None = None  # candidate / baseline, from the capacity gate
    interval: tuple[float, float] | None = None
    status: GateStatus | None = None
    notes: list[str] = Field(default_factory=list)
    lowest: float | None = None  # the lowest level the search tried (a capacity held nowhere is below it)
    #: How the ratio bounds the true one (contracts.metrics.capacity_bound): "", "≥" or "≤".
    bound: str = ""
    #: The same configuration searched again on fresh launches (the baseline's interleaved blocks).
    launches: list[float | None] = Field(default_factory=list)


class GoodputRow(_Model):
    """Goodput and attainment of one (candidate, profile) over its repeats."""

    candidate: str
    profile: str
    goodput_tps: Interval
    goodput_rps: Interval
    attainment: Interval
    held: int  # repeats that held the SLO
    repeats: int


class ServerFigureRow(_Model):
    """What the server's counters said for one (candidate, profile), averaged over repeats."""

    candidate: str
    profile: str
    acceptance_rate: float | None = None  # speculative decoding: accepted / draft tokens
    mean_accepted_length: float | None = None  # tokens per target step (1 + accepted / drafts)
    prefix_cache_hit_rate: float | None = None  # prefix-cache hits / queries (tokens)
    repeats: int = 0
    # Acceptance at each draft position (accepted there / drafts), mean over repeats; [] = not exported.
    acceptance_per_position: list[float] = Field(default_factory=list)


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return fmean(present) if present else None


def per_position_mean(runs: Sequence[list[float] | None]) -> list[float]:
    """Each draft position's acceptance, mean over the runs that exported it; [] when none did."""
    known = [r for r in runs if r]
    width = max((len(r) for r in known), default=0)
    return [fmean(r[k] for r in known if k < len(r)) for k in range(width)]


def server_figure_rows(results: Mapping[str, Results], profiles: Sequence[str]) -> list[ServerFigureRow]:
    """Speculative-decoding acceptance and prefix-cache hit rate where the server exported them."""
    out: list[ServerFigureRow] = []
    for name, res in results.items():
        for profile in profiles:
            servers = [rep.summary.server for rep in res.repeats(profile) if rep.summary.server is not None]
            specs = [s.speculative for s in servers if s.speculative is not None]
            row = ServerFigureRow(
                candidate=name,
                profile=profile,
                acceptance_rate=_mean([s.acceptance_rate for s in specs]),
                mean_accepted_length=_mean([s.mean_accepted_length for s in specs]),
                prefix_cache_hit_rate=_mean([s.prefix_cache_hit_rate for s in servers]),
                repeats=len(servers),
                acceptance_per_position=per_position_mean([s.acceptance_per_position for s in specs]),
            )
            if any(v is not None for v in (row.acceptance_rate, row.prefix_cache_hit_rate)):
                out.append(row)
    return out


def server_figure_cell(r: ServerFigureRow) -> str:
    """A row in a few words: ``65% accepted (by position 90%/70%/35%), 2.95 tok/step, prefix hits 40%``."""
    parts = []
    if r.acceptance_rate is not None:
        per_pos = "/".join(f"{a:.0%}" for a in r.acceptance_per_position)
        parts.append(f"{r.acceptance_rate:.0%} accepted" + (f" (by position {per_pos})" if per_pos else ""))
    if r.mean_accepted_length is not None:
        parts.append(f"{r.mean_accepted_length:.2f} tok/step")
    if r.prefix_cache_hit_rate is not None:
        parts.append(f"prefix hits {r.prefix_cache_hit_rate:.0%}")
    return ", ".join(parts) or "-"


def mean_interval(
    values: Sequence[float], confidence: float, *, floor: float = 0.0, ceiling: float = math.inf
) -> Interval:
    """Mean and Student-t interval of the repeats' values, clipped to what the quantity can be (goodput
    is never negative, attainment never above 1); no interval for a single value."""
    from scipy import stats as sps  # noqa: PLC0415  (scipy on first use)

    m = fmean(values)
    if len(values) < 2:
        return Interval(mean=m, n=len(values))
    half = float(sps.t.ppf((1 + confidence) / 2, len(values) - 1)) * stdev(values) / math.sqrt(len(values))
    return Interval(mean=m, low=max(floor, m - half), high=min(ceiling, m + half), n=len(values))


def _at_capacity(result: CapacityResult) -> tuple[float | None, float | None, float | None]:
    """Median goodput tok/s, output tok/s and per-user tok/s over the runs at the capacity level."""
    runs = [p for p in result.points if result.capacity is not None and p.level == result.capacity]
    if not runs:
        return None, None, None
    runs.sort(key=lambda p: p.goodput_tps)
    mid = runs[len(runs) // 2]
    return mid.goodput_tps, mid.output_tps, mid.tps_per_user


def capacity_lines(verdicts: SweepVerdict, results: Mapping[str, Results]) -> list[CapacityLine]:
    """A line per candidate that has a capacity search, baseline first."""
    gates = {v.candidate: next((g for g in v.gates if g.gate == "capacity"), None) for v in verdicts.verdicts}
    base = results.get(verdicts.baseline)
    bases = [] if base is None else [r for r in [base.capacity, *(b.capacity for b in base.blocks)] if r]
    out: list[CapacityLine] = []
    for name, res in results.items():
        cap = res.capacity
        if cap is None:
            continue
        goodput, output, per_user = _at_capacity(cap)
        gate = gates.get(name)
        again = [b.capacity.capacity for b in res.blocks if b.capacity is not None]
        out.append(
            CapacityLine(
                candidate=name,
                profile=cap.profile,
                unit=cap.unit,
                slo=cap.slo,
                slo_text=cap.slo_text,
                capacity=cap.capacity,
                high=cap.high,
                runs=len(cap.points),
                goodput_tps=goodput,
                tps_per_gpu=output / cap.gpus if output is not None and cap.gpus else None,
                tps_per_user=per_user,
                ratio=gate.observed if gate is not None and gate.status != "not_run" else None,
                interval=gate.interval if gate is not None else None,
                status=gate.status if gate is not None else None,
                notes=list(cap.notes),
                lowest=min((p.level for p in cap.points), default=None),
                bound=capacity_bound([cap], bases) if name != verdicts.baseline else "",
                launches=[cap.capacity, *again] if again else [],
            )
        )
    return out


def goodput_rows(
    results: Mapping[str, Results], profiles: Sequence[str], confidence: float
) -> list[GoodputRow]:
    """Goodput and attainment per (candidate, profile) measured with an SLO, over repeats."""
    out: list[GoodputRow] = []
    for name, res in results.items():
        for profile in profiles:
            slos = [rep.summary.slo for rep in res.samples(profile) if rep.summary.slo is not None]
            if not slos:
                continue
            out.append(
                GoodputRow(
                    candidate=name,
                    profile=profile,
                    goodput_tps=mean_interval([s.goodput_tps for s in slos], confidence),
                    goodput_rps=mean_interval([s.goodput_rps for s in slos], confidence),
                    attainment=mean_interval([s.attainment for s in slos], confidence, ceiling=1.0),
                    held=sum(s.met for s in slos),
                    repeats=len(slos),
                )
            )
    return out


# ------------------------------------------------------------------------------------------- Markdown


def _num(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def fmt_interval(value: Interval, unit: str = "") -> str:
    text = _num(value.mean) + (f" {unit}" if unit else "")
    if value.low is not None and value.high is not None:
        text += f" [{_num(value.low)}-{_num(value.high)}]"
    return text


def capacity_value(line: CapacityLine) -> str:
    """The capacity as measured, never beyond a level the search ran: ``16 concurrent [16, 22)``,
    ``≥ 16 concurrent`` (held at every level tried), ``< 2 concurrent (the SLO held at no level tried)``."""
    text = fmt_capacity(line.capacity, line.high, line.unit, line.lowest)
    if line.capacity is None:
        return f"{text} (the SLO held at no level tried)" if line.lowest is not None else text
    return text + (" (the SLO held at every level tried)" if line.high is None else "")


def capacity_short(line: CapacityLine) -> str:
    """The capacity alone, for the terminal: ``128``, ``≥ 16``, ``< 2``, ``none`` (held nowhere)."""
    if line.capacity is None:
        return "none" if line.lowest is None else f"< {line.lowest:g}"
    return f"≥ {line.capacity:g}" if line.high is None else f"{line.capacity:g}"


def launches_text(line: CapacityLine) -> str:
    """The same configuration searched on several launches: ``16, 8 concurrent on 2 launches (spread
    49%)``; "" with one launch. A spread this large is the launch-to-launch variance the gate allows for."""
    found = [v for v in line.launches if v is not None and v > 0]
    if len(line.launches) < 2:
        return ""
    values = ", ".join("none" if v is None else f"{v:g}" for v in line.launches)
    spread = f" (spread {stdev([math.log(v) for v in found]):.0%})" if len(found) > 1 else ""
    return f"{values} {line.unit} on {len(line.launches)} launches{spread}"


def capacity_text(line: CapacityLine, baseline: str) -> str:
    """``tp4_dp2: capacity 16 concurrent [16, 22), 0.125x [0.09x-0.17x] of baseline; at capacity ...``."""
    head = f"{line.candidate}: capacity {capacity_value(line)}"
    if line.ratio is not None:
        shown = (f"{line.bound} " if line.bound else "") + fmt_ratio(line.ratio)
        head += f", {shown}{fmt_bounds(line.interval)} of {baseline}"
        head += f" (capacity gate: {line.status})"
    if launches_text(line):
        head += f"; the same configuration measured {launches_text(line)}"
    parts = []
    if line.goodput_tps is not None:
        parts.append(f"goodput {_num(line.goodput_tps)} tok/s")
    if line.tps_per_gpu is not None:
        parts.append(f"{_num(line.tps_per_gpu)} tok/s per GPU")
    if line.tps_per_user is not None:
        parts.append(f"{_num(line.tps_per_user)} tok/s per user")
    tail = f"; at capacity: {', '.join(parts)}" if parts else ""
    return f"{head}{tail} ({line.runs} runs)"

"""The capacity search against a live server: the highest load each candidate serves within the SLO.

Pipeline position: part of measuring a candidate (:func:`orchestrator.measure.candidate.run_candidate` calls
:func:`run_capacity` after the profiles, on the same server). The core, which levels to measure and when
to stop, is :mod:`orchestrator.measure.capacity_search`; here each level becomes a run of the configured
workload with its rate (open loop) or concurrency (closed loop) set, through the same
:func:`~orchestrator.measure.candidate.measure_profile` as every profile (journal, watcher, SLO in the
summary).
Runs go to ``candidates/<name>/capacity/<level>/a<attempt>/``; the answer to
``candidates/<name>/capacity.json`` (:class:`~contracts.results.CapacityResult`). Within a search no
level is measured twice except to settle noise, and the level the profile itself is configured at
reuses the sweep's own repeats of it when they measured the same requests (:func:`sweep_run`); a
resumed sweep measures a candidate without ``capacity.json`` again, as it does any incomplete one. The
baseline is searched again in each interleaved block (``capacity.in_blocks``,
:mod:`orchestrator.measure.interleave`), into the block's directory: a fresh launch of the same
configuration, whose capacity the gate averages with the opening's and compares with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from contracts.files import read_model, write_model
from contracts.layout import SUMMARY_FILE, LaunchPaths, capacity_run_root, repeat_name
from contracts.metrics import fmt_capacity, slo_text
from contracts.pipeline import gpus_held
from contracts.results import CapacityPoint, CapacityResult, ProfileSummary, WatchEvent
from contracts.schema import CandidateConfig, CapacityConfig, WorkloadConfig
from load.goodput import margin_lag_undone
from load.workload import scaled_counts
from orchestrator.measure.capacity_search import SearchResult, SearchSettings, search
from orchestrator.measure.profile import measure_profile, server_lost
from orchestrator.servers.context import SweepContext
from orchestrator.servers.session import ServerSession


class _ServerLost(Exception):
    """The server died or a level could not run: the search stops with what it has."""


class _HarnessFault(Exception):
    """The load harness failed at a level (not the server): the search stops and writes no answer, so
    the candidate is incomplete and measured again on resume."""


def level_label(level: float, *, integer: bool) -> str:
    """A load level as a directory name: ``c16`` (concurrency) or ``r2.5`` (requests/s)."""
    return f"c{int(level)}" if integer else f"r{level:g}"


def level_workload(wl: WorkloadConfig, cap: CapacityConfig, level: float) -> WorkloadConfig:
    """The workload at one load level: rate or concurrency set, request count from the level.

    Closed loop: ``waves`` x concurrency requests; open loop: rate x ``duration_s``; at least
    ``min_requests``. Warmup is ``capacity.warmup_requests`` (the server is warm from the profiles).
    """
    if wl.mode == "open":
        n = max(cap.min_requests, math.ceil(level * cap.duration_s))
        return replace(wl, rate=level, num_requests=n, warmup_requests=cap.warmup_requests, repeats=1)
    concurrency = int(level)
    n = max(cap.min_requests, math.ceil(concurrency * cap.waves))
    return replace(
        wl, concurrency=concurrency, num_requests=n, warmup_requests=cap.warmup_requests, repeats=1
    )


def _point(summary: ProfileSummary, level: float, attempt: int, file: str) -> CapacityPoint:
    slo = summary.slo
    assert slo is not None  # the sweep passes its SLO to every run
    tpot = summary.tpot.p50 if summary.tpot is not None else None
    lag = summary.client.dispatch_lag_p99_s
    # Each request's own lateness added back (the records' seconds, as the margin's); a summary without it
    # (older, or no record late) falls back to its p99 lag added to every request.
    undone = slo.margin_lag_undone if slo.margin_lag_undone is not None else margin_lag_undone(slo, lag)
    return CapacityPoint(
        level=level,
        attempt=attempt,
        summary_file=file,
        met=slo.met,
        margin=slo.margin,
        attainment=slo.attainment,
        goodput_rps=slo.goodput_rps,
        goodput_tps=slo.goodput_tps,
        output_tps=summary.output_tps,
        tps_per_user=1 / tpot if tpot else None,
        client_lag_s=lag,
        margin_lag_undone=undone,
    )


@dataclass(frozen=True)
class SearchSite:
    """Where one capacity search of a launch goes: its directory, how its lines name it, and how many of
    the launch's own runs of the capacity profile (``<profile>/r1..``) a level may reuse."""

    out: Path  # candidates/<name>/, or the baseline's block directory
    label: str  # "tp4_dp2", "baseline (block after tp4_dp2)"
    own_runs: int  # runs of the capacity profile the launch measured (0: none to reuse)


def candidate_site(ctx: SweepContext, name: str) -> SearchSite:
    """A candidate's (or the opening baseline's) search: its directory and its own repeats of the profile."""
    cap = ctx.cfg.capacity
    assert cap.profile is not None
    own = ctx.repeats_of(cap.profile) if cap.profile in ctx.cfg.run.profiles else 0
    return SearchSite(ctx.candidate_dir(name), name, own)


def sweep_run(
    ctx: SweepContext, site: SearchSite, level: float, attempt: int
) -> tuple[ProfileSummary, str] | None:
    """The launch's own repeat ``attempt`` of the capacity profile, reused as a run of ``level`` when that
    is the profile's configured rate or concurrency and it measured the requests the level would send
    (its warmup may differ: the server is warm either way). None when there is nothing to reuse."""
    cap = ctx.cfg.capacity
    assert cap.profile is not None
    wl = ctx.cfg.workloads[cap.profile]
    own = wl.rate if wl.mode == "open" else wl.concurrency
    if own is None or float(own) != level:
        return None
    measured, _ = scaled_counts(wl, ctx.cfg.run.scale)
    if measured != level_workload(wl, cap, level).num_requests or attempt > site.own_runs:
        return None
    rel = f"{repeat_name(cap.profile, attempt)}/{SUMMARY_FILE}"
    path = site.out / rel
    if not path.exists():
        return None
    summary = read_model(path, ProfileSummary)
    return None if summary.slo is None or summary.interrupted else (summary, rel)


def run_capacity(
    ctx: SweepContext, session: ServerSession, candidate: CandidateConfig, site: SearchSite | None = None
) -> list[WatchEvent]:
    """Search the candidate's capacity at the SLO (when ``capacity.profile`` is set); write capacity.json
    (into ``site``: default the candidate's directory, :func:`candidate_site`).

    Returns what the watcher saw; a lost server ends the search early (the result says so); a fault of
    the load harness ends it without an answer (the candidate is incomplete, never the sweep's end).
    """
    cap = ctx.cfg.capacity
    if cap.profile is None:
        return []
    wl = ctx.cfg.workloads[cap.profile]
    integer = wl.mode != "open"
    site = site or candidate_site(ctx, candidate.name)
    out = site.out
    points: list[CapacityPoint] = []
    events: list[WatchEvent] = []

    def probe(level: float, attempt: int) -> float:
        label = level_label(level, integer=integer)
        reused = sweep_run(ctx, site, level, attempt)
        if reused is not None:
            summary, file = reused
        else:
            rel, run = capacity_run_root(label, attempt), LaunchPaths(out).capacity_run(label, attempt)
            seen = measure_profile(
                ctx,
                session,
                profile=f"{cap.profile}@{label}",
                repeat=attempt,
                out=run.root,
                workload=level_workload(wl, cap, level),
                load_level=level,
            )
            events.extend(seen)
            if server_lost(seen):
                raise _ServerLost(f"the server was lost at {label}")
            if any(e.kind == "harness" for e in seen):
                raise _HarnessFault(f"the load harness failed at {label}")
            summary, file = read_model(run.summary, ProfileSummary), f"{rel}/{SUMMARY_FILE}"
        point = _point(summary, level, attempt, file)
        points.append(point)
        ctx.say(
            f"{site.label}: capacity {label}: SLO {'held' if point.met else 'missed'} "
            f"(margin {point.margin:.2f}, attainment {point.attainment:.0%})"
            + (f", reused {file}" if reused is not None else "")
        )
        return point.margin

    settings = SearchSettings.from_config(cap, integer=integer)
    notes: list[str] = []
    try:
        found = search(probe, settings)
    except _ServerLost as exc:
        notes.append(f"search stopped: {exc}")
        found = _partial(points)
    except _HarnessFault as exc:
        # Not evidence about the server: no capacity.json (the run.json's harness event and the missing
        # answer make the candidate incomplete; a resume measures it again), and the sweep goes on.
        ctx.say(f"{site.label}: capacity search stopped: {exc}; measured again on resume")
        return events
    result = capacity_result(ctx, candidate=candidate, wl=wl, found=found, points=points, notes=notes)
    write_model(LaunchPaths(out).capacity, result)
    ctx.say(capacity_line(result, label=site.label))
    return events


def _partial(points: list[CapacityPoint]) -> SearchResult:
    """What the measured points say when the search could not finish."""
    held = [p.level for p in points if p.met]
    failed = [p.level for p in points if not p.met]
    low = max(held, default=None)
    high = min((lv for lv in failed if low is None or lv > low), default=None)
    return SearchResult(low=low, high=high, decided={p.level: p.met for p in points})


def capacity_result(
    ctx: SweepContext,
    *,
    candidate: CandidateConfig,
    wl: WorkloadConfig,
    found: SearchResult,
    points: list[CapacityPoint],
    notes: list[str],
) -> CapacityResult:
    cap = ctx.cfg.capacity
    integer = wl.mode != "open"
    notes += search_notes(found, [p.level for p in points], cap)
    return found.record(
        points,
        candidate=candidate.name,
        profile=wl.name,
        slo=ctx.cfg.slo.name,
        slo_text=slo_text(ctx.cfg.slo),
        resolution=cap.resolution,
        gpus=gpus_held(candidate.tensor_parallel_size, candidate.data_parallel_size, candidate.extra_args),
        integer=integer,
        notes=notes,
    )


def search_notes(found: SearchResult, levels: list[float], cap: CapacityConfig) -> list[str]:
    """What the search's answer is and is not, in words: a bound the search never measured beyond is said
    as such (the highest or lowest level it ran), and so is a budget that ran out before a bound.

    >>> s = SearchResult(low=16.0, high=None, decided={4.0: True, 8.0: True, 16.0: True})
    >>> note = search_notes(s, [4.0, 8.0, 16.0], CapacityConfig(start=4, max_level=32, max_points=3))[0]
    >>> note.startswith("the SLO held at every level tried, up to 16; capacity.max_points (3)"), note[-40:]
    (True, 'the capacity is ≥ 16, not known above it')
    """
    notes: list[str] = []
    if found.stopped_by_budget:
        notes.append(f"capacity.max_points ({cap.max_points}) ran out before the resolution was reached")
    if not levels:
        return notes
    top, bottom = max(levels), min(levels)
    if found.low is None:
        where = (
            f"failed even at capacity.min_level ({cap.min_level:g})"
            if bottom <= cap.min_level
            else f"held at no level tried, down to {bottom:g}; capacity.max_points ({cap.max_points}) ran "
            f"out before capacity.min_level ({cap.min_level:g}) was tried"
        )
        fix = (
            "a looser SLO or a lower capacity.min_level"
            if bottom <= cap.min_level
            else "more capacity.max_points or a lower capacity.start"
        )
        notes.append(f"the SLO {where}: the capacity is < {bottom:g}; {fix} measures it")
    elif found.high is None:
        where = (
            f"at capacity.max_level ({top:g})"
            if top >= cap.max_level
            else f"at every level tried, up to {top:g}; capacity.max_points ({cap.max_points}) ran out "
            f"before capacity.max_level ({cap.max_level:g}) was tried"
        )
        notes.append(f"the SLO held {where}: the capacity is ≥ {top:g}, not known above it")
    return notes


def capacity_line(result: CapacityResult, *, label: str | None = None) -> str:
    """One line: ``baseline: capacity 96 concurrent [96, 108) at SLO interactive (...), 9 runs``; a bound
    the search never measured beyond reads ``≥ 16 concurrent`` or ``< 2 concurrent``."""
    lowest = min((p.level for p in result.points), default=None)
    value = fmt_capacity(result.capacity, result.high, result.unit, lowest)
    return (
        f"{label or result.candidate}: capacity {value} at SLO {result.slo} ({result.slo_text}) on "
        f"{result.profile}, {len(result.points)} runs"
    )

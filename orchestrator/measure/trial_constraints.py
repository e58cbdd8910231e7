"""A search trial's constraints: the gates' requirements, ruled on cheaply at the trial's screen.

Pipeline position: inside a trial's job (:func:`orchestrator.measure.trial.measure_trial`), after its
screening run and before the pruner is asked. The gates judge every profile, not only the one the search
optimises; a point they would refuse is not worth the full measurement. So each started trial runs one
repeat of each constraint profile (:func:`constraint_profiles`: the serial profile and the accepted
profiles the sweep measures) at its own load, and each gated requirement becomes a violation size
(:func:`violations`, pure): ``> 0`` broken, by that fraction beyond its limit; ``<= 0`` met. The limits
are the gates' own (``gates.latency_tolerance``, ``gates.throughput_tolerance``, no failed request),
against the medians of the baseline's opening runs of the same profile, widened by the spread of those
runs, the load client's lag and its timing resolution (one run is a screen, not a verdict: it refuses
what is beyond the noise; the confirmation judges the survivor with every repeat and interval).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median

from contracts.layout import summary_glob
from contracts.results import ProfileSummary, read_model
from contracts.schema import GatesConfig, GauntletConfig


@dataclass(frozen=True)
class Requirement:
    """One gated requirement of one profile: the figure, which way is better, and its allowed change."""

    #: e.g. "prefill_10k TTFT": the constraint's name (Optuna's key, the record's, the console's).
    name: str
    profile: str
    #: ``ttft`` / ``e2e`` (median seconds, lower is better), ``tps`` (output tokens/s, higher is better),
    #: ``failed`` (share of requests that failed: must be 0).
    figure: str


#: Wall seconds below which a latency difference is not ruled on: a client's timing of a token is good to
#: a few milliseconds on a shared machine (the simulator coalesces a stream's chunks within 5 ms,
#: ``sim-coalesce-ms``); scaled to host seconds by the run's ``time_scale`` (1 on a real host: 5 ms).
RESOLUTION_S = 0.005


def constraint_profiles(cfg: GauntletConfig) -> list[str]:
    """The profiles a trial is screened on besides its objective's: the serial profile and every accepted
    profile, those the sweep runs (``run.profiles``), in that order, once each."""
    gates = cfg.gates
    wanted = [gates.serial_profile, *gates.accepted_profiles]
    out: list[str] = []
    for name in wanted:
        if name in cfg.run.profiles and name in cfg.workloads and name not in out:
            out.append(name)
    return out


def requirements(profiles: Sequence[str], gates: GatesConfig) -> list[Requirement]:
    """The requirements the gates put on ``profiles``: the serial profile's median TTFT and end-to-end
    latency (the latency gain gate refuses either worse beyond ``latency_tolerance``); a loaded profile's
    median TTFT and output tokens/s (the concurrency gate); every request of an accepted profile
    succeeding (the stability gate)."""
    out: list[Requirement] = []
    for profile in profiles:
        if profile == gates.serial_profile:
            out += [
                Requirement(f"{profile} TTFT", profile, "ttft"),
                Requirement(f"{profile} latency", profile, "e2e"),
            ]
            continue
        if profile in gates.loaded_profiles:
            out += [
                Requirement(f"{profile} TTFT", profile, "ttft"),
                Requirement(f"{profile} tokens/s", profile, "tps"),
            ]
        if profile in gates.accepted_profiles:
            out.append(Requirement(f"{profile} failed requests", profile, "failed"))
    return out


def _figure(summary: ProfileSummary, figure: str) -> float | None:
    if figure == "ttft":
        return summary.ttft.p50
    if figure == "e2e":
        return summary.e2e.p50
    if figure == "tps":
        return summary.output_tps
    return summary.failed / summary.num_requests if summary.num_requests else 1.0


def violation(
    req: Requirement, base: Sequence[ProfileSummary], cand: ProfileSummary, gates: GatesConfig
) -> float | None:
    """How far ``cand``'s run breaks ``req`` against the median of the baseline's runs ``base``, as a
    fraction beyond the limit (``> 0`` broken, ``<= 0`` met); None when the baseline has no figure. One
    run is ruled on with the benefit of the noise the baseline's own runs show (their median absolute
    deviation from their median: one run's typical distance, which one outlier does not widen), of the
    load client's lag (its p99, either side's) and of the client's timing resolution
    (:data:`RESOLUTION_S`): a screen refuses what lies beyond the noise."""
    mine = _figure(cand, req.figure)
    theirs = [v for v in (_figure(s, req.figure) for s in base) if v is not None and v > 0]
    if not theirs:
        return size_of(req.figure, mine, None, gates)
    mid = median(theirs)
    spread = (
        1 + median(abs(v - mid) for v in theirs) / mid
    )  # one run's typical distance, robust to an outlier
    lag = max([cand.client.dispatch_lag_p99_s, *(s.client.dispatch_lag_p99_s for s in base)])
    return size_of(req.figure, mine, mid, gates, spread=spread, lag_s=lag + RESOLUTION_S * cand.time_scale)


def size_of(
    figure: str,
    mine: float | None,
    theirs: float | None,
    gates: GatesConfig,
    *,
    spread: float = 1.0,
    lag_s: float = 0.0,
) -> float | None:
    """One requirement's violation size from the trial's figure ``mine`` and the baseline's ``theirs``
    (its median): the share of failed requests itself, else the ratio's excess beyond the gates' limit
    widened by ``spread`` (1 + the baseline's runs' relative median absolute deviation), a latency less
    the client's lag ``lag_s`` (seconds)."""
    if figure == "failed":
        return mine if mine is not None and mine > 0 else 0.0
    if theirs is None or theirs <= 0:
        return None
    if mine is None:
        return 1.0  # the run has no such figure (nothing completed): as broken as it gets
    spread = max(1.0, spread)
    if figure == "tps":
        return excess(mine / theirs, (1 - gates.throughput_tolerance) / spread, lower=False)
    return excess(max(0.0, mine - lag_s) / theirs, (1 + gates.latency_tolerance) * spread, lower=True)


def excess(ratio: float, limit: float, *, lower: bool) -> float:
    """How far ``ratio`` lies beyond ``limit``, as a fraction of it (``> 0`` beyond: broken). ``lower``:
    lower is better, the limit is an upper bound.

    >>> round(excess(1.18, 1.05, lower=True), 3)
    0.124
    """
    if lower:
        return ratio / limit - 1
    return limit / ratio - 1 if ratio > 0 else 1.0


def violations(
    reqs: Sequence[Requirement],
    base: Mapping[str, Sequence[ProfileSummary]],
    cand: Mapping[str, ProfileSummary],
    gates: GatesConfig,
) -> dict[str, float]:
    """Every requirement's violation size where both sides have its profile: rounded to 4 places, and 0
    (at the limit, met) within 0.05% of it, which the console's one decimal would print as +0.0%."""
    out: dict[str, float] = {}
    for req in reqs:
        if req.profile not in cand or not base.get(req.profile):
            continue
        size = violation(req, base[req.profile], cand[req.profile], gates)
        if size is not None:
            out[req.name] = round(size, 4) if abs(size) >= 0.0005 else 0.0  # within 0.05%: at the limit
    return out


def broken(sizes: Mapping[str, float]) -> dict[str, float]:
    """The violated constraints (size > 0), worst first."""
    return dict(sorted(((k, v) for k, v in sizes.items() if v > 0), key=lambda kv: -kv[1]))


def describe(sizes: Mapping[str, float]) -> str:
    """The broken constraints in words: ``prefill_10k TTFT +12.4% beyond its limit, ...``."""
    return ", ".join(f"{name} {size:+.1%} beyond its limit" for name, size in broken(sizes).items())


def baseline_runs(launch_dir: Path, profiles: Sequence[str]) -> dict[str, list[ProfileSummary]]:
    """The baseline's opening runs of ``profiles`` (every repeat's summary under its launch directory)."""
    out: dict[str, list[ProfileSummary]] = {}
    for profile in profiles:
        paths = sorted((launch_dir / profile).glob(summary_glob()))
        out[profile] = [read_model(p, ProfileSummary) for p in paths]
    return out

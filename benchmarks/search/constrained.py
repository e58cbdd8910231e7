"""The constrained truth of a search space: the best point the gates would accept, by brute force.

Pipeline position: above :mod:`benchmarks.search.surface` (every point's capacity), under
:mod:`benchmarks.search.runner` (a trial's screen draws its constraint figures from here, with noise) and
the drivers (``benchmarks/search_quality.py``, ``benchmarks/search_constraints.py``). For every point that
starts, the figures a trial's screen rules on (:mod:`orchestrator.measure.trial_constraints`: the serial
profile's median TTFT and end-to-end latency, each accepted profile's median TTFT, output tokens/s and
failed requests) are replayed in virtual time (:func:`launch.sim.replay.replay_closed_loop`) with the
experiment's workloads, against the baseline's. A point is *acceptable* when no requirement is broken
(:func:`~orchestrator.measure.trial_constraints.broken` of the sizes
:func:`~orchestrator.measure.trial_constraints.size_of` gives at the gates' own limits, noise-free: no
spread, no lag). The search's own rule (:func:`screen_sizes`) is the product's
:func:`~orchestrator.measure.trial_constraints.screen` on noisy runs, as a sweep rules on them.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from benchmarks.search.scoring import point_key
from benchmarks.search.surface import Surface, Truth
from contracts.results import ClientHealth, ProfileSummary, Stats
from contracts.schema import GatesConfig, GauntletConfig, WorkloadConfig
from launch.sim.model import EngineConfig
from launch.sim.replay import FrontEnd, ReplayRequest, replay_closed_loop
from orchestrator.measure.trial_constraints import (
    Requirement,
    broken,
    constraint_profiles,
    requirements,
    screened,
    size_of,
)

#: One run's figures of one profile: median TTFT and e2e (host s), output tokens/s, share failed.
Figures = dict[str, float | None]

#: The launched simulator's front end at the demo's 20x (virtual seconds a request, a prompt token:
#: :class:`launch.sim.replay.FrontEnd`): its own handling of a request (parse, count the prompt's tokens)
#: is host time, 20x in virtual time, so a wave reaches its engine one request at a time. Measured with
#: ``benchmarks/wave_arrival.py`` on the demo's baseline (2-core x86_64 box, 2026-12-07): 1.9 ms apart in
#: decode_heavy's 128 wave, 15 ms in prefill_10k's 64 wave of 10K-token prompts. With data parallelism in
#: lockstep the first step then holds one replica's work: prefill_10k's median TTFT is 9.59 s for the
#: baseline where an instant wave gives 9.39 s, 10.22 s for the 8K budgets (9.49 s), as launched runs read.
LAUNCHED_FRONT_END = (0.0019, 1.3e-6)


def figures(
    surface: Surface,
    cfg: EngineConfig,
    wl: WorkloadConfig,
    front_end: tuple[float, float] = LAUNCHED_FRONT_END,
) -> Figures:
    """One run of workload ``wl`` on engine ``cfg``, replayed: median TTFT and e2e (s), output tokens/s,
    share of failed requests. ``front_end`` is the server's (seconds a request, seconds a prompt token:
    :class:`launch.sim.replay.FrontEnd`)."""
    request = ReplayRequest(
        prompt_tokens=int(wl.prompt_tokens.mean), max_tokens=int(wl.output_tokens.mean), ignore_eos=True
    )
    result = replay_closed_loop(
        surface.profile,
        cfg,
        [request] * wl.num_requests,
        int(wl.concurrency or 1),
        front_end=FrontEnd(*front_end),
    )
    done = [r for r in result.records if r.end is not None and r.ttft is not None]
    if not done:
        return {"ttft": None, "e2e": None, "tps": None, "failed": 1.0}
    span = max(r.sent + (r.end or 0.0) for r in done) - min(r.sent for r in done)
    tokens = sum(r.completion_tokens for r in done)
    return {
        "ttft": median(r.ttft or 0.0 for r in done),
        "e2e": median(r.end or 0.0 for r in done),
        "tps": tokens / span if span > 0 else None,
        "failed": 1 - len(done) / len(result.records),
    }


def truth_sizes(
    reqs: Sequence[Requirement],
    mine: Mapping[str, Figures],
    base: Mapping[str, Figures],
    gates: GatesConfig,
) -> dict[str, float]:
    """Each requirement's violation size at the gates' own limits, noise-free (no spread, no lag)."""
    out: dict[str, float] = {}
    for req in reqs:
        size = size_of(req.figure, mine[req.profile][req.figure], base[req.profile][req.figure], gates)
        if size is not None:
            out[req.name] = round(size, 4)
    return out


def acceptable(sizes: Mapping[str, float]) -> bool:
    """Whether the gates' requirements all hold (none broken: every size <= 0).

    >>> acceptable({"serial latency": 0.0, "short TTFT": -0.2}), acceptable({"serial latency": 0.144})
    (True, False)
    """
    return not broken(sizes)


@dataclass
class Constrained:
    """Every point that starts with its capacity and its requirements' sizes, and the baseline's figures."""

    key: str
    base_capacity: int
    base: dict[str, Figures]
    #: {"point", "capacity", "sizes", "figures"} for every point that starts.
    rows: list[dict[str, Any]] = field(default_factory=list)

    def row_of(self, point: Mapping[str, Any]) -> dict[str, Any] | None:
        """The point's row (None: the point does not start)."""
        return self._index().get(point_key(point))

    def _index(self) -> dict[str, dict[str, Any]]:
        index: dict[str, dict[str, Any]] | None = getattr(self, "_by_key", None)
        if index is None:
            index = {point_key(r["point"]): r for r in self.rows}
            object.__setattr__(self, "_by_key", index)
        return index

    def accepted_capacity(self, point: Mapping[str, Any]) -> float | None:
        """The point's capacity when the gates would accept it; None when it does not start or breaks a
        requirement (the gates would refuse it: no answer a user can run)."""
        row = self.row_of(point)
        if row is None or not acceptable(row["sizes"]):
            return None
        return float(row["capacity"])


def constrained_best(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The acceptable row of the highest capacity (the first in the table's order among equals); None when
    no point is acceptable.

    >>> rows = [{"point": {"k": 3}, "capacity": 216, "sizes": {"serial latency": 0.144}},
    ...         {"point": {"k": 5}, "capacity": 193, "sizes": {"serial latency": -0.01}}]
    >>> constrained_best(rows)["point"]
    {'k': 5}
    """
    best: Mapping[str, Any] | None = None
    for row in rows:
        if acceptable(row["sizes"]) and (best is None or float(row["capacity"]) > float(best["capacity"])):
            best = row
    return best


def summary_of(figs: Figures, profile: str, time_scale: float) -> ProfileSummary:
    """One run's figures as the summary :func:`~orchestrator.measure.trial_constraints.screen` reads
    (the fields it reads; the others are not built)."""

    def stats(value: float | None) -> Stats:
        return Stats.model_construct(n=1, mean=value, p50=value, p90=value, p99=value)

    failed = figs["failed"] or 0.0
    return ProfileSummary.model_construct(
        profile=profile,
        time_scale=time_scale,
        num_requests=100,
        failed=round(100 * failed),
        output_tps=figs["tps"] or 0.0,
        ttft=stats(figs["ttft"]),
        e2e=stats(figs["e2e"]),
        client=ClientHealth.model_construct(dispatch_lag_p99_s=0.0),
    )


def noisy(figs: Figures, rng: random.Random, noise: float) -> Figures:
    """One measured run of figures ``figs``: each latency and rate times ``exp(N(0, noise))``."""
    out = dict(figs)
    for name in ("ttft", "e2e", "tps"):
        value = out[name]
        if value is not None:
            out[name] = value * math.exp(rng.gauss(0.0, noise))
    return out


def baseline_runs(table: Constrained, *, seed: int, noise: float, repeats: int) -> dict[str, list[Figures]]:
    """The baseline's opening runs of each constraint profile as seed ``seed`` measures them: ``repeats``
    noisy runs of its figures, seeded per seed, profile and run (every method and script alike)."""
    return {
        p: [noisy(f, random.Random(f"{seed}:baseline:{p}:{k}"), noise) for k in range(repeats)]
        for p, f in table.base.items()
    }


def screen_sizes(
    cfg: GauntletConfig,
    mine: Callable[[str, int], Figures],
    base_runs: Mapping[str, Sequence[Figures]],
) -> dict[str, float]:
    """The search's own rule on the screening runs of each constraint profile (``mine(profile, attempt)``:
    one run's figures, attempt 0 first) against the baseline's opening runs (``base_runs``):
    :func:`~orchestrator.measure.trial_constraints.screened`, the product's, with its noise band, a second
    run of a profile only where a ruling was within noise of its limit."""
    scale = cfg.host.time_scale
    profiles = list(base_runs)
    base = {p: [summary_of(f, p, scale) for f in base_runs[p]] for p in profiles}
    sizes = screened(
        requirements(profiles, cfg.gates),
        base,
        profiles,
        lambda p, repeat: summary_of(mine(p, repeat - 1), p, scale),
        cfg.gates,
    )
    assert sizes is not None  # every replayed run completes
    return sizes


def constrained_for(
    cfg: GauntletConfig,
    truth: Truth,
    surface: Surface,
    to_engine: Callable[[Mapping[str, Any]], EngineConfig | str],
    base_engine: EngineConfig,
    *,
    cache: Path,
    say: Callable[[str], None],
) -> Constrained:
    """Every starting point's constraint figures and sizes (cached beside the capacity table)."""
    profiles = constraint_profiles(cfg)
    key = hashlib.sha256(
        json.dumps(
            [
                truth.setting,
                truth.space,
                profiles,
                [asdict(cfg.workloads[p]) for p in profiles],
                asdict(cfg.gates),
                LAUNCHED_FRONT_END,
            ],
            sort_keys=True,
            default=str,
        ).encode()
    ).hexdigest()[:16]
    assert cfg.search is not None
    path = cache / f"constrained-{cfg.search.name}-{key}.json"
    if path.exists():
        data = json.loads(path.read_text())
        if data.get("key") == key:
            return Constrained(**data)
    say(f"constrained truth: the screen's figures of every point that starts (cached in {path})")
    reqs = requirements(profiles, cfg.gates)
    base = {p: figures(surface, base_engine, cfg.workloads[p]) for p in profiles}
    out = Constrained(key=key, base_capacity=surface.capacity(base_engine), base=base)
    for row in truth.points:
        if row["capacity"] is None:
            continue
        engine = to_engine(row["point"])
        assert not isinstance(engine, str)
        mine = {p: figures(surface, engine, cfg.workloads[p]) for p in profiles}
        sizes = truth_sizes(reqs, mine, base, cfg.gates)
        out.rows.append({"point": row["point"], "capacity": row["capacity"], "sizes": sizes, "figures": mine})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(out), indent=1, default=str) + "\n")
    return out

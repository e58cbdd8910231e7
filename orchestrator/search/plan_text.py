"""``plan`` with a search selected: the space's size, what was pruned and why, the budget, the estimated
wall time of its server starts.

Pipeline position: called by ``plan`` (:mod:`orchestrator.plan`) once the search's checks
(:mod:`.checks`) passed and its space was pruned (:mod:`.prune`). Pure over its inputs, except
:func:`recorded_startup`, which reads the latest sweep's baseline start.
"""

from __future__ import annotations

from pathlib import Path

from contracts.errors import GauntletError
from contracts.files import read_model
from contracts.layout import SweepPaths, previous_latest
from contracts.results import CandidateRun
from contracts.schema import GauntletConfig
from contracts.search import SearchConfig, Space
from orchestrator.search.budget import kept_words
from orchestrator.search.coverage import fewest_launches
from orchestrator.search.memory import UTILIZATION
from orchestrator.search.nodes import NodeBaselines
from orchestrator.search.prune import Pruned


def estimated_wall_s(search: SearchConfig, startup_s: float) -> float:
    """Server starts the search may cost, in seconds: each launch of its budget at ``startup_s`` (the
    budget holds the confirmations' launches and the node baselines: :mod:`.budget`); the load runs come
    on top."""
    return search.max_launches * startup_s


def format_search_plan(
    cfg: GauntletConfig,
    space: Space,
    pruned: Pruned,
    *,
    flags: str,
    startup: tuple[float, str],
    nodes: NodeBaselines | None = None,
) -> str:
    """``plan`` with a search selected: the space's size, what was pruned and why, the budget and the
    launches it keeps for the confirmations (as the run loop charges them, with ``nodes``' baselines where
    trials run on nodes of their own: :func:`.budget.kept_words`), the estimated wall time of its server
    starts."""
    search = cfg.search
    assert search is not None
    size = space.size
    dims = " x ".join(
        f"{d.name} ({len(d.values)})" if d.finite else f"{d.name} (interval)" for d in space.dimensions
    )
    lines = [
        f"search {search.name}: {size if size is not None else 'a continuous'} point(s): {dims}",
        f"  objective: {search.objective}{' vs serial latency (Pareto front)' if search.pareto else ''}; "
        f"sampler {search.sampler} (seed {search.seed}), pruner {search.pruner}",
    ]
    if pruned.pruned:
        lines.append(f"  pruned before anything starts: {len(pruned.pruned)}")
        for item in pruned.pruned[:12]:
            point = ", ".join(f"{k}={v}" for k, v in item.params.items())
            lines.append(f"    {point}: {item.why}")
        if len(pruned.pruned) > 12:
            lines.append(f"    ... and {len(pruned.pruned) - 12} more (listed in search/trials.json)")
    else:
        lines.append("  pruned before anything starts: none")
    if pruned.valid is not None:
        lines.append(f"  left to search: {pruned.valid} point(s)")
    lines.append(f"  {flags}")
    hours = f", {search.max_gpu_hours:g} GPU-hours" if search.max_gpu_hours is not None else ""
    kept = kept_words(search, cfg.run.interleave, nodes)
    lines.append(
        f"  budget: {search.max_launches} launches{', ' + kept if kept else ''}{hours}; stops after "
        f"{search.stall_trials} trials measured fully without a {search.min_improvement:.0%} better estimate"
    )
    lines.extend(_failure_lines(search, pruned.space))
    startup_s, source = startup
    wall = estimated_wall_s(search, startup_s)
    lines.append(
        f"  estimated wall time of its server starts: {_duration(wall)} ({search.max_launches} launches, "
        f"the confirmations' included, at {startup_s:g} s each, from {source}; the load runs come on top)"
    )
    return "\n".join(lines) + "\n"


def _failure_lines(search: SearchConfig, space: Space) -> list[str]:
    """What the stall waits for (every listed value tried, :mod:`.coverage`) and whether the budget can
    pay for it; the start probe of each layout's utilisation (:mod:`.memory`)."""
    out: list[str] = []
    need = fewest_launches(space)
    if need and not search.pareto:
        longest = max((d for d in space.dimensions if d.finite), key=lambda d: len(d.values))
        if search.max_launches < need:
            out.append(
                f"  the budget of {search.max_launches} launches cannot try every value of {longest.name} "
                f"({need} values): the search cannot stall, it stops on its budget"
            )
        else:
            out.append(
                f"  a stall waits until every listed value has been tried (at least {need} launches: "
                f"{longest.name} has {need} values)"
            )
    util = next((d for d in space.dimensions if d.name == UTILIZATION), None)
    if util is not None and util.finite and len(util.values) > 1:
        out.append(
            f"  start probe: each layout launched at its highest {UTILIZATION} first, one value down at a "
            "time until one starts; higher values of a layout that ran out of memory are not launched"
        )
    return out


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def startup_estimate(cfg: GauntletConfig, measured: float | None = None) -> tuple[float, str]:
    """Seconds one server start takes on the host, and where the figure comes from: ``measured`` (the
    baseline's last start on this host, from the latest sweep), else the simulator's configured startup,
    else the host's startup bound (``host.startup_timeout_s``: an upper bound)."""
    if measured is not None:
        return measured, "the baseline's start in the latest sweep"
    if cfg.host.kind == "sim":
        args = cfg.host.sim_args
        seconds = float(args.get("sim-startup-s", 1.0)) + float(args.get("sim-slow-start-s", 0.0))
        return seconds, "the simulator's sim-startup-s"
    return cfg.host.startup_timeout_s, "host.startup_timeout_s, an upper bound"


def recorded_startup(cfg: GauntletConfig) -> float | None:
    """The baseline's time to ready in the latest sweep of ``run.sweeps_dir`` on the same host, or None."""
    previous = previous_latest(Path(cfg.run.sweeps_dir))
    if previous is None:
        return None
    path = SweepPaths(previous).candidate(cfg.baseline.name).run_file
    try:
        run = read_model(path, CandidateRun)
    except (GauntletError, OSError):
        return None
    same_host = run.host == cfg.host.name
    return run.startup.time_to_ready_s if same_host and run.startup.ok else None

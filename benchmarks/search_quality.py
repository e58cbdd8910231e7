"""Search quality (issue 34): how often the search's winner is within 5% of the best capacity, at what cost.

**Brute force, once.** Every point of a search space (``conf/search/<name>.yaml``, composed with the
experiment) is a candidate: the baseline with the point's fields
(:func:`orchestrator.search.point.candidate_at`), rendered to its command line and read back by the
simulator's own parser (:func:`launch.sim.versus.engine_config`). A point the simulator refuses at
startup (:func:`launch.sim.model.check_startup`) or the space's pruning refuses has no capacity. Every
other point gets its exact capacity at the SLO: the capacity profile replayed in virtual time
(:func:`launch.sim.replay.replay_closed_loop`) at whole concurrency levels, doubled from ``min_level``
until the SLO fails and bisected to one request. The table is written to a JSON file keyed by what it
depends on (profile, workload, SLO, capacity settings, space), so every seed and every later run reuses it.

**The search, per seed.** S1's :class:`orchestrator.search.loop.SearchRun` runs as in a sweep (Optuna,
its pruner, its budget and stall rule, its record) with one seam changed: a trial's job is measured
in-process on the same engine model instead of by a launched simulator. A trial starts (or is
infeasible), is screened at the load level (the baseline's capacity, as ``make demo-search`` does), and,
unless the pruner stops it, gets the capacity search of :mod:`orchestrator.measure.capacity_search` with
the experiment's settings; each level's SLO margin is the replay's, times ``exp(N(0, noise))`` (seeded),
because a measured margin is never exact. The winner is judged by its brute-force capacity.

    .venv/bin/python benchmarks/search_quality.py --seeds 10
    .venv/bin/python benchmarks/search_quality.py --truth-only     # the brute force and its best points

Its parts: ``benchmarks/search/`` (``scoring``, ``surface``, ``runner``). Results, command, machine and
date: docs/measurements/search-quality.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.search.runner import compose, run_seed, truth_for
from benchmarks.search.scoring import num, point_text, render_table, summarize
from benchmarks.search.surface import DEFAULT_CACHE, best_by_dimension, best_points


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", type=int, default=10, help="search seeds (0..N-1)")
    parser.add_argument("--noise", type=float, default=0.05, help="sd of a measured margin's log noise")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the brute force is kept")
    parser.add_argument("--truth-only", action="store_true", help="the brute force and its best points only")
    parser.add_argument(
        "overrides", nargs="*", default=["+experiment=demo_search"], help="Hydra overrides (the experiment)"
    )
    args = parser.parse_args(argv)
    cfg = compose(args.overrides)
    if cfg.search is None:
        parser.error("the overrides select no search (add search=NAME)")
    truth, surface = truth_for(cfg, args.cache, say=print)
    started = sum(1 for r in truth.points if r["capacity"] is not None)
    print(f"space: {len(truth.points)} points, {started} start; best capacity {truth.best:g}")
    for row in best_points(truth):
        print(f"  {row['capacity']:>5}  {point_text(row['point'])}")
    for name, values in best_by_dimension(truth).items():
        print(f"  best at each {name}: " + ", ".join(f"{v} -> {num(c)}" for v, c in values.items()))
    if args.truth_only:
        return 0
    runs = [run_seed(cfg, truth, surface, seed=s, noise=args.noise, say=print) for s in range(args.seeds)]
    summary = summarize(runs, truth.best, len(truth.points))
    print(render_table(runs, summary))
    return 0 if summary.goal_met else 1


if __name__ == "__main__":
    raise SystemExit(main())

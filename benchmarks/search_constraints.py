"""The constrained truth of a search space (issue 43 item 3): the best point the gates would accept.

**Brute force, once.** The capacity table of :mod:`benchmarks.search.surface` (every point's exact
capacity at the SLO on the simulator's surface, cached) plus, for every point that starts, the figures a
trial's screen rules on (:mod:`orchestrator.measure.trial_constraints`): the serial profile's median TTFT
and end-to-end latency, and each accepted profile's median TTFT and output tokens/s, each replayed in
virtual time (:func:`launch.sim.replay.replay_closed_loop`) with the experiment's workload, against the
baseline's. A point is *acceptable* when every violation size is <= 0 (the gates' own limits,
``gates.latency_tolerance`` and ``gates.throughput_tolerance``). The surface is noise-free: a
measured run is not, so a point near a limit may go either way in a sweep.

    .venv/bin/python benchmarks/search_constraints.py               # the demo's space
    .venv/bin/python benchmarks/search_constraints.py --top 15      # more of the table

Results, command, machine and date: docs/measurements/search-quality.md ("Constrained truth").
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.search.constrained import LAUNCHED_FRONT_END, figures, truth_sizes
from benchmarks.search.runner import compose, engine_of, space_of, truth_for
from benchmarks.search.scoring import point_text
from benchmarks.search.surface import DEFAULT_CACHE
from launch.sim.versus import engine_config
from launch.spec import render_spec
from orchestrator.measure.trial_constraints import (
    constraint_profiles,
    describe,
    requirements,
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the brute force is kept")
    parser.add_argument("--top", type=int, default=8, help="rows of each table")
    parser.add_argument(
        "--front-end",
        nargs=2,
        type=float,
        default=(LAUNCHED_FRONT_END[0] * 1e3, LAUNCHED_FRONT_END[1] * 1e6),
        metavar=("MS", "US_PER_TOKEN"),
        help="the server's front end: virtual ms a request, µs a prompt token (default: the launched "
        "simulator's at 20x; 0 0: an instant wave)",
    )
    parser.add_argument("overrides", nargs="*", default=["+experiment=demo_search"], help="Hydra overrides")
    args = parser.parse_args(argv)
    cfg = compose(args.overrides)
    if cfg.search is None:
        parser.error("the overrides select no search (add search=NAME)")
    start = time.perf_counter()
    front = (args.front_end[0] / 1e3, args.front_end[1] / 1e6)
    truth, surface = truth_for(cfg, args.cache, say=print)
    profiles = constraint_profiles(cfg)
    reqs = requirements(profiles, cfg.gates)
    base_engine = engine_config(render_spec(cfg.service, cfg.baseline, cfg.host))
    base = {p: figures(surface, base_engine, cfg.workloads[p], front) for p in profiles}
    base_capacity = surface.capacity(base_engine)
    _points, pruned = space_of(cfg)
    to_engine = engine_of(cfg, pruned)
    rows: list[dict[str, Any]] = []
    for row in truth.points:
        if row["capacity"] is None:
            continue
        engine = to_engine(row["point"])
        assert not isinstance(engine, str)
        mine = {p: figures(surface, engine, cfg.workloads[p], front) for p in profiles}
        sizes = truth_sizes(reqs, mine, base, cfg.gates)
        rows.append({"point": row["point"], "capacity": float(row["capacity"]), "sizes": sizes})
    print(f"baseline: capacity {base_capacity}; constraints: {', '.join(r.name for r in reqs)}")
    print(f"{len(rows)} of {len(truth.points)} points start; {time.perf_counter() - start:.0f} s")
    rows.sort(key=lambda r: -r["capacity"])
    ok = [r for r in rows if all(v <= 0 for v in r["sizes"].values())]
    print(f"\nbest capacity, any constraint ({len(rows)} points):")
    for r in rows[: args.top]:
        print(f"  {r['capacity']:>5g}  {point_text(r['point'])}  {describe(r['sizes']) or 'acceptable'}")
    print(f"\nbest capacity among acceptable points ({len(ok)} points):")
    for r in ok[: args.top]:
        ratios = {k: v for k, v in r["sizes"].items() if not k.endswith("failed requests")}
        worst = max(ratios.items(), key=lambda kv: kv[1])
        print(f"  {r['capacity']:>5g}  {point_text(r['point'])}  (closest: {worst[0]} {worst[1]:+.1%})")
    better = [r for r in ok if r["capacity"] > base_capacity * (1 + cfg.gates.capacity_tolerance)]
    verdict = (
        f"an acceptable point beats the baseline's capacity {base_capacity} by more than the capacity "
        f"tolerance: {len(better)} points, best {better[0]['capacity']:g} ({point_text(better[0]['point'])})"
        if better
        else f"no acceptable point beats the baseline's capacity {base_capacity} beyond its tolerance"
    )
    print(f"\nanswer: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

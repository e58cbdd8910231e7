"""Search quality (issue 43, item 9): how often the search's answer is within 5% of the best point the gates
would accept, at what cost, beside random search and a grid at the same budget.

**The truth, by brute force, once per space.** Every point of a space (:mod:`benchmarks.search.spaces`:
the demo's and two written before any tuning) is a candidate: the baseline with the point's fields
(:func:`orchestrator.search.point.candidate_at`), rendered to its command line and read back by the
simulator's own parser (:func:`launch.sim.versus.engine_config`). A point the simulator refuses at startup
or the space's pruning refuses has no capacity; every other point gets its exact capacity at the SLO
(:mod:`benchmarks.search.surface`) and the figures its screen rules on (:mod:`benchmarks.search.constrained`:
serial and accepted profiles replayed, each gated requirement's size at the gates' limits). The
unconstrained optimum is the best capacity; the constrained optimum, the truth, is the best capacity among
the points that break no requirement. Both tables are cached under ``sweeps/search-quality/``.

**The search, per seed and method.** The product's :class:`orchestrator.search.loop.SearchRun` runs as in
a sweep (Optuna, its pruner, its budget and stall rule, the screen's constraints, its record) with one seam
changed: a trial's job is measured in-process on the same engine model (:mod:`benchmarks.search.runner`),
each run's figures the replay's times ``exp(N(0, noise))``. TPE, random search and a grid
(:mod:`benchmarks.search.methods`) run with the same screen, confirmations, stall rule and noise; TPE and
random search are judged at every budget of a ladder (a quarter of the space's budget to its whole, and
random search on to twice it: :mod:`benchmarks.search.ladder`, one run per seed cut at each budget), the
grid at the space's budget. A seed's answer is judged by the constrained truth
(:mod:`benchmarks.search.goals`); the launches each method needs to find 90% of the seeds, and their
ratio, decide the goal "2x fewer launches than random search". The exit status is 1 when a goal fails
on a space. Seeds 10-49 are held out: the
figures reported come from them only; seeds 0-9 were used while developing.

    nice -n 19 .venv/bin/python benchmarks/search_quality.py --jobs 1             # every space, seeds 10-49
    .venv/bin/python benchmarks/search_quality.py --truth-only --spaces layout    # the optima only
    .venv/bin/python benchmarks/search_quality.py --seeds 0-9 --spaces demo --methods tpe

A launched-simulator run with failure under load: ``benchmarks/search_launched.py``. Results, command,
machine and date: docs/measurements/search-quality.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.search.constrained import Constrained, constrained_best, constrained_for
from benchmarks.search.goals import Answer, MethodSummary, by_method, goals, render, summarize_method
from benchmarks.search.ladder import budgets, ratio, reach
from benchmarks.search.runner import compose, engine_of, run_seed, space_of, truth_for
from benchmarks.search.scoring import point_text
from benchmarks.search.spaces import SPACES, with_space
from benchmarks.search.surface import DEFAULT_CACHE, Surface, Truth
from contracts.schema import GauntletConfig
from launch.sim.versus import engine_config
from launch.spec import render_spec
from orchestrator.search.budget import confirmation_launches, kept_launches

#: The methods run on every space, each once per seed at a multiple of the space's budget and judged at
#: every budget of the ladder up to it (random search to 2x: the goal's).
PLAN: tuple[tuple[str, int], ...] = (("tpe", 1), ("random", 2), ("grid", 1))


def seeds_of(text: str) -> list[int]:
    """``10-49`` or ``3,5,7`` as seeds.

    >>> seeds_of("10-12"), seeds_of("0,4")
    ([10, 11, 12], [0, 4])
    """
    if "-" in text:
        low, high = text.split("-", 1)
        return list(range(int(low), int(high) + 1))
    return [int(s) for s in text.split(",") if s]


def prepare(
    overrides: Sequence[str], space: str, cache: Path, say: Any
) -> tuple[GauntletConfig, Truth, Surface, Constrained]:
    """The space's experiment, its capacity table and its constrained table (cached)."""
    cfg = with_space(compose(overrides), SPACES[space])
    truth, surface = truth_for(cfg, cache, say=say)
    base_engine = engine_config(render_spec(cfg.service, cfg.baseline, cfg.host))
    table = constrained_for(
        cfg, truth, surface, engine_of(cfg, space_of(cfg)[1]), base_engine, cache=cache, say=say
    )
    return cfg, truth, surface, table


_PREPARED: dict[str, tuple[GauntletConfig, Truth, Surface, Constrained]] = {}


def one(job: tuple[tuple[str, ...], str, Path, str, int, int, float]) -> dict[int, Answer]:
    """One seed of one method at a multiple of the space's budget, judged at every budget of the ladder
    up to it (a worker process keeps its tables). The stall rule is the space's at every budget (the
    product's own rule, the same for every method), so a smaller budget's search is the larger's cut
    short (:mod:`benchmarks.search.ladder`)."""
    overrides, space, cache, method, times, seed, noise = job
    if space not in _PREPARED:
        _PREPARED[space] = prepare(overrides, space, cache, lambda _line: None)
    cfg, truth, surface, table = _PREPARED[space]
    assert cfg.search is not None
    budget = cfg.search.max_launches
    smallest = kept_launches(cfg.search, confirmation_launches(interleave=cfg.run.interleave)) + 1
    search = replace(cfg.search, max_launches=budget * times)
    return run_seed(
        replace(cfg, search=search),
        truth,
        surface,
        table,
        seed=seed,
        noise=noise,
        method=method,
        budgets=budgets(budget, times, smallest),
        say=print,
    )


def read_kept(path: Path) -> dict[tuple[str, str, int], dict[int, Answer]]:
    """The answers a run kept in its ``.jsonl`` (one line per seed and method), by (space, method, seed)."""
    out: dict[tuple[str, str, int], dict[int, Answer]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        answers = {int(b): Answer(**a) for b, a in row["answers"].items()}
        out[(row["space"], row["method"], int(row["seed"]))] = answers
    return out


def optima(truth: Truth, table: Constrained) -> list[str]:
    """The space's size, what starts, the unconstrained and the constrained optimum."""
    started = [r for r in truth.points if r["capacity"] is not None]
    ok = [r for r in table.rows if not any(v > 0 for v in r["sizes"].values())]
    best = constrained_best(table.rows)
    ties = [r for r in ok if best is not None and r["capacity"] == best["capacity"]]
    top = [r for r in started if r["capacity"] == truth.best]
    return [
        f"space: {len(truth.points)} points, {len(started)} start, {len(ok)} acceptable; baseline capacity "
        f"{table.base_capacity}",
        f"unconstrained optimum: {truth.best:g} ({len(top)} points, e.g. {point_text(top[0]['point'])})",
        "constrained optimum: "
        + (
            f"{float(best['capacity']):g} ({len(ties)} points, e.g. {point_text(best['point'])})"
            if best is not None
            else "none: no point is acceptable"
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--spaces", default=",".join(SPACES), help="names of the benchmark's spaces (SPACES)")
    parser.add_argument("--seeds", default="10-49", help="seeds: 10-49 (held out) or a list")
    parser.add_argument("--methods", default="", help="method[xN],...: e.g. tpe,randomx2 (default: all)")
    parser.add_argument("--noise", type=float, default=0.05, help="sd of a measured figure's log noise")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the brute force is kept")
    parser.add_argument("--json", type=Path, default=None, help="write every seed's answer here")
    parser.add_argument("--truth-only", action="store_true", help="the optima only")
    parser.add_argument(
        "--from-jsonl", type=Path, default=None, help="judge the seeds a run kept (its --json's .jsonl)"
    )
    parser.add_argument(
        "overrides", nargs="*", default=["+experiment=demo_search"], help="Hydra overrides (the experiment)"
    )
    args = parser.parse_args(argv)
    plan = PLAN
    if args.methods:
        plan = tuple(
            (m.split("x")[0], int(m.split("x")[1]) if "x" in m else 1) for m in args.methods.split(",")
        )
    seeds, spaces = seeds_of(args.seeds), [s for s in args.spaces.split(",") if s]
    kept = read_kept(args.from_jsonl) if args.from_jsonl is not None else None
    start, met, dump = time.perf_counter(), True, {}
    for space in spaces:
        cfg, truth, _surface, table = prepare(args.overrides, space, args.cache, print)
        assert cfg.search is not None
        print(f"\n## {space}: {SPACES[space].why}")
        print("\n".join(optima(truth, table)))
        best = constrained_best(table.rows)
        if args.truth_only or best is None:
            continue
        jobs = [  # seed by seed, TPE and random search first, then the grid: a run cut short leaves as
            # many seeds of the two the goal compares (--from-jsonl judges what it kept)
            (tuple(args.overrides), space, args.cache, method, times, seed, args.noise)
            for grid in (False, True)
            for seed in seeds
            for method, times in plan
            if (method == "grid") is grid
        ]
        if args.jobs > 1:
            with ProcessPoolExecutor(args.jobs) as pool:
                answers = list(pool.map(one, jobs))
        elif kept is not None:
            answers = [kept[(space, job[3], job[5])] for job in jobs if (space, job[3], job[5]) in kept]
            jobs = [job for job in jobs if (space, job[3], job[5]) in kept]
        else:
            _PREPARED[space] = (cfg, truth, _surface, table)
            answers = []
            log = args.json.with_suffix(".jsonl") if args.json is not None else None
            earlier = read_kept(log) if log is not None and log.exists() else {}
            for job in jobs:  # each seed's answers kept as they come (a run cut short keeps its seeds,
                # and the same command run again goes on after them)
                if (space, job[3], job[5]) in earlier:
                    answers.append(earlier[(space, job[3], job[5])])
                    continue
                answers.append(one(job))
                if args.json is not None:
                    with args.json.with_suffix(".jsonl").open("a") as out:
                        line = {"space": space, "method": job[3], "seed": job[5]}
                        answers_at = {str(b): asdict(a) for b, a in answers[-1].items()}
                        out.write(json.dumps({**line, "answers": answers_at}) + "\n")
        runs: dict[tuple[str, int], list[Answer]] = {}
        for job, answer in zip(jobs, answers, strict=True):
            for budget, at in answer.items():
                runs.setdefault((job[3], budget), []).append(at)
        size, capacity = len(truth.points), float(best["capacity"])
        rows: list[MethodSummary] = [
            summarize_method(m, b, runs[(m, b)], capacity, size) for m, b in by_method(runs)
        ]
        tpe = next((r for r in rows if r.method == "tpe" and r.budget == cfg.search.max_launches), None)
        if tpe is None:
            print("\n".join(f"{r}" for r in rows))
            continue
        reached = {
            m: reach({r.budget: (r.found, r.seeds) for r in rows if r.method == m}) for m in ("tpe", "random")
        }
        largest = max((r.budget for r in rows if r.method == "random"), default=0)
        verdict = goals(tpe, ratio(reached["tpe"], reached["random"], largest))
        met = met and verdict.met
        print(render(space, capacity, rows, verdict))
        dump[space] = {f"{m}@{b}": [asdict(a) for a in answers] for (m, b), answers in runs.items()}
    if args.json is not None:
        args.json.write_text(json.dumps(dump, indent=1) + "\n")
    print(f"\nwall time: {time.perf_counter() - start:.0f} s")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""How often a search trial's screen refuses a point the gates accept, and passes one they refuse.

Pipeline position: a benchmark beside ``benchmarks/search_quality.py``, over the same cached brute force
(:func:`benchmarks.search_quality.prepare`: every point's capacity and constraint figures on the
simulator's noise-free surface). For each seed it draws the baseline's opening runs and each point's
screening runs with the benchmark's noise (``exp(N(0, noise))`` per figure and run, seeded per seed,
point, profile and run) and rules on them with the product's screen
(:func:`orchestrator.measure.trial_constraints.screened`, through
:func:`benchmarks.search.constrained.screen_sizes`). Two figures:

- **false refusals**: screens that break a requirement of an *acceptable* point within 5% of the best
  acceptable capacity (the points a search must not lose), with the requirements that broke;
- **false acceptances**: screens that break nothing of an *unacceptable* point whose capacity is above
  the best acceptable one (the points that would outrank the truth among the finalists).

    PYTHONPATH=. .venv/bin/python benchmarks/screen_errors.py --space demo --seeds 0-19

Results, command, machine and date: docs/measurements/search-quality.md.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.search.constrained import (
    Constrained,
    Figures,
    acceptable,
    baseline_runs,
    noisy,
    screen_sizes,
)
from benchmarks.search.scoring import WITHIN
from benchmarks.search.surface import DEFAULT_CACHE
from benchmarks.search_quality import prepare, seeds_of
from contracts.schema import GauntletConfig
from orchestrator.measure.trial_constraints import broken


@dataclass
class ScreenErrors:
    """The screens drawn and how many erred each way, with the requirements a false refusal broke."""

    refused: int = 0
    near_best: int = 0
    accepted: int = 0
    above_best: int = 0
    broke: Counter[str] = field(default_factory=Counter)


def screen_errors(
    cfg: GauntletConfig, table: Constrained, seeds: Sequence[int], noise: float
) -> ScreenErrors:
    """Every near-best acceptable point and every unacceptable point above the best, screened once per
    seed with ``noise`` against that seed's baseline runs (as many as ``run.repeats``)."""
    ok = [r for r in table.rows if acceptable(r["sizes"])]
    best = max((float(r["capacity"]) for r in ok), default=0.0)
    near = [r for r in ok if float(r["capacity"]) >= WITHIN * best]
    above = [r for r in table.rows if not acceptable(r["sizes"]) and float(r["capacity"]) > best]
    out = ScreenErrors()
    repeats = max(1, cfg.run.repeats)
    for seed in seeds:
        base = baseline_runs(table, seed=seed, noise=noise, repeats=repeats)
        for row in near:
            sizes = screen_sizes(cfg, _runs(row, seed, noise), base)
            out.near_best += 1
            if broken(sizes):
                out.refused += 1
                out.broke.update(broken(sizes).keys())
        for row in above:
            out.above_best += 1
            out.accepted += not broken(screen_sizes(cfg, _runs(row, seed, noise), base))
    return out


def _runs(row: Mapping[str, Any], seed: int, noise: float) -> Any:
    def mine(profile: str, attempt: int) -> Figures:
        return noisy(
            row["figures"][profile], random.Random(f"{seed}:{row['point']}:{profile}:{attempt}"), noise
        )

    return mine


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--space", default="demo", help="demo, edge or layout (the benchmark's spaces)")
    parser.add_argument("--seeds", default="0-19", help="seeds, e.g. 0-19 or 3,5")
    parser.add_argument("--noise", type=float, default=0.05, help="sd of a measured figure's log noise")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the brute force is kept")
    args = parser.parse_args(argv)
    cfg, _truth, _surface, table = prepare(["+experiment=demo_search"], args.space, args.cache, print)
    seeds = seeds_of(args.seeds)
    found = screen_errors(cfg, table, seeds, args.noise)
    share = found.refused / found.near_best if found.near_best else 0.0
    print(
        f"{args.space}, {len(seeds)} seeds, noise {args.noise:g}: false refusals {found.refused}/"
        f"{found.near_best} ({share:.0%}) of the acceptable points within 5% of the best"
    )
    print("  requirements broken: " + ", ".join(f"{k} {v}" for k, v in found.broke.most_common()))
    above = found.accepted / found.above_best if found.above_best else 0.0
    print(
        f"  false acceptances {found.accepted}/{found.above_best} ({above:.0%}) of the unacceptable points "
        "above the best acceptable capacity"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

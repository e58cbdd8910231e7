"""What measuring every point of a space once gives: the search-quality benchmark's reference beside its
goal, with no sampler, no pruner and no budget.

Pipeline position: a benchmark beside ``benchmarks/search_quality.py``, over the same cached brute force
(:func:`benchmarks.search_quality.prepare`) and the same in-process trial
(:func:`benchmarks.search.runner.in_process_job`, the pruner not asked). For each seed every point that
starts is screened by the product's rule and, when its screen breaks nothing, measured fully by the
capacity search, with the benchmark's noise, drawn as a search's trial of that point is. The finalists are
the product's own order over those trials (:func:`orchestrator.search.confirm.finalists`); the first ``k``
are confirmed, each taken to rule as the truth does (as ``search_quality.py`` judges a search), and the
answer is the best the gates accept (:func:`benchmarks.search.goals.recommended`). Found: within 5% of
the best acceptable capacity.

It is not a ceiling for a search: every unacceptable point measured is one more chance that a screen
lets it on by noise and its estimate outranks the truth, and a search that measures fewer such points can
do better. It says what one measurement of each point and ``k`` confirmations can tell apart at the
benchmark's noise: a miss here comes from the measurements' precision, not from which points were asked.

    PYTHONPATH=. .venv/bin/python benchmarks/search_exhaustive.py --spaces demo,edge,layout --seeds 10-49

Results, command, machine and date: docs/measurements/search-quality.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.search.constrained import Constrained, constrained_best
from benchmarks.search.goals import recommended
from benchmarks.search.runner import baseline_level, in_process_job
from benchmarks.search.scoring import WITHIN
from benchmarks.search.spaces import SPACES
from benchmarks.search.surface import DEFAULT_CACHE, Surface, Truth
from benchmarks.search_quality import prepare, seeds_of
from contracts.schema import GauntletConfig
from contracts.trials import SearchRecord, TrialRecord
from orchestrator.search.confirm import finalists
from orchestrator.search.point import candidate_at, changed_fields, point_overrides
from orchestrator.search.rules import trial_record


def found_by_top(accepted: Sequence[float | None], tops: Sequence[int], best: float) -> dict[int, bool]:
    """For each ``k`` of ``tops``: whether confirming the first ``k`` finalists (``accepted``: the capacity
    the gates accept of each, best estimate first; None: refused) recommends one within 5% of ``best``.

    >>> found_by_top([None, 190.0, 170.0], (1, 2, 3), 193.0)
    {1: False, 2: True, 3: True}
    >>> found_by_top([170.0, 190.0], (1, 2), 193.0), found_by_top([], (1,), 193.0)
    ({1: False, 2: True}, {1: False})
    """
    out: dict[int, bool] = {}
    for k in tops:
        round_ = list(accepted[:k])
        chosen = recommended(round_)
        value = round_[chosen] if chosen is not None else None
        out[k] = value is not None and value >= WITHIN * best
    return out


def exhaustive_seed(
    cfg: GauntletConfig,
    truth: Truth,
    surface: Surface,
    table: Constrained,
    *,
    seed: int,
    noise: float,
    tops: Sequence[int],
) -> tuple[dict[int, bool], int]:
    """One seed: every point that starts screened and, unless its screen breaks a constraint, measured
    fully; whether the first ``k`` finalists find the truth for each ``k`` of ``tops``, and how many of
    the points measured fully are ones the gates refuse."""
    assert cfg.search is not None
    level = baseline_level(cfg, surface, seed=seed, noise=noise)
    seeded = replace(cfg, search=replace(cfg.search, seed=seed, load_level=level))
    assert seeded.search is not None
    layouts = seeded.search.layouts
    job = in_process_job(seeded, truth, surface, table, seed=seed, noise=noise, ask_pruner=False)
    ticket = SimpleNamespace(level=level)
    trials: list[TrialRecord] = []
    for row in truth.points:
        if row["capacity"] is None:  # pruned before launch, or never starts: no figure to draw
            continue
        overrides = point_overrides(
            row["point"], layouts, cfg.candidate, baseline_option="baseline", name="p"
        )
        outcome = job(overrides, ticket)
        number = len(trials)
        trials.append(trial_record(number, f"x{number}", dict(row["point"]), outcome, 0.0))
    record = SearchRecord(
        name=seeded.search.name,
        objective=seeded.search.objective,
        directions=["maximize"],
        space_size=len(truth.points),
        trials=trials,
        baseline=level,
    )
    base = cfg.baseline

    counted: dict[int, int] = {}

    def changes(trial: TrialRecord) -> int:  # the run loop's tie-break (SearchRun._changes), kept
        if trial.number not in counted:
            point = candidate_at(base, trial.params, layouts, base.name)
            counted[trial.number] = len(changed_fields(base, point))
        return counted[trial.number]

    queue = finalists(record, max(tops, default=1), changes, cfg.gates.min_gain)
    accepted = [table.accepted_capacity(t.params) for t in queue]
    top = constrained_best(table.rows)
    assert top is not None, "no point of the space is acceptable: there is nothing to find"
    best = float(top["capacity"])
    refused = sum(1 for t in trials if t.state == "complete" and table.accepted_capacity(t.params) is None)
    return found_by_top(accepted, tops, best), refused


_PREPARED: dict[str, tuple[GauntletConfig, Truth, Surface, Constrained]] = {}


def one(
    job: tuple[tuple[str, ...], str, Path, int, float, tuple[int, ...]],
) -> tuple[str, int, dict[int, bool], int]:
    overrides, space, cache, seed, noise, tops = job
    if space not in _PREPARED:
        _PREPARED[space] = prepare(overrides, space, cache, lambda _line: None)
    cfg, truth, surface, table = _PREPARED[space]
    found, refused = exhaustive_seed(cfg, truth, surface, table, seed=seed, noise=noise, tops=tops)
    return space, seed, found, refused


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--spaces", default=",".join(SPACES), help="names of the benchmark's spaces (SPACES)")
    parser.add_argument("--seeds", default="10-49", help="seeds: 10-49 (held out) or a list")
    parser.add_argument("--noise", type=float, default=0.05, help="sd of a measured figure's log noise")
    parser.add_argument("--top", default="1,2,3,4", help="how many finalists confirmed: the ks to report")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the brute force is kept")
    parser.add_argument("overrides", nargs="*", default=["+experiment=demo_search"], help="Hydra overrides")
    args = parser.parse_args(argv)
    spaces = [s for s in args.spaces.split(",") if s]
    unknown = [s for s in spaces if s not in SPACES]
    if unknown:
        parser.error(f"--spaces: unknown {unknown}; the benchmark's spaces are {sorted(SPACES)}")
    tops = tuple(int(k) for k in args.top.split(",") if k)
    seeds = seeds_of(args.seeds)
    jobs = [(tuple(args.overrides), s, args.cache, seed, args.noise, tops) for s in spaces for seed in seeds]
    results: dict[str, list[tuple[int, dict[int, bool], int]]] = {s: [] for s in spaces}
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for done, (space, seed, found, refused) in enumerate(pool.map(one, jobs), 1):
            results[space].append((seed, found, refused))
            marks = " ".join(f"top{k}:{'found' if found[k] else 'miss'}" for k in tops)
            print(
                f"[{done}/{len(jobs)}] {space} seed {seed}: {marks}; {refused} refused points measured fully"
            )
    print(f"every point measured once, noise {args.noise:g}, seeds {args.seeds}:")
    for space, rows in results.items():
        counts = ", ".join(f"top {k}: {sum(f[k] for _s, f, _r in rows)}/{len(rows)}" for k in tops)
        mean_refused = sum(r for _s, _f, r in rows) / max(1, len(rows))
        print(f"  {space}: found with the {counts}; refused points measured fully {mean_refused:.1f} a seed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

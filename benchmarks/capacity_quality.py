"""Capacity gate quality: identical candidates through the capacity search with noise on the SLO margin.

Each trial runs the search (:func:`orchestrator.capacity_search.search`, the shipped settings of
:class:`contracts.schema.CapacityConfig`, closed loop) twice, baseline and candidate, both with true
capacity ``CAPACITY``: a run at level ``x`` reads the margin ``CAPACITY / x`` times ``exp(N(0, noise))``.
It then judges the pair as the capacity gate does, with the search's bracket as the interval (before
issue 21) and with the log-margin fit and its bootstrap interval (:func:`gates.capacity.capacity_fit`), and
counts how often an identical candidate fails the gate and how often the interval covers the true ratio 1.
Issue 21 asks: fails at most 5% at 10% margin noise, covers at least 90%, each judged on the rate's 95%
Wilson interval (:func:`benchmarks.noise_models.judge_rate`: PASS wholly inside the bar, FAIL wholly
beyond, UNDECIDED straddling it). Exit status 0 all pass, 1 a failure, 2 undecided only.

``--launches`` (issue 42, item 3) measures the capacity gain rule alone on launches of one configuration
whose capacity moves from launch to launch (sd 0, 3%, 5% of its log), at the search demo's settings and 5%
run-to-run margin noise: how often it says "capacity up beyond noise" for the identical configuration and
for a true 15% gain, with the rule before (the fit's 95% interval, one search per side) and the gate's
(:func:`gates.capacity.compare_capacities`: the baseline searched again in its block, the launch spread
assumed at ``gates.capacity_launch_sd`` unless measured larger, the gain at its share of the gain family),
and the gate's with a second launch of the candidate (what it would buy; a sweep launches a candidate
once). Bars (the gate's rule, sd at or below the prior): identical at most 5%, the 15% gain at least 80%.

    .venv/bin/python benchmarks/capacity_quality.py --trials 400
    .venv/bin/python benchmarks/capacity_quality.py --launches --trials 400
"""

from __future__ import annotations

import argparse
import sys
import zlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.noise_models import RateBar, judge_rate, wilson_interval
from contracts.metrics import excludes_one
from contracts.results import CapacityPoint, CapacityResult
from contracts.schema import CapacityConfig, GatesConfig
from gates.capacity import capacity_fit, capacity_ratio, compare_capacities, fitted_ratio, judge_capacity
from orchestrator.measure.capacity_search import SearchResult, SearchSettings, search

CAPACITY = 100.0


def result_of(found: SearchResult, name: str) -> CapacityResult:
    """The search as ``capacity.json`` records it (levels, margins, the bracket)."""
    points = [
        CapacityPoint(
            level=level,
            attempt=k + 1,
            summary_file="",
            met=margin >= 1,
            margin=margin,
            attainment=1.0,
            goodput_rps=0.0,
            goodput_tps=0.0,
            output_tps=0.0,
            tps_per_user=None,
        )
        for level, margins in found.margins.items()
        for k, margin in enumerate(margins)
    ]
    return found.record(
        points,
        candidate=name,
        profile="decode_heavy",
        slo="default",
        slo_text="",
        resolution=CapacityConfig.resolution,
        gpus=8,
    )


def trial(rng: np.random.Generator, noise: float, settings: SearchSettings) -> list[CapacityResult]:
    def probe(level: float, attempt: int) -> float:
        return CAPACITY / level * float(np.exp(rng.normal(0.0, noise)))

    return [result_of(search(probe, settings), name) for name in ("candidate", "baseline")]


#: The search demo's capacity settings (conf/experiment/demo.yaml with demo_search.yaml's resolution).
DEMO_SEARCH = SearchSettings(
    start=32, min_level=2, max_level=512, resolution=0.05, max_points=12, integer=True
)
MARGIN_NOISE = 0.05


def launch(rng: np.random.Generator, capacity: float, name: str) -> CapacityResult:
    """One launch's search at the demo's settings, its runs' margins ``capacity / level`` x noise."""

    def probe(level: float, attempt: int) -> float:
        return capacity / level * float(np.exp(rng.normal(0.0, MARGIN_NOISE)))

    return result_of(search(probe, DEMO_SEARCH), name)


#: The rules compared: before (the fit's interval, one search per side), the gate's (one candidate launch,
#: the baseline's opening and block launches), and the gate's with a second candidate launch (not a sweep's
#: default: what it would buy).
RULES = {
    "before": "fit, one search per side (before)",
    "gate": "gate: 1 candidate launch, 2 baseline launches",
    "gate2": "gate: 2 candidate launches, 2 baseline launches",
}


def gains(
    rng: np.random.Generator, k: int, factor: float, launch_sd: float, gates: GatesConfig
) -> dict[str, bool]:
    """Whether each rule of :data:`RULES` says "capacity up beyond noise" for one trial: a candidate launch
    (and a second one), the baseline's opening launch and its block's."""
    shift = [float(np.exp(rng.normal(0.0, launch_sd))) for _ in range(4)]
    cand = launch(rng, CAPACITY * factor * shift[0], "candidate")
    base = launch(rng, CAPACITY * shift[1], "baseline")
    block = launch(rng, CAPACITY * shift[2], "baseline")
    again = launch(rng, CAPACITY * factor * shift[3], "candidate")
    c_fit, b_fit = capacity_fit(cand.points, seed=2 * k), capacity_fit(base.points, seed=2 * k + 1)
    estimate = fitted_ratio(c_fit, b_fit, gates.confidence) if c_fit and b_fit else capacity_ratio(cand, base)
    out = {
        "before": estimate is not None
        and estimate[0] >= 1 + gates.min_gain
        and excludes_one(estimate[1], "above")
    }
    for rule, cands in (("gate", [cand]), ("gate2", [cand, again])):
        judged = compare_capacities(
            cands, [base, block], gates, lambda *parts: zlib.crc32("/".join((str(k), *parts)).encode())
        )
        out[rule] = (
            judged.ratio is not None
            and judged.lag_s is None
            and judged.ratio >= 1 + gates.min_gain
            and excludes_one(judged.gain_interval, "above")
        )
    return out


def launches_main(args: argparse.Namespace) -> int:
    gates = GatesConfig()
    print(
        f"the capacity gain rule on launches of one configuration (search demo settings, margin noise "
        f"{MARGIN_NOISE:.0%}, the gate's prior {gates.capacity_launch_sd:.0%}, confidence "
        f"{gates.confidence:.0%}): {args.trials} trials per row"
    )
    print("| true ratio | launch sd | rule | capacity up beyond noise [95% Wilson] | required | result |")
    print("|---|---|---|---|---|---|")
    tally: Counter[str] = Counter()
    for factor in (1.0, 1.15):
        for sd in (0.0, 0.03, 0.05):
            rng = np.random.default_rng([args.seed, int(factor * 100), int(sd * 1000)])
            counts = Counter[str]()
            for k in range(args.trials):
                counts.update(rule for rule, said in gains(rng, k, factor, sd, gates).items() if said)
            for rule, label in RULES.items():
                n, got = args.trials, counts[rule]
                low, high = wilson_interval(got, n)
                bar = None
                if rule == "gate" and sd <= gates.capacity_launch_sd:
                    bar = (
                        RateBar("up", 0.05, at_least=False)
                        if factor == 1.0
                        else RateBar("up", 0.80, at_least=True)
                    )
                result = judge_rate(bar, got, n) if bar else "-"
                tally[result] += 1
                print(
                    f"| {factor:.2f}x | {sd:.0%} | {label} | {got}/{n} [{low:.0%}, {high:.0%}] | "
                    f"{bar or '(reported)'} | {result} |"
                )
    return 1 if tally["FAIL"] else 2 if tally["UNDECIDED"] else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--launches", action="store_true", help="the gain rule with a launch effect (issue 42)"
    )
    args = parser.parse_args(argv)
    if args.launches:
        return launches_main(args)
    gates = GatesConfig()
    settings = SearchSettings.from_config(CapacityConfig(), integer=True)
    print(
        f"capacity gate on identical candidates (true capacity {CAPACITY:g}, closed loop, shipped search "
        f"settings, tolerance {gates.capacity_tolerance:.0%}, confidence {gates.confidence:.0%}): "
        f"{args.trials} trials per noise level"
    )
    header = "| margin noise | interval | fails the gate [95% Wilson] | covers 1 [95% Wilson] | required |"
    print(f"{header} result | runs per search (mean) |")
    print("|---|---|---|---|---|---|---|")
    tally: Counter[str] = Counter()
    for noise in (0.05, 0.10):
        rng = np.random.default_rng([args.seed, int(noise * 100)])
        counts = {"bracket": [0, 0], "fit": [0, 0]}
        runs = 0
        for k in range(args.trials):
            cand, base = trial(rng, noise, settings)
            runs += len(cand.points) + len(base.points)
            bracket = capacity_ratio(cand, base)
            if bracket is None:
                continue
            c_fit = capacity_fit(cand.points, seed=2 * k)
            b_fit = capacity_fit(base.points, seed=2 * k + 1)
            fit = fitted_ratio(c_fit, b_fit, gates.confidence) if c_fit and b_fit else bracket
            for name, (ratio, interval) in (("bracket", bracket), ("fit", fit)):
                counts[name][0] += judge_capacity(ratio, interval, gates.capacity_tolerance) == "fail"
                counts[name][1] += interval[0] <= 1.0 <= interval[1]
        for name, (fails, covers) in counts.items():
            n = args.trials
            f_low, f_high = wilson_interval(fails, n)
            c_low, c_high = wilson_interval(covers, n)
            # The fit's bars, judged on the Wilson interval (PASS wholly inside, FAIL wholly beyond).
            judged = [
                judge_rate(RateBar("fails", 0.05, at_least=False), fails, n),
                judge_rate(RateBar("covers", 0.90, at_least=True), covers, n),
            ]
            result = (
                "-"
                if name == "bracket"
                else "FAIL"
                if "FAIL" in judged
                else "UNDECIDED"
                if "UNDECIDED" in judged
                else "PASS"
            )
            tally[result] += 1
            print(
                f"| {noise:.0%} | {name} | {fails}/{n} [{f_low:.0%}, {f_high:.0%}] | "
                f"{covers}/{n} [{c_low:.0%}, {c_high:.0%}] | "
                f"{'fails <= 5%, covers >= 90% [95% Wilson]' if name == 'fit' else '(reported)'} | "
                f"{result} | {runs / (2 * args.trials):.1f} |"
            )
    return 1 if tally["FAIL"] else 2 if tally["UNDECIDED"] else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Coverage of the gates' intervals when runs differ as a whole: why the repeat is the unit.

Model: each side has ``--repeats`` runs of ``--requests`` requests; a run's latencies are log-normal with
log-spread ``--spread`` around ``exp(u)``, where ``u ~ N(0, run_sd)`` is the run's own shift (scheduling and
host noise move a whole run). Candidate and baseline are identical, so a 95% interval should contain 1 in
95% of trials. Methods:

- ``pooled HL``: Hodges-Lehmann / Mann-Whitney over the pooled requests of all repeats (the gates before:
  requests treated as independent);
- ``two-stage bootstrap``: resample repeats, then requests within each chosen repeat; percentile interval
  of the ratio of pooled medians;
- ``Welch t``: each repeat's median, Welch t-interval on the log ratio (the gates now).

It also prints the false-alarm rate of the drift rule (one new run against the repeats' prediction
interval, Bonferroni over ``--drift-comparisons``), the power of each method for a consistent shift, and
the coverage of the throughput interval (a run's tokens/s = its tokens over its request-seconds, scaled
by the run's factor): the two-stage bootstrap alone against the gates' interval (bootstrap widened to
Welch's t on the log per-repeat values).

    .venv/bin/python benchmarks/interval_coverage.py
    .venv/bin/python benchmarks/interval_coverage.py --repeats 5 --trials 2000
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contracts.metrics import median  # noqa: E402
from gates.bootstrap import RunSample, bootstrap_ratio, throughput_ratio  # noqa: E402
from gates.significance import bonferroni  # noqa: E402
from gates.stats import hodges_lehmann_ratio, prediction_ratio, run_level_ratio  # noqa: E402

FloatArray = NDArray[np.float64]


def draw(rng: np.random.Generator, repeats: int, requests: int, spread: float, run_sd: float) -> FloatArray:
    """(repeats, requests) latencies, each run shifted by its own log-normal factor."""
    shifts = rng.normal(0.0, run_sd, size=(repeats, 1))
    return np.exp(shifts + rng.normal(0.0, spread, size=(repeats, requests)))


def run_medians(runs: FloatArray) -> list[float]:
    """Each run's median, as the gates take it (:func:`contracts.metrics.median`)."""
    return [float(median([float(v) for v in run]) or 0.0) for run in runs]


def bootstrap_interval(
    c: FloatArray, b: FloatArray, rng: np.random.Generator, resamples: int, confidence: float
) -> tuple[float, float]:
    """Two-stage percentile interval of the log ratio of pooled medians."""

    def replicates(side: FloatArray) -> FloatArray:
        k, n = side.shape
        runs = side[rng.integers(0, k, size=(resamples, k))]  # (B, k, n)
        picks = rng.integers(0, n, size=(resamples, k, n))
        chosen = np.take_along_axis(runs, picks, axis=2)
        medians: FloatArray = np.median(chosen.reshape(resamples, k * n), axis=1)
        return medians

    logs = np.log(replicates(c) / replicates(b))
    alpha = 1 - confidence
    low, high = np.quantile(logs, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def trial_set(
    args: argparse.Namespace, run_sd: float, shift: float, rng: np.random.Generator
) -> dict[str, float]:
    """Fraction of trials whose interval contains the true log ratio ``shift`` (coverage), and of those
    that exclude 1 (a detection when shift != 0)."""
    covers = {"pooled HL": 0, "two-stage bootstrap": 0, "Welch t": 0}
    detects = dict.fromkeys(covers, 0)
    for _ in range(args.trials):
        c = draw(rng, args.repeats, args.requests, args.spread, run_sd) * np.exp(shift)
        b = draw(rng, args.repeats, args.requests, args.spread, run_sd)
        hl = hodges_lehmann_ratio(list(c.ravel()), list(b.ravel()), confidence=args.confidence)
        welch = run_level_ratio(run_medians(c), run_medians(b), confidence=args.confidence)
        for name, est in (("pooled HL", hl), ("Welch t", welch)):
            covers[name] += est.low <= np.exp(shift) <= est.high
            detects[name] += est.excludes_one
        low, high = bootstrap_interval(c, b, rng, args.resamples, args.confidence)
        covers["two-stage bootstrap"] += low <= shift <= high
        detects["two-stage bootstrap"] += low > 0 or high < 0
    key = "coverage" if shift == 0 else "detected"
    source = covers if shift == 0 else detects
    return {f"{name} {key}": count / args.trials for name, count in source.items()}


def drift_false_alarms(args: argparse.Namespace, run_sd: float, rng: np.random.Generator) -> float:
    """One new run of the same configuration against the repeats: how often is it called drift?"""
    confidence = bonferroni(args.confidence, args.drift_comparisons)
    alarms = 0
    for _ in range(args.trials):
        reference = run_medians(draw(rng, args.repeats, args.requests, args.spread, run_sd))
        new = run_medians(draw(rng, 1, args.requests, args.spread, run_sd))
        est = prediction_ratio(new, reference, confidence=confidence)
        material = abs(np.log(est.ratio)) > np.log(1 + args.tolerance)
        alarms += bool(est.excludes_one and material)
    return float(alarms / args.trials)


def throughput_coverage(
    args: argparse.Namespace, run_sd: float, rng: np.random.Generator
) -> dict[str, float]:
    """Identical configurations; tokens/s per run with its per-request parts (the gates' RunSample)."""

    def runs() -> list[RunSample]:
        out = []
        for _ in range(args.repeats):
            times = np.exp(rng.normal(0.0, run_sd) + rng.normal(0.0, args.spread, args.requests))
            amounts = np.full(args.requests, 256.0)
            out.append(RunSample(float(amounts.sum() / times.sum()) * 64, amounts, times))
        return out

    covered = {"two-stage bootstrap": 0, "gates (bootstrap + Welch)": 0}
    for i in range(args.trials):
        c, b = runs(), runs()
        boot = bootstrap_ratio(c, b, confidence=args.confidence, resamples=args.resamples, seed=i)
        gates = throughput_ratio(c, b, confidence=args.confidence, resamples=args.resamples, seed=i)
        covered["two-stage bootstrap"] += not boot.excludes_one
        covered["gates (bootstrap + Welch)"] += not gates.excludes_one
    return {name: count / args.trials for name, count in covered.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--requests", type=int, default=32, help="requests per run")
    parser.add_argument("--spread", type=float, default=0.5, help="log-sd of requests within a run")
    parser.add_argument("--run-sd", type=float, nargs="+", default=[0.0, 0.05, 0.15, 0.25])
    parser.add_argument("--shift", type=float, default=1.3, help="true ratio of the power rows")
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=400)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--drift-comparisons", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    print(
        f"{args.repeats} vs {args.repeats} repeats of {args.requests} requests (log-spread {args.spread}), "
        f"{args.trials} trials, {args.confidence:.0%} intervals"
    )
    header = "run sd | pooled HL | two-stage bootstrap | Welch t (per-repeat medians) | drift false alarms"
    print("coverage of the true ratio 1.0 (identical configurations):")
    print(header)
    for run_sd in args.run_sd:
        cov = trial_set(args, run_sd, 0.0, rng)
        alarms = drift_false_alarms(args, run_sd, rng)
        print(
            f"{run_sd:6.2f} | {cov['pooled HL coverage']:9.1%} | "
            f"{cov['two-stage bootstrap coverage']:19.1%} | {cov['Welch t coverage']:28.1%} | {alarms:.1%}"
        )
    print(f"detection of a true {args.shift:.2f}x ratio (interval excludes 1):")
    print("run sd | pooled HL | two-stage bootstrap | Welch t")
    for run_sd in args.run_sd:
        power = trial_set(args, run_sd, float(np.log(args.shift)), rng)
        print(
            f"{run_sd:6.2f} | {power['pooled HL detected']:9.1%} | "
            f"{power['two-stage bootstrap detected']:19.1%} | {power['Welch t detected']:7.1%}"
        )
    print("coverage of the throughput interval (identical configurations, tokens/s):")
    print("run sd | two-stage bootstrap | gates (bootstrap widened to Welch t)")
    for run_sd in args.run_sd:
        tps = throughput_coverage(args, run_sd, rng)
        print(f"{run_sd:6.2f} | {tps['two-stage bootstrap']:19.1%} | {tps['gates (bootstrap + Welch)']:.1%}")
    print(f"[{time.monotonic() - started:.0f} s]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

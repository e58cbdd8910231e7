"""Cost gate quality: how often the cost gate fails an identical candidate, and finds a dearer one.

Each trial draws every run's output tokens/s on the four default loaded profiles (``short``,
``prefill_10k``, ``decode_heavy``, ``mixed``) for a baseline and a candidate: ``2000 x exp(N(0, 0.03))``
tok/s (the measured model's run log-sd), the candidate's divided by ``dearer`` (1.0: identical), and in
the ``outlier_runs`` model each run, with probability one in ten, 3x slower (issue 21). It judges the
pair with the cost gate (:class:`gates.cost.Cost`, ``gates.cost.tolerance`` 0.05, GPU-hours priced at
the simulator's 2.5 $/GPU-hour, power not priced) and counts its statuses; a gate that raises counts as
``error``. The same script runs on an older checkout (``PYTHONPATH``) to compare before and after a
change of the gate: it needs only the gate's ``evaluate``. Figures: docs/measurements/cost-gate-quality.md.

    .venv/bin/python benchmarks/cost_gate_quality.py --trials 1000
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.noise_models import wilson_interval
from contracts.layout import CANDIDATES_DIR, SUMMARY_FILE, repeat_name
from contracts.results import (
    CandidateRun,
    CensoredMedian,
    ClientHealth,
    Pricing,
    ProfileSummary,
    StartupRecord,
    Stats,
)
from contracts.schema import CostGateConfig, GatesConfig
from contracts.sweepdir import Repeat, Results
from gates.cost import Cost
from gates.registry import GateContext

PROFILES = ("short", "prefill_10k", "decode_heavy", "mixed")
TPS = 2000.0
SIGMA = 0.03
OUTLIER_RATE, OUTLIER_FACTOR = 0.1, 3.0
#: (name, candidate runs, baseline runs, candidate / baseline cost, one run in ten 3x slower)
SCENARIOS = (
    ("identical, 3 vs 3 runs", 3, 3, 1.0, False),
    ("identical, 3 vs 3, outlier runs", 3, 3, 1.0, True),
    ("identical, 1 vs 3 (adaptive first look), outlier runs", 1, 3, 1.0, True),
    ("identical, 1 vs 1 (run.repeats=1), outlier runs", 1, 1, 1.0, True),
    ("20% dearer, 3 vs 3 runs", 3, 3, 1.2, False),
    ("20% dearer, 3 vs 3, outlier runs", 3, 3, 1.2, True),
)


def _summary(name: str, profile: str, repeat: int, tps: float) -> ProfileSummary:
    stats = Stats(n=8, mean=0.5, p50=0.5, p90=0.6, p99=0.7)
    return ProfileSummary(
        candidate=name,
        profile=profile,
        repeat=repeat,
        fingerprint="f",
        backend="sim",
        host="sim",
        time_scale=1.0,
        started_at="2026-12-06T00:00:00Z",
        duration_s=1.0,
        num_requests=8,
        completed=8,
        failed=0,
        errors={},
        prompt_tokens=800,
        output_tokens=int(tps),
        prompt_tps=800.0,
        output_tps=tps,
        ttft=stats,
        first_visible=stats,
        first_visible_censored=CensoredMedian(n=8, censored=0, value_s=0.5, infinite=False),
        itl=stats,
        e2e=stats,
        client=ClientHealth(
            dispatch_lag_p50_s=0.0,
            dispatch_lag_p99_s=0.0,
            dispatch_lag_max_s=0.0,
            chunks_per_read_p99=1.0,
            client_cpu_percent=5.0,
            saturated=False,
        ),
        server=None,
    )


def side(name: str, runs: int, dearer: float, outliers: bool, rng: np.random.Generator) -> Results:
    """One launch's runs of every profile, drawn."""
    profiles: dict[str, list[Repeat]] = {}
    for profile in PROFILES:
        reps = []
        for k in range(runs):
            tps = TPS / dearer * float(np.exp(rng.normal(0.0, SIGMA)))
            if outliers and rng.random() < OUTLIER_RATE:
                tps /= OUTLIER_FACTOR
            summary_file = f"{CANDIDATES_DIR}/{name}/{repeat_name(profile, k)}/{SUMMARY_FILE}"
            reps.append(Repeat(_summary(name, profile, k, tps), [], summary_file, ""))
        profiles[profile] = reps
    run = CandidateRun(
        candidate=name,
        fingerprint="f",
        backend="sim",
        host="sim",
        is_baseline=name == "baseline",
        startup=StartupRecord(ok=True),
        pricing=Pricing(gpus=8, gpu_hour_price=2.5),
    )
    return Results(name, f"{CANDIDATES_DIR}/{name}", run, profiles)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    cfg = GatesConfig(loaded_profiles=list(PROFILES), cost=CostGateConfig(tolerance=0.05))
    print(f"cost gate, tolerance 0.05, {args.trials} trials per scenario (95% Wilson interval of fail)")
    for name, n_cand, n_base, dearer, outliers in SCENARIOS:
        rng = np.random.default_rng(args.seed)
        counts: Counter[str] = Counter()
        for _ in range(args.trials):
            base = side("baseline", n_base, 1.0, outliers, rng)
            cand = side("c", n_cand, dearer, outliers, rng)
            try:
                counts[Cost().evaluate(GateContext(cfg, base, cand)).status] += 1
            except ValueError:
                counts["error"] += 1
        low, high = wilson_interval(counts["fail"], args.trials)
        shares = ", ".join(
            f"{k} {counts[k] / args.trials:.1%}" for k in ("fail", "inconclusive", "pass", "error")
        )
        print(f"{name:55s} {shares}  (fail [{low:.1%}, {high:.1%}])")
    return 0


if __name__ == "__main__":
    sys.exit(main())

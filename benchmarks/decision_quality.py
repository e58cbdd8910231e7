"""Decision quality of the gates, measured on the simulator under messy noise: how often does each kind
of candidate get the verdict it deserves, and how much measurement do adaptive repeats save?

Scenarios (candidate against the baseline, same engine, ``sim-speed`` scales every step):

- ``identical`` (``sim-speed 1.0``): kept at most 2.5% AND rejected at most 5%;
- ``regression_10`` / ``regression_20`` (0.9 / 0.8): rejected at least 85% (log-normal and Student-t
  noise) / 90% (every noise model);
- ``gain_10`` / ``gain_15`` (1/0.9 / 1/0.85: TTFT 10% / 15% lower, no regression): kept (reported) /
  kept at least 85%;
- non-uniform effects on the candidate's runs (issue 21): ``loaded_ttft_30`` (only loaded TTFT 30%
  worse) and ``high_concurrency_20`` (only decode_heavy, the highest concurrency, 20% slower): rejected
  at least 90% and kept at most 2.5%, as a uniform 20% regression and the identical candidate;
  ``serial_gain_loaded_loss`` (serial 15% faster, loaded TTFT 30% worse): kept at most 2.5% ("never"
  cannot be shown by sampling: the identical candidate's bar);
- capacity searches with a launch effect (issue 42; :mod:`benchmarks.decision.capacity_runs`: every
  launch searched at the search demo's settings, its capacity shifted by 3% sd from launch to launch, 5%
  run-to-run margin noise, the latency profiles identical): ``capacity_identical`` kept at most 5% (and
  rejected at most 5%), ``capacity_gain_15`` (a true 15% capacity gain) kept at least 80%;
  ``capacity_identical_launch_5`` (5% from launch to launch, above the gates' 3% prior) reported; a
  second table gives the capacity rule's own "capacity up beyond noise" rate beside the keeps;

each under every noise model of :mod:`benchmarks.noise_models` (log-normal, Student-t, outlier run,
drift, per-request tails), over ``--seeds`` seeds (40 by default), with the Wilson interval of each rate.
A bar is judged on that interval, not on the count (:func:`benchmarks.noise_models.judge_rate`): PASS
when the interval lies wholly on the allowed side, FAIL when wholly beyond, UNDECIDED when it straddles
the bar (the table says how many seeds would decide it at the observed rate). Exit status: 0 when every
bar passes (and the demo mix meets its own), 1 when one fails, 2 when none fails but one is undecided.
Then the demo's candidate mix (``spec_probabilistic``, ``tp4_dp2``: their own engine configurations;
``eplb`` and ``mega_moe`` do not start and cost no measurement in either mode) is measured with fixed
repeats and with adaptive repeats (:mod:`gates.sequential`) on the same noise draws: the measurement time
(simulated seconds of the candidates' runs) and the verdicts of both.

Each sweep is a complete sweep directory (baseline, candidate, recovery: the layout of
:mod:`contracts.results`) judged by :func:`gates.evaluate_sweep`, as a sweep does. Runs come from the
simulator's engine model driven in-process in virtual time (:func:`launch.sim.replay.replay_closed_loop`).
Replays are drawn from a pool (``--pool`` distinct replays per engine configuration and profile, each
with its own server seed and prompts, computed once) so that thousands of sweeps stay affordable; a
sweep never uses one replay twice, and the noise model's draws are fresh for every run of every sweep.
The replay's own sampling noise is therefore shared between seeds; the run-level noise, which dominates,
is not (docs/measurements/decision-quality.md says what that leaves out).

    .venv/bin/python benchmarks/decision_quality.py                     # 40 seeds, every model (~15 min)
    .venv/bin/python benchmarks/decision_quality.py --seeds 10 --model lognormal --scenario identical
    .venv/bin/python benchmarks/decision_quality.py --fixed             # every candidate: run.repeats
    .venv/bin/python benchmarks/decision_quality.py --mode fixed --mode adaptive   # both, one table
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.decision.replays import ReplayPool  # noqa: E402
from benchmarks.decision.scenarios import ANSWER_PROFILE, DEMO_MIX, PROFILES, SCENARIOS, SIM_PROFILE  # noqa: E402
from benchmarks.decision.synthetic_sweep import Outcome, judge_sweep_once  # noqa: E402
from benchmarks.decision.tables import (  # noqa: E402
    Row,
    capacity_table,
    mix_table,
    scenario_table,
    scenario_time,
)
from benchmarks.noise_models import NOISE_MODELS  # noqa: E402
from contracts.results import Pricing  # noqa: E402
from gates.sequential import SequentialPlan  # noqa: E402
from orchestrator.config.compose import load  # noqa: E402


@dataclass(frozen=True)
class Task:
    """Every sweep of one seed under one noise model (a unit of parallel work)."""

    model: str
    seed: int
    scenarios: tuple[str, ...]
    mix: bool
    fixed: bool
    args: tuple[int, float, int, int, int, int, int]  # base seed, scale, pool, repeats, min, max, resamples
    #: ``--client-lag-ms``: the loaded runs' p99 dispatch lag range (s) of the models that draw one
    client_lag_s: tuple[float, float] | None = None
    confirm_runs: int | None = None  # ``--confirm-runs``; None: the config's run.confirm_runs
    cost_tolerance: float | None = None  # ``--cost-tolerance``: the cost gate on, the launches priced


_POOLS: dict[tuple[float, int, int], ReplayPool] = {}
#: $ per GPU-hour of the priced launches with ``--cost-tolerance`` (conf/host/sim.yaml's gpu_hour_price).
COST_GPU_HOUR_PRICE = 2.5


def _pool(scale: float, seed: int, size: int) -> ReplayPool:
    key = (scale, seed, size)
    if key not in _POOLS:
        _POOLS[key] = ReplayPool(load([])[0], scale, seed, size)
    return _POOLS[key]


def run_task(task: Task) -> list[tuple[str, str, str, Outcome]]:
    """(group, candidate, mode, outcome) for every sweep of the task."""
    base_seed, scale, size, repeats, min_r, max_r, resamples = task.args
    pool = _pool(scale, base_seed, size)
    cfg = pool.cfg
    gates = replace(
        cfg.gates,
        loaded_profiles=[p for p in cfg.gates.loaded_profiles if p in PROFILES],
        bootstrap_resamples=resamples,
        cost=replace(cfg.gates.cost, tolerance=task.cost_tolerance),
    )
    # The cost gate judges only launches whose run.json records the host's prices (the sim host's).
    pricing = Pricing(gpus=8, gpu_hour_price=COST_GPU_HOUR_PRICE) if task.cost_tolerance is not None else None
    model = NOISE_MODELS[task.model]
    if task.client_lag_s is not None and model.lag_p99_s[1] > 0:
        model = replace(model, lag_p99_s=task.client_lag_s, lag_by_profile=())
    fixed = SequentialPlan(repeats, repeats)
    adaptive = SequentialPlan(min_r, max_r)
    out: list[tuple[str, str, str, Outcome]] = []
    with tempfile.TemporaryDirectory(prefix="gauntlet-dq-") as tmp:
        common = {
            "baseline_repeats": repeats,
            "gates": gates,
            "recovery_profiles": cfg.run.recovery_profiles,
            "interleave_repeats": cfg.run.interleave_repeats if cfg.run.interleave else 0,
            "confirm_runs": cfg.run.confirm_runs if task.confirm_runs is None else task.confirm_runs,
            "pricing": pricing,
            "capacity_in_blocks": cfg.capacity.in_blocks,
        }
        for name in task.scenarios:
            scenario = next(s for s in SCENARIOS if s.name == name)
            plan = fixed if task.fixed else adaptive
            key = f"{base_seed}:{task.seed}:{name}"
            outcome = judge_sweep_once(
                pool,
                model,
                ("baseline", scenario.speed),
                Path(tmp) / "s",
                key=key,
                plan=plan,
                effects=scenario.effects,
                capacity=scenario.capacity,
                **common,  # type: ignore[arg-type]
            )
            out.append(("scenario", name, "fixed" if task.fixed else "adaptive", outcome))
        if task.mix:
            for name in DEMO_MIX:
                key = f"{base_seed}:{task.seed}:{name}"
                for mode, plan in (("fixed", fixed), ("adaptive", adaptive)):
                    outcome = judge_sweep_once(
                        pool,
                        model,
                        (name, 1.0),
                        Path(tmp) / "s",
                        key=key,
                        plan=plan,
                        answers=True,
                        **common,  # type: ignore[arg-type]
                    )
                    out.append(("mix", name, mode, outcome))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", type=int, default=40, help="sweeps per scenario and noise model")
    parser.add_argument(
        "--repeats", type=int, default=3, help="baseline repeats; fixed-mode candidate repeats"
    )
    parser.add_argument("--min-repeats", type=int, default=1, help="adaptive: first look (run.min_repeats)")
    parser.add_argument("--max-repeats", type=int, default=5, help="adaptive: last look (run.max_repeats)")
    parser.add_argument("--fixed", action="store_true", help="scenarios with fixed repeats, not adaptive")
    parser.add_argument(
        "--mode",
        action="append",
        choices=["fixed", "adaptive"],
        help="the scenarios' repeats, once per mode given (default: adaptive, or fixed with --fixed)",
    )
    parser.add_argument("--scale", type=float, default=1.0, help="multiplier on every profile's requests")
    parser.add_argument("--pool", type=int, default=12, help="distinct replays per engine and profile")
    parser.add_argument("--seed", type=int, default=0, help="changes every seed of the benchmark")
    parser.add_argument("--model", action="append", choices=list(NOISE_MODELS))
    parser.add_argument("--scenario", action="append", choices=[s.name for s in SCENARIOS])
    parser.add_argument("--no-mix", action="store_true", help="skip the demo mix (fixed vs adaptive)")
    parser.add_argument(
        "--mix-model",
        action="append",
        choices=list(NOISE_MODELS),
        help="noise models of the demo mix (default: lognormal, student_t)",
    )
    parser.add_argument(
        "--resamples",
        type=int,
        default=500,
        help="gates.bootstrap_resamples (default 500, not the shipped 2000: the throughput interval is the "
        "union with Welch's t, which the resamples do not change; 4x faster)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--verbose", action="store_true", help="print every verdict's reason")
    parser.add_argument(
        "--client-lag-ms",
        type=float,
        nargs=2,
        metavar=("LOW", "HIGH"),
        help="the measured model's client p99 dispatch lag per loaded run, uniform, on every loaded profile "
        "(default: as measured over HTTP at time scale 1 on the shared 2-core machine, per profile: short "
        "1-5 ms, decode_heavy and prefill_10k 15-30 ms; the load runner alone on a quiet machine: 0.1 0.7; "
        "the model's earlier single range: 2 9)",
    )
    parser.add_argument(
        "--confirm-runs",
        type=int,
        default=None,
        help="run.confirm_runs (default: the shipped config's, 2): after fixed repeats, up to N more runs "
        "of a profile whose runs disagree beyond 2x or lost a slow run set aside (gates.confirm); 0: none",
    )
    parser.add_argument(
        "--cost-tolerance",
        type=float,
        default=None,
        help="gates.cost.tolerance (default: off, as shipped): the cost gate judges each loaded profile's "
        f"$/Mtok, every launch priced at ${COST_GPU_HOUR_PRICE:g} per GPU-hour (the sim host's), no power",
    )
    args = parser.parse_args(argv)
    models = args.model or list(NOISE_MODELS)
    mix_models = args.mix_model or ["lognormal", "student_t"]
    scenarios = tuple(args.scenario or [s.name for s in SCENARIOS])
    started = time.monotonic()
    modes = list(dict.fromkeys(args.mode or (["fixed"] if args.fixed else ["adaptive"])))
    mode = " and ".join(
        f"fixed {args.repeats}" if m == "fixed" else f"adaptive {args.min_repeats}..{args.max_repeats}"
        for m in modes
    )
    print(
        f"decision quality on the simulator ({SIM_PROFILE}, in-process replay, pool {args.pool}): "
        f"{args.seeds} seeds per scenario and noise model; baseline {args.repeats} repeats; candidates "
        f"{mode} "
        f"repeats; scale {args.scale}; profiles {', '.join(PROFILES)}; seed {args.seed}; "
        f"bootstrap resamples {args.resamples}; confirmation runs "
        f"{'as configured' if args.confirm_runs is None else args.confirm_runs}; "
        f"cost gate {'off' if args.cost_tolerance is None else f'tolerance {args.cost_tolerance:g}'}; "
        f"demo mix under {', '.join(mix_models)}"
    )
    for model in models:
        print(f"  noise {model}: {NOISE_MODELS[model].description}")
    if args.client_lag_ms:
        print(f"  client lag p99 per loaded run: {args.client_lag_ms[0]:g}-{args.client_lag_ms[1]:g} ms")
    tasks = [
        Task(
            model,
            k,
            scenarios,
            mix=not args.no_mix and model in mix_models and each == modes[0],
            fixed=each == "fixed",
            args=(
                args.seed,
                args.scale,
                args.pool,
                args.repeats,
                args.min_repeats,
                args.max_repeats,
                args.resamples,
            ),
            client_lag_s=(
                (args.client_lag_ms[0] / 1000, args.client_lag_ms[1] / 1000) if args.client_lag_ms else None
            ),
            confirm_runs=args.confirm_runs,
            cost_tolerance=args.cost_tolerance,
        )
        for k in range(args.seeds)
        for model in models
        for each in modes
    ]
    rows: list[Row] = []
    if args.jobs > 1:  # replay the pool once; forked workers inherit it
        pool = _pool(args.scale, args.seed, args.pool)
        engines = [("baseline", s.speed) for s in SCENARIOS if s.name in scenarios]
        engines += [] if args.no_mix else [(n, 1.0) for n in DEMO_MIX if pool.starts(n)]
        if not args.no_mix:
            for name in ["baseline", *(n for n in DEMO_MIX if pool.starts(n))]:
                pool.get(name, 1.0, ANSWER_PROFILE, 0)
        for engine in dict.fromkeys(engines):
            for profile in PROFILES:
                for index in range(args.pool):
                    pool.get(*engine, profile, index)
        with ProcessPoolExecutor(args.jobs) as workers:
            done = list(workers.map(run_task, tasks))
    else:
        done = [run_task(t) for t in tasks]
    for task, out in zip(tasks, done, strict=True):
        rows += [Row(g, c, m, task.model, o) for g, c, m, o in out]
        if args.verbose:
            for g, c, m, o in out:
                slow = f" [mostly slow: {', '.join(o.masked)}]" if o.masked else ""
                head = f"  {task.model} seed {task.seed} {g} {c} {m}: {o.repeats} repeats{slow}"
                print(f"{head}: {o.reason[:300]}")
    lines, tally = scenario_table(rows, models)
    print("\n".join(lines))
    print(
        f"rows: {tally['PASS']} PASS, {tally['FAIL']} FAIL, {tally['UNDECIDED']} UNDECIDED (the Wilson "
        f"interval straddles the bar: more seeds decide it), {tally['-']} reported without a bar"
    )
    for scenario in SCENARIOS:
        wrong = [r for r in rows if r.group == "scenario" and r.candidate == scenario.name]
        wrong = [r for r in wrong if r.outcome.decision != scenario.expected]
        for r in wrong[:2]:
            print(f"  e.g. {scenario.name} / {r.model}: {r.outcome.reason[:300]}")
    capacity = capacity_table(rows, models)
    if capacity:
        print("the capacity rule alone (issue 42, item 3):")
        print("\n".join(capacity))
    spent = scenario_time(rows)
    if spent:
        print(spent)
    mix_ok = True
    if not args.no_mix:
        mix, mix_ok = mix_table(rows)
        print("\n".join(mix))
    print(f"[{time.monotonic() - started:.0f} s]")
    if tally["FAIL"] or not mix_ok:
        return 1
    return 2 if tally["UNDECIDED"] else 0


if __name__ == "__main__":
    raise SystemExit(main())

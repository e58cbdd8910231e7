"""The drift bracket (gates/bracket.py) measured on the decision-quality benchmark, paired: every sweep is
measured once, as ``benchmarks/decision_quality.py`` measures it, and its final verdict is judged twice, with
the rule and without it (the concurrency gate's failures judged against the opening repeats alone, as before
the rule). The rule acts only once the baseline's block after the candidate exists, so an adaptive sweep's
looks, and with them its repeats, are the same both ways: the two verdicts differ by the rule alone.

    PYTHONPATH=. .venv/bin/python benchmarks/decision_bracket.py --seeds 100 --model measured \\
        --scenario identical --mode fixed --mode adaptive --jobs 1

Prints one row per scenario, noise model and mode: the rejects and keeps without and with the rule (95%
Wilson intervals), the sweeps whose decision changed, and (``--verbose``) the reasons of every sweep
changed or rejected.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from unittest.mock import patch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.decision.scenarios import PROFILES, SCENARIOS  # noqa: E402
from benchmarks.decision.synthetic_sweep import judge_sweep_once  # noqa: E402
from benchmarks.decision_quality import _pool  # noqa: E402
from benchmarks.noise_models import NOISE_MODELS, wilson_interval  # noqa: E402
from gates import evaluate_sweep  # noqa: E402
from gates.sequential import SequentialPlan  # noqa: E402


def rule_off() -> AbstractContextManager[object]:
    """The concurrency gate as before the rule: no block after the candidate is read."""
    return patch("gates.concurrency.host_shift", return_value=None)


@dataclass(frozen=True)
class Pair:
    scenario: str
    model: str
    mode: str
    seed: int
    before: str  # the decision without the rule
    after: str  # with it
    reason_before: str
    reason_after: str


def run_one(job: tuple[str, str, str, int, int]) -> Pair:
    scenario_name, model_name, mode, seed, repeats = job
    pool = _pool(1.0, 0, 12)
    cfg = pool.cfg
    gates_cfg = replace(
        cfg.gates,
        loaded_profiles=[p for p in cfg.gates.loaded_profiles if p in PROFILES],
        bootstrap_resamples=500,
    )
    scenario = next(s for s in SCENARIOS if s.name == scenario_name)
    plan = SequentialPlan(repeats, repeats) if mode == "fixed" else SequentialPlan(1, 5)
    with tempfile.TemporaryDirectory(prefix="gauntlet-dqb-") as tmp:
        sweep = Path(tmp) / "s"
        outcome = judge_sweep_once(
            pool,
            NOISE_MODELS[model_name],
            ("baseline", scenario.speed),
            sweep,
            key=f"0:{seed}:{scenario_name}",  # decision_quality.py's key: the same sweeps
            baseline_repeats=repeats,
            plan=plan,
            gates=gates_cfg,
            recovery_profiles=cfg.run.recovery_profiles,
            interleave_repeats=cfg.run.interleave_repeats if cfg.run.interleave else 0,
            confirm_runs=cfg.run.confirm_runs,
            effects=scenario.effects,
            capacity=scenario.capacity,
            capacity_in_blocks=cfg.capacity.in_blocks,
        )
        with rule_off():
            before = evaluate_sweep(sweep, gates_cfg, baseline="baseline", plan=plan).verdicts[0]
    return Pair(
        scenario_name,
        model_name,
        mode,
        seed,
        before.decision,
        outcome.decision,
        before.reason,
        outcome.reason,
    )


def _rate(count: int, n: int) -> str:
    low, high = wilson_interval(count, n)
    return f"{count}/{n} [{low:.0%}, {high:.0%}]"


def table(pairs: Sequence[Pair]) -> list[str]:
    lines = [
        "| scenario | noise | mode | seeds | rejected without the rule | rejected with it | kept without | "
        "kept with | decisions changed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str, str], list[Pair]] = {}
    for p in pairs:
        groups.setdefault((p.scenario, p.model, p.mode), []).append(p)
    for (scenario, model, mode), rows in groups.items():
        n = len(rows)
        changed = [f"{p.before} -> {p.after}" for p in rows if p.before != p.after]
        counts = {c: changed.count(c) for c in dict.fromkeys(changed)}
        lines.append(
            f"| {scenario} | {model} | {mode} | {n} | "
            f"{_rate(sum(p.before == 'reject' for p in rows), n)} | "
            f"{_rate(sum(p.after == 'reject' for p in rows), n)} | "
            f"{_rate(sum(p.before == 'keep' for p in rows), n)} | "
            f"{_rate(sum(p.after == 'keep' for p in rows), n)} | "
            f"{', '.join(f'{c} {k}' for c, k in counts.items()) or '-'} |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="baseline (and fixed) repeats")
    parser.add_argument("--model", action="append", choices=list(NOISE_MODELS), required=True)
    parser.add_argument("--scenario", action="append", choices=[s.name for s in SCENARIOS], required=True)
    parser.add_argument("--mode", action="append", choices=["fixed", "adaptive"], required=True)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--verbose", action="store_true", help="reasons of changed or rejected sweeps")
    args = parser.parse_args(argv)
    started = time.monotonic()
    jobs = [
        (scenario, model, mode, seed, args.repeats)
        for scenario in args.scenario
        for model in args.model
        for mode in args.mode
        for seed in range(args.first_seed, args.first_seed + args.seeds)
    ]
    if args.jobs > 1:
        _pool(1.0, 0, 12)  # replayed once; forked workers inherit it
        with ProcessPoolExecutor(args.jobs) as workers:
            pairs = list(workers.map(run_one, jobs))
    else:
        pairs = []
        for job in jobs:  # one line per sweep on stderr: a long run shows where it is
            pairs.append(run_one(job))
            p = pairs[-1]
            print(f"{p.scenario} {p.model} {p.mode} seed {p.seed}: {p.before} -> {p.after}", file=sys.stderr)
    print("\n".join(table(pairs)))
    if args.verbose:
        for p in pairs:
            if p.before != p.after or "reject" in (p.before, p.after):
                print(f"  {p.scenario} {p.model} {p.mode} seed {p.seed}: {p.before} -> {p.after}")
                print(f"    without: {p.reason_before[:600]}")
                print(f"    with:    {p.reason_after[:900]}")
    print(f"[{time.monotonic() - started:.0f} s]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What the load client's lateness can do to a loaded median TTFT, per request, over HTTP on the simulator.

Starts ``python -m launch.sim`` with the baseline candidate's flags (:mod:`benchmarks.sim_throughput`) and
runs the configured loaded profiles at full size through the load runner (:func:`load.runner.run_profile`)
``--runs`` times each. Prints, per run, each request's dispatch lateness (``sent_s - scheduled_s``: the
burst of requests scheduled at the run's first instant and the closed loop's turnarounds apart), the
median TTFT, the median of TTFT plus each request's own lateness, and their difference: how far the
lateness can have lowered the median (:func:`gates.lag.run_lag_effect`), against the run's p99 lag the
earlier rule added to it. Not a test: the figures depend on the machine's load; copy them with the
command, machine and date into docs/measurements/decision-quality.md.

    .venv/bin/python benchmarks/lag_effect.py --runs 6                    # short and decode_heavy
    .venv/bin/python benchmarks/lag_effect.py --runs 3 --profile prefill_10k
    .venv/bin/python benchmarks/lag_effect.py --runs 2 --capacity-level 96 --capacity-level 128

``--capacity-level N`` runs the capacity search's run of that level instead (``conf/experiment/demo_search``'s
capacity settings: one wave of N requests, no warmup, so the whole run is one burst) and prints the SLO's
TTFT p99, its p99 over TTFT plus each request's own lateness (what :func:`load.goodput.late_margin`
reads), the p99 rule's (the run's p99 lag added to the p99), and how many first-token waves the burst got:
how much of the lag the slow requests' own lateness is.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.sim_throughput import start_server  # noqa: E402
from contracts.layout import RepeatPaths, candidate_dir, candidate_root  # noqa: E402
from contracts.results import RequestRecord  # noqa: E402
from contracts.sweepdir import load_results  # noqa: E402
from gates.lag import run_lag_effect  # noqa: E402
from load.runner import run_profile  # noqa: E402
from orchestrator.config.compose import load  # noqa: E402
from orchestrator.measure.capacity import level_workload  # noqa: E402


def _ttft(record: RequestRecord) -> float:
    return float("inf") if record.ttft_s is None else record.ttft_s


def describe(records: Sequence[RequestRecord]) -> dict[str, float]:
    """The run's lateness figures (s): the burst's size and largest lateness, the turnarounds' median and
    p90, the p99 over every request, and the medians of TTFT and of TTFT plus lateness."""
    late = np.array([max(0.0, r.sent_s - r.scheduled_s) for r in records])
    first = min(r.scheduled_s for r in records)
    burst = np.array([r.scheduled_s - first < 1e-6 for r in records])
    ttft = np.array([_ttft(r) for r in records])
    turns = late[~burst] if (~burst).any() else np.array([0.0])
    return {
        "burst": float(burst.sum()),
        "burst_max": float(late[burst].max()),
        "burst_median": float(np.median(late[burst])),
        "turn_median": float(np.median(turns)),
        "turn_p90": float(np.quantile(turns, 0.9)),
        "p99": float(np.percentile(late, 99)),
        "ttft": float(np.median(ttft)),
        "scheduled": float(np.median(ttft + late)),
    }


def capacity_runs(port: int, levels: Sequence[int], runs: int) -> None:
    """Each capacity level's run ``runs`` times: the TTFT p99 with and without each request's lateness."""
    cfg = load(["+experiment=demo_search"])[0]
    cap = cfg.capacity
    assert cap.profile is not None
    print(
        "level run | requests | lateness p99/max ms | TTFT p99 s | p99(TTFT+lateness) s | p99 rule s | "
        "own lateness at the p99 ms (p99 lag ms) | first-token waves"
    )
    with tempfile.TemporaryDirectory(prefix="gauntlet-lag-") as tmp:
        for k in range(runs):
            for level in levels:
                out = candidate_dir(Path(tmp), "baseline") / cap.profile / f"r{k}-c{level}"
                run_profile(
                    f"http://127.0.0.1:{port}",
                    cfg.service.served_model_name,
                    level_workload(cfg.workloads[cap.profile], cap, level),
                    candidate="baseline",
                    fingerprint="sha256:" + "0" * 64,
                    repeat=k,
                    out_dir=out,
                    backend="sim",
                    host="sim",
                    time_scale=1.0,
                    progress=False,
                )
                records = [
                    RequestRecord.model_validate_json(line) for line in RepeatPaths(out).records.open()
                ]
                late = np.array([max(0.0, r.sent_s - r.scheduled_s) for r in records])
                ttft = np.array([_ttft(r) for r in records])
                p99, lagged, lag = (float(np.percentile(x, 99)) for x in (ttft, ttft + late, late))
                waves = len(np.unique(np.round(ttft + late, 2)))
                print(
                    f"c{level} r{k} | {len(records)} | {lag * 1e3:.1f}/{late.max() * 1e3:.1f} | {p99:.4f} | "
                    f"{lagged:.4f} | {p99 + lag:.4f} | {(lagged - p99) * 1e3:.1f} ({lag * 1e3:.1f}) | "
                    f"{waves}",
                    flush=True,
                )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=6, help="runs of each profile")
    parser.add_argument("--profile", action="append", help="loaded profiles (default: short, decode_heavy)")
    parser.add_argument("--time-scale", type=float, default=1.0, help="the simulator's --sim-time-scale")
    parser.add_argument("--capacity-level", type=int, action="append", help="a capacity level's run instead")
    args = parser.parse_args(argv)
    if args.capacity_level:
        started = time.monotonic()
        proc, port = start_server(1.0, None)
        try:
            capacity_runs(port, args.capacity_level, args.runs)
        finally:
            proc.terminate()
            proc.wait(10)
        print(f"[{time.monotonic() - started:.0f} s]")
        return 0
    cfg = load([])[0]
    profiles = args.profile or ["short", "decode_heavy"]
    started = time.monotonic()
    proc, port = start_server(args.time_scale, None)
    print(
        "profile run | requests (burst) | burst lateness median/max ms | turnarounds median/p90 ms | "
        "p99 ms | median TTFT s | median TTFT+lateness s | effect ms (p99 ms)"
    )
    try:
        with tempfile.TemporaryDirectory(prefix="gauntlet-lag-") as tmp:
            for k in range(args.runs):
                for profile in profiles:
                    out = candidate_dir(Path(tmp), "baseline") / profile / f"r{k}"
                    run_profile(
                        f"http://127.0.0.1:{port}",
                        cfg.service.served_model_name,
                        cfg.workloads[profile],
                        candidate="baseline",
                        fingerprint="sha256:" + "0" * 64,
                        repeat=k,
                        out_dir=out,
                        backend="sim",
                        host="sim",
                        time_scale=args.time_scale,
                        progress=False,
                    )
                    run = load_results(Path(tmp), candidate_root("baseline"), "baseline").profiles[profile][k]
                    f = describe(run.records)
                    effect = run_lag_effect(run, _ttft)
                    print(
                        f"{profile} r{k} | {len(run.records)} ({f['burst']:.0f}) | "
                        f"{f['burst_median'] * 1e3:.1f}/{f['burst_max'] * 1e3:.1f} | "
                        f"{f['turn_median'] * 1e3:.2f}/{f['turn_p90'] * 1e3:.2f} | {f['p99'] * 1e3:.1f} | "
                        f"{f['ttft']:.4f} | {f['scheduled']:.4f} | {effect * 1e3:.1f} ({f['p99'] * 1e3:.1f})",
                        flush=True,
                    )
    finally:
        proc.terminate()
        proc.wait(10)
    print(f"[{time.monotonic() - started:.0f} s]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A launched search with failure under load injected (issue 43, item 9): real sweeps, real launcher, the
simulator, the load runner; a point whose server dies under load must be infeasible and never relaunched.

Each seed runs ``python -m orchestrator -m`` as a user would, on the integration tests' small simulated
experiment (``tests/integration/conf``: ``sim_small``, ``search=small``, a capacity search of a few levels)
with the space's ``max_num_batched_tokens`` dropped and a field added whose value 12 makes the simulator
die after 12 finished requests (``--sim-crash-after-requests``: :mod:`benchmarks.search.launched`), TPE
after 2 random trials, 6 launches (5 trials, 1 confirmation) over 6 points. Its ``search/trials.json`` is
judged by :func:`benchmarks.search.launched.check`.

    nice -n 19 .venv/bin/python benchmarks/search_launched.py --seeds 10-12

Results, command, machine and date: docs/measurements/search-quality.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.search.launched import CRASH, FIELD, NEVER, FailureCheck, check
from benchmarks.search_quality import seeds_of
from contracts.layout import latest_link
from contracts.trials import read_search

#: The repository: where the sweeps run.
ROOT = Path(__file__).resolve().parents[1]

#: The sweep's overrides besides the seed, the port and the sweeps' folder.
OVERRIDES = (
    "hydra.searchpath=[file://tests/integration/conf]",
    "+experiment=sim_small",
    "search=small",
    "run.confirm_runs=0",
    "run.retained_after_sweep=stop",  # nothing left running after each seed
    "capacity.profile=decode_heavy",
    "capacity.start=8",
    "capacity.max_points=3",
    "capacity.waves=1",
    "capacity.min_requests=8",
    "capacity.noise=0",
    "++host.sim_args.sim-startup-s=0.2",
    "search.sampler=tpe",
    "search.startup_trials=2",
    "search.max_launches=6",
    "~search.space.max_num_batched_tokens",
    f"+search.space.{FIELD}='choice({NEVER},{CRASH})'",
)


def run_one(seed: int, port: int, sweeps: Path, timeout: float) -> tuple[int, float, Path | None, str]:
    """One launched search: its exit code, wall seconds, sweep directory and output's tail."""
    cmd = [
        sys.executable,
        "-m",
        "orchestrator",
        "-m",
        *OVERRIDES,
        f"search.seed={seed}",
        f"service.port={port}",
        f"run.sweeps_dir={sweeps}",
    ]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)
        code, out = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, out = 124, str(exc.stdout or "")
    wall = time.perf_counter() - start
    link = latest_link(sweeps)
    sweep = link.resolve() if link.exists() else None
    if sweep is not None and code not in (0, 8):  # a sweep cut short: stop what it left running
        stop = [sys.executable, "-m", "orchestrator", "stop", str(sweep)]
        subprocess.run(stop, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    return code, wall, sweep, out[-2500:]


def row(seed: int, code: int, wall: float, found: FailureCheck) -> str:
    return (
        f"| {seed} | {code} | {wall:.0f} | {found.trials} | {found.launched} | {found.crash_launched} | "
        f"{found.crash_infeasible} | {found.crash_asked_again} | {found.relaunched} | "
        f"{found.crash_finalists} | {'yes' if found.passed else 'NO'} |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", default="10-12", help="search seeds: 10-12 or a list")
    parser.add_argument("--port", type=int, default=8471, help="the first seed's service port")
    parser.add_argument("--timeout", type=float, default=600, help="seconds one sweep may take")
    args = parser.parse_args(argv)
    lines = [
        "| seed | exit | wall s | trials | launched | dying point launched | of those infeasible (lost "
        "under load) | dying point asked again (nothing launched) | relaunched | dying finalists | passed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ok = True
    with tempfile.TemporaryDirectory(prefix="search-launched-") as tmp:
        for i, seed in enumerate(seeds_of(args.seeds)):
            code, wall, sweep, tail = run_one(seed, args.port + i, Path(tmp) / str(seed), args.timeout)
            record = read_search(sweep) if sweep is not None else None
            if record is None:
                print(f"seed {seed}: no search record (exit {code}):\n{tail}")
                ok = False
                continue
            found = check(record.trials, [w.name for w in record.finalists])
            ok = ok and found.passed
            for t in record.trials:
                print(f"  seed {seed} {t.name}: {t.params} {t.state} launches {t.launches}: {t.why[:110]}")
            lines.append(row(seed, code, wall, found))
            print(lines[-1], flush=True)
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

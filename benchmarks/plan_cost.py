"""What ``python -m orchestrator plan`` costs per candidate: CPU seconds, measured in a subprocess.

Writes N generated candidates (``gen0`` ... each the baseline with its own ``max_num_seqs``) into a
temporary ``--config-dir`` and plans exactly them (``candidate=glob(gen*)``) in a fresh
``python -m orchestrator plan`` process, whose user + system CPU time is read with
``resource.getrusage(RUSAGE_CHILDREN)``. CPU time, not wall time: the machine may be shared. Prints, per
N, the plan's total CPU time and the cost of each candidate beyond the first, ``(cpu(N) - cpu(1)) /
(N - 1)``, the best of ``--tries`` runs each. Not a test: run it by hand and copy the figures into
docs/measurements/plan-cost.md.

    .venv/bin/python benchmarks/plan_cost.py --counts 1 50 200 --tries 1
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def write_candidates(config_dir: Path, count: int) -> None:
    """``count`` candidate files in ``config_dir/candidate/``: the baseline with one field changed."""
    folder = config_dir / "candidate"
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        (folder / f"gen{index}.yaml").write_text(
            f"defaults:\n  - baseline\n  - _self_\nname: gen{index}\nmax_num_seqs: {64 + index}\n"
        )


def plan_cpu_seconds(count: int) -> float:
    """User + system CPU seconds of one ``plan`` of ``count`` generated candidates (a fresh process)."""
    with tempfile.TemporaryDirectory(prefix="plan-cost-") as tmp:
        config_dir = Path(tmp)
        write_candidates(config_dir, count)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator", "plan", "-cd", str(config_dir), "candidate=glob(gen*)"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"plan of {count} candidates exited {done.returncode}:\n{done.stderr[-2000:]}")
    planned = done.stdout.count("  fingerprint: ")
    if planned != count:
        raise SystemExit(f"plan of {count} candidates planned {planned}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 50, 200], help="candidates per plan")
    parser.add_argument("--tries", type=int, default=1, help="runs per count; the least CPU time is kept")
    args = parser.parse_args(argv)
    counts = sorted(set(args.counts) | {1})
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    cpu = {n: min(plan_cpu_seconds(n) for _ in range(args.tries)) for n in counts}
    print(f"{'candidates':>10}  {'plan CPU s':>10}  {'per candidate beyond the first, ms':>34}")
    for n in counts:
        beyond = "-" if n == 1 else f"{(cpu[n] - cpu[1]) / (n - 1) * 1000:.1f}"
        print(f"{n:>10}  {cpu[n]:>10.2f}  {beyond:>34}")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

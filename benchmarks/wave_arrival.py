"""How a wave of requests reaches the launched simulator's engine: the virtual time between arrivals.

Starts the simulator with the demo search's baseline (``+experiment=demo_search``, its time scale) in a
child that records each request's arrival as the engine is handed it (``Runtime.submit``), runs the given
profiles once each through the load runner (:func:`load.runner.run_profile`), and prints per profile the
arrivals' span and the gaps between them (virtual ms). The simulator's own handling of a request (parse,
count the prompt's tokens) is host time, ``time_scale`` x in virtual time, so a wave the client writes in
one pass reaches the engine one request at a time: the front end the benchmarks' truth replays
(``benchmarks/search/constrained.py``, ``LAUNCHED_FRONT_END``). Not a test: the figures depend on the
machine and its load; copy them with the command, machine and date into docs/measurements/.

    .venv/bin/python benchmarks/wave_arrival.py                      # decode_heavy and prefill_10k
    .venv/bin/python benchmarks/wave_arrival.py --profile short
    .venv/bin/python benchmarks/wave_arrival.py --profile decode_heavy --repeats 12   # stalls and TTFT

Each run's median TTFT is printed beside its gaps: a host stall while a wave arrives shows as a gap of
tens or hundreds of virtual ms, and the requests after it miss a step.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contracts.layout import candidate_dir  # noqa: E402
from launch.sim import runtime  # noqa: E402
from launch.sim.engine import SimRequest  # noqa: E402
from launch.sim.server import main as sim_main  # noqa: E402
from launch.spec import render_spec  # noqa: E402
from load.runner import run_profile  # noqa: E402
from orchestrator.config.compose import load  # noqa: E402

PORT = "8479"


def serve(argv: list[str]) -> int:
    """The child: the simulator, with each arrival the engine is handed written to ``$WAVE_ARRIVALS``."""
    log = open(os.environ["WAVE_ARRIVALS"], "w", buffering=1)  # noqa: SIM115 (open for the child's life)
    submit = runtime.Runtime.submit

    def logged(self: runtime.Runtime, req: SimRequest) -> None:
        log.write(f"{req.arrival:.6f}\n")
        submit(self, req)

    runtime.Runtime.submit = logged  # type: ignore[method-assign]
    gc.collect()  # as ``python -m launch.sim`` does: its imports' heap frozen before it serves
    gc.freeze()
    return sim_main(argv)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--profile", action="append", help="profiles (default: decode_heavy, prefill_10k)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each profile, one after another")
    parser.add_argument("--serve", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve is not None:
        return serve(args.serve)

    cfg = load(["+experiment=demo_search"])[0]
    spec = render_spec(cfg.service, cfg.baseline, cfg.host)
    flags = list(spec.argv[next(i for i, a in enumerate(spec.argv) if a.startswith("--")) :])
    flags[flags.index("--port") + 1] = PORT
    scale = float(flags[flags.index("--sim-time-scale") + 1])
    profiles = [p for p in args.profile or ["decode_heavy", "prefill_10k"] for _ in range(args.repeats)]
    with tempfile.TemporaryDirectory(prefix="gauntlet-wave-") as tmp:
        log = Path(tmp) / "arrivals.txt"
        env = dict(os.environ, WAVE_ARRIVALS=str(log), PYTHONPATH=str(ROOT))
        proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", *flags],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            if b"Starting vLLM API server" in line:
                break
        else:
            raise SystemExit("the simulator did not become ready")
        print(f"the demo's baseline at time scale {scale:g}; arrivals in virtual ms")
        print("profile | wave | span ms | gap median ms | gap p90 ms | gap max ms | median TTFT s")
        try:
            seen = 0
            for k, profile in enumerate(profiles, start=1):
                wl = cfg.workloads[profile]
                out = candidate_dir(Path(tmp), "baseline") / profile / f"r{k}"
                summary = run_profile(
                    f"http://127.0.0.1:{PORT}",
                    cfg.service.served_model_name,
                    wl,
                    candidate="baseline",
                    fingerprint="sha256:" + "0" * 64,
                    repeat=1,
                    out_dir=out,
                    backend="sim",
                    host="sim",
                    time_scale=scale,
                    progress=False,
                )
                arrivals = [float(x) for x in log.read_text().split()]
                ours, seen = arrivals[seen:], len(arrivals)
                wave = ours[wl.warmup_requests :][: int(wl.concurrency or 1)]
                gaps = sorted((b - a) * 1e3 for a, b in pairwise(wave))
                if not gaps:
                    print(f"{profile} | {len(wave)} | - | - | - | - | -")
                    continue
                p90 = gaps[min(len(gaps) - 1, int(0.9 * len(gaps)))]
                print(
                    f"{profile} | {len(wave)} | {(wave[-1] - wave[0]) * 1e3:.1f} | "
                    f"{statistics.median(gaps):.2f} | {p90:.2f} | {gaps[-1]:.2f} | "
                    f"{summary.ttft.p50 if summary.ttft.p50 is not None else float('nan'):.3f}",
                    flush=True,
                )
        finally:
            proc.terminate()
            proc.wait(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

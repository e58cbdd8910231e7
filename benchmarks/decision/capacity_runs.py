"""The decision-quality benchmark's capacity searches: each launch of a sweep (the baseline's opening, the
candidate, the baseline's block after it) searched by the real search core
(:func:`orchestrator.measure.capacity_search.search`) on a server whose SLO margin at load level ``x`` is
``C / x``, with two kinds of noise:

- **launch to launch**: each launch's capacity ``C`` is the configuration's times ``exp(N(0, launch_sd))``
  (the engine's start, the host: what a second launch of one configuration moves; issue 42 measured the
  gain rule's false "up beyond noise" at 14% of identical pairs with sd 3%);
- **run to run**: each run's margin times ``exp(N(0, MARGIN_NOISE))`` (5%, the issue's figure);

and, where the noise model draws one (``measured``), the load client's p99 dispatch lag on each run, whose
margin with it added back is recorded as the sweep records it (the TTFT threshold ``TTFT_S`` binding).
The search runs at the search demo's settings (``conf/experiment/demo_search.yaml``: start 32, 5%
resolution, up to 12 levels, repeats within 10% of the SLO). Written as ``capacity.json`` where the sweep
writes it; the gates read it as they read a sweep's.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from benchmarks.decision.replays import derived_seed
from benchmarks.decision.scenarios import CapacityPlan
from benchmarks.noise_models import NoiseModel
from contracts.layout import SUMMARY_FILE, LaunchPaths, capacity_run_root
from contracts.results import CapacityPoint, CapacityResult, write_model
from orchestrator.measure.capacity import level_label
from orchestrator.measure.capacity_search import SearchSettings, search

#: The search demo's capacity settings (conf/experiment/demo.yaml with demo_search.yaml's resolution).
SETTINGS = SearchSettings(
    start=32, min_level=2, max_level=512, growth=2, resolution=0.05, max_points=12, noise=0.1, integer=True
)
CAPACITY = 128.0  # the baseline configuration's capacity (concurrent requests within the SLO)
MARGIN_NOISE = 0.05  # run-to-run noise of the SLO margin (sd of its log)
TTFT_S = 1.0  # the SLO's TTFT threshold (the interactive SLO): the margin the client's lag moves


def write_capacity(
    directory: Path, plan: CapacityPlan, model: NoiseModel, *, key: str, side: str, factor: float
) -> CapacityResult:
    """Search one launch's capacity (``factor`` x the baseline configuration's) and write ``capacity.json``
    into the launch's ``directory``; its draws come from ``key`` and ``side`` alone (paired across modes)."""
    rng = np.random.default_rng(derived_seed(key, model.name, side, "capacity"))
    capacity = CAPACITY * factor * math.exp(float(rng.normal(0.0, plan.launch_sd)))
    runs: list[CapacityPoint] = []

    def probe(level: float, attempt: int) -> float:
        margin = capacity / level * math.exp(float(rng.normal(0.0, MARGIN_NOISE)))
        lag = model.lag_p99(rng, loaded=True, profile="decode_heavy")
        runs.append(
            CapacityPoint(
                level=level,
                attempt=attempt,
                summary_file=f"{capacity_run_root(level_label(level, integer=True), attempt)}/{SUMMARY_FILE}",
                met=margin >= 1,
                margin=margin,
                attainment=1.0,
                goodput_rps=0.0,
                goodput_tps=0.0,
                output_tps=0.0,
                tps_per_user=None,
                client_lag_s=lag,
                margin_lag_undone=TTFT_S / (TTFT_S / margin + lag) if lag > 0 else margin,
            )
        )
        return margin

    found = search(probe, SETTINGS)
    result = CapacityResult(
        candidate="candidate" if side == "candidate" else "baseline",
        profile="decode_heavy",
        mode="concurrency",
        unit="concurrent",
        slo="interactive",
        slo_text="TTFT p99 <= 1 s",
        capacity=found.low,
        low=found.low,
        high=found.high,
        resolution=SETTINGS.resolution,
        gpus=8,
        points=runs,
        decided={f"{level:g}": held for level, held in found.decided.items()},
    )
    write_model(LaunchPaths(directory).capacity, result)
    return result

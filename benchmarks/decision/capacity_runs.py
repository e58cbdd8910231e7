"""The decision-quality benchmark's capacity searches: each launch of a sweep (the baseline's opening, the
candidate, the baseline's block after it) searched by the real search core
(:func:`orchestrator.measure.capacity_search.search`) on a server whose SLO margin at load level ``x`` is
``C / x``, with two kinds of noise:

- **launch to launch**: each launch's capacity ``C`` is the configuration's times ``exp(N(0, launch_sd))``
  (the engine's start, the host: what a second launch of one configuration moves; issue 42 measured the
  gain rule's false "up beyond noise" at 14% of identical pairs with sd 3%);
- **run to run**: each run's margin times ``exp(N(0, MARGIN_NOISE))`` (5%, the issue's figure);

and, where the noise model draws one (``measured``), the load client's lateness on each run, whose
margin with each request's own lateness added back is recorded as the sweep records it
(:func:`load.goodput.late_margin`, the TTFT threshold ``TTFT_S`` binding; :func:`level_margins`). A level's
run at the demo's settings is one burst: ``max(MIN_REQUESTS, level)`` requests (``waves: 1``, no warmup),
sent at once and leaving later along their send order (:meth:`NoiseModel.request_lags`, up to the run's
drawn lag), whose first tokens come in prefill waves along that order, the last wave holding the p99 (as a
capacity level's run on the simulator over HTTP showed, docs/measurements/decision-quality.md, "Each
request's own lateness in a capacity run"): its latest requests are the slow ones, so their own lateness
is most of the lag. The search runs at the search demo's settings (``conf/experiment/demo_search.yaml``:
start 32, 5% resolution, up to 12 levels, repeats within 10% of the SLO). Written as ``capacity.json``
where the sweep writes it; the gates read it as they read a sweep's.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from benchmarks.decision.replays import derived_seed
from benchmarks.decision.scenarios import CapacityPlan
from benchmarks.noise_models import NoiseModel
from contracts.files import write_model
from contracts.layout import SUMMARY_FILE, LaunchPaths, capacity_run_root
from contracts.results import CapacityPoint, CapacityResult
from load.goodput import censored_percentile, late_margin
from orchestrator.measure.capacity import level_label
from orchestrator.measure.capacity_search import SearchSettings, search

#: The search demo's capacity settings (conf/experiment/demo.yaml with demo_search.yaml's resolution).
SETTINGS = SearchSettings(
    start=32, min_level=2, max_level=512, growth=2, resolution=0.05, max_points=12, noise=0.1, integer=True
)
CAPACITY = 128.0  # the baseline configuration's capacity (concurrent requests within the SLO)
MARGIN_NOISE = 0.05  # run-to-run noise of the SLO margin (sd of its log)
TTFT_S = 1.0  # the SLO's TTFT threshold (the interactive SLO): the margin the client's lag moves
MIN_REQUESTS = 8  # conf/experiment/demo.yaml's capacity.min_requests (waves: 1, warmup_requests: 0)
#: A level's burst gets its first tokens in this many prefill waves along its send order (the simulator
#: over HTTP: 4-7 distinct first-token times at 96-160 in flight, the last wave the last 1/4 to 1/2)
PREFILL_WAVES = 4


def level_margins(level: float, margin: float, span: float) -> tuple[float, float, float]:
    """One level's run as the sweep records it: (its margin, its client's p99 lag, its margin with each
    request's own lateness added back). ``margin``: the TTFT margin observed; ``span``: the run's drawn
    lag, the largest lateness of its burst. Wave ``w`` of ``PREFILL_WAVES`` (by send order) gets its first
    token at ``W (w + 1) / PREFILL_WAVES`` from the burst's schedule, so a request's observed TTFT is that
    less its own lateness; ``W`` is set so that the observed p99 is ``TTFT_S / margin``.

    >>> m, lag, undone = level_margins(128, 1.02, 0.03)   # TTFT p99 0.980 s, the burst up to 30 ms late
    >>> round(lag, 4), round(undone, 4), round(1 / (1 / m + lag), 4)   # the p99 rule: 0.9899
    (0.0298, 0.9951, 0.9899)
    """
    n = max(MIN_REQUESTS, math.ceil(level))
    late = [span * (k / (n - 1)) ** 0.75 for k in range(n)]  # NoiseModel.request_lags' burst shape
    waves = [(k * PREFILL_WAVES // n + 1) / PREFILL_WAVES for k in range(n)]
    target = TTFT_S / margin

    def observed(top: float) -> list[float]:
        return [top * w - d for w, d in zip(waves, late, strict=True)]

    # the p99 lies in the last wave, whose values shift one for one with W
    top = 2 * target - censored_percentile(observed(target), 99)
    values = observed(top)
    lag = censored_percentile(late, 99)
    return margin, lag, late_margin({"ttft": values}, late, {"ttft": TTFT_S}, 99, margin=margin)


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
        span = model.lag_p99(rng, loaded=True, profile="decode_heavy")
        _, lag, undone = level_margins(level, margin, span) if span > 0 else (margin, 0.0, margin)
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
                margin_lag_undone=undone,
            )
        )
        return margin

    found = search(probe, SETTINGS)
    result = found.record(
        runs,
        candidate="candidate" if side == "candidate" else "baseline",
        profile="decode_heavy",
        slo="interactive",
        slo_text="TTFT p99 <= 1 s",
        resolution=SETTINGS.resolution,
        gpus=8,
    )
    write_model(LaunchPaths(directory).capacity, result)
    return result

"""Noise models of the decision-quality benchmark: how a run's timestamps are shifted beyond the replay.

Pipeline position: pure helpers of ``benchmarks/decision_quality.py``. The in-process replay runs in
virtual time with no host and no client, so it has no run-to-run variation beyond its own sampling; a
real run does. Each model here gives every run (side, profile, repeat) a clock factor applied to every
timestamp of the run (TTFT, latencies, duration, hence tokens/s), and optionally a factor per request.

- ``lognormal``: ``exp(N(0, sigma))`` per run, the model Welch's t on log medians assumes;
- ``student_t``: ``exp(sigma * T(3))`` per run: heavy tails (variance 3 sigma^2, rare runs far off);
- ``outlier``: log-normal, and with probability ``outlier_rate`` per side one run of that side (a random
  profile and repeat) is ``outlier_factor`` times slower: a cold first burst;
- ``drift``: log-normal, and every run is slowed by ``exp(drift * s)`` where ``s`` in [0, 1] is its
  position in the sweep's measuring order: the host slows down over the sweep;
- ``request_tails``: log-normal, and each request with probability ``tail_rate`` is slowed by a factor
  ``1 + Pareto(tail_shape)``, at most ``TAIL_CAP`` (per-request outliers: a retransmit, a GC pause); in
  a closed loop the slot is held that much longer, so the run lasts ``sum(extra) / concurrency`` longer;
- ``outlier_runs``: log-normal, and every run (the candidate's first repeat included) is, with
  probability ``run_outlier_rate`` (one in ten), ``outlier_factor`` (3x) slower (issue 21);
- ``bimodal_ttft``: log-normal, and decode_heavy's median TTFT in the measured model's two clusters
  (below), nothing else: what bimodal run-level TTFT alone does to the gates (issue 42);
- ``measured``: drawn from the project's own HTTP runs of the simulator (docs/measurements/sim-ttft-spread.md;
  docs/measurements/decision-quality.md, "The measured model at the benchmark's time scale"): output tokens/s
  within 3.3% over 24 runs (run log-sd 0.03); decode_heavy's median TTFT in two clusters from prefill waves
  (0.25-0.29 s and 0.33-0.42 s around 0.27 s: a run's TTFT alone is 0.93-1.07x or, with probability one half,
  1.22-1.56x, uniform within its cluster). Not short's: a 32-way closed loop whose requests end at different
  times has no waves, and its median TTFT read 0.0587-0.0606 s over 8 HTTP runs at time scale 1 (a 1% spread,
  within the run factor; a first version gave it the clusters). Not prefill_10k's (9.49-10.35 s over 31 runs:
  its burst queues behind whole prefills). An AR(1) drift along the sweep's order (coefficient 0.8,
  innovations 0.02: a slow stretch of the host lasts several runs), one run in ten 3x slower (any run), and
  the load client's p99 dispatch lag per loaded run, written to the summary, as measured over HTTP at time
  scale 1 on the shared 2-core machine (simulator, client and sweep together): short 1.0-4.2 ms (model 1-5
  ms), decode_heavy 15.8-27.0 ms (model 15-30 ms: 128 streams sent at once), prefill_10k not measured
  (decode_heavy's range). A first version drew 2-9 ms for every loaded profile: short's lag in simulated
  seconds at time scale 5 (5.2-8.8 ms; the client's wall lag is what stays, and simulated lag is wall lag
  times the scale). Every loaded run's records carry each request's own lateness in that run's range
  (:meth:`NoiseModel.request_lags`: a burst late along its send order, a closed loop's turnarounds a
  fraction of a millisecond), as the load runner's records do.

    >>> model = NOISE_MODELS["drift"]
    >>> round(model.run_factor(np.random.default_rng(0), position=1.0, outlier=False) / 1.0, 2) > 0
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

TAIL_CAP = 20.0  # a per-request slowdown is at most this factor (a request is timed out eventually)
#: A closed loop's turnaround lateness, median (s): a slot's next request leaves this long after its
#: last one ended (measured 0.25-0.35 ms over HTTP at time scale 1 on the shared 2-core machine)
TURNAROUND_LAG_S = 0.0003
#: The sides whose runs can be outliers: the baseline's opening repeats, the candidate, and the baseline's
#: block after the candidate (ABA). The recovery run is left out (docs/measurements/decision-quality.md
#: says why).
OUTLIER_SIDES = ("baseline", "candidate", "block")


@dataclass(frozen=True)
class NoiseModel:
    """How runs and requests of a benchmark sweep are shifted."""

    name: str
    description: str
    sigma: float = 0.03  # log-sd of the run factor (log-normal), or the scale of the t draw
    student_df: float | None = None  # heavy-tailed run factor: sigma * T(df) on the log scale
    outlier_rate: float = 0.0  # per side: probability that one of its runs is an outlier
    outlier_factor: float = 2.0  # the outlier run is this many times slower
    drift: float = 0.0  # log slowdown from the first to the last run of the sweep
    tail_rate: float = 0.0  # per request: probability of a heavy-tailed slowdown
    tail_shape: float = 1.5  # Pareto shape of that slowdown (smaller = heavier)
    run_outlier_rate: float = 0.0  # per run (any run, first repeat included): probability it is an outlier
    ttft_slow_rate: float = 0.0  # loaded runs: probability that the TTFT lands in the slow cluster
    ttft_fast: tuple[float, float] = (1.0, 1.0)  # loaded runs: TTFT-only factor range, fast cluster
    ttft_slow: tuple[float, float] = (1.0, 1.0)  # loaded runs: TTFT-only factor range, slow cluster
    ar1: float = 0.0  # AR(1) coefficient of a log slowdown carried along the sweep's measuring order
    ar_sigma: float = 0.0  # its innovations' sd
    lag_p99_s: tuple[float, float] = (0.0, 0.0)  # loaded runs: the client's p99 dispatch lag, uniform (s)
    #: per loaded profile, its own p99 dispatch lag range (s), where it differs from ``lag_p99_s``
    lag_by_profile: tuple[tuple[str, tuple[float, float]], ...] = ()
    #: the loaded profiles whose TTFT falls in the two clusters (None: every loaded profile)
    ttft_profiles: tuple[str, ...] | None = None

    def run_factor(self, rng: np.random.Generator, *, position: float, outlier: bool) -> float:
        """The clock factor of one run at ``position`` (0..1) in the sweep's measuring order."""
        if self.student_df is not None:
            log = self.sigma * float(rng.standard_t(self.student_df))
        else:
            log = float(rng.normal(0.0, self.sigma)) if self.sigma > 0 else 0.0
        log += self.drift * position
        factor = math.exp(log)
        return factor * self.outlier_factor if outlier else factor

    def run_outlier(self, rng: np.random.Generator) -> bool:
        """Is this run (any run) one of the rare slow ones?"""
        return self.run_outlier_rate > 0 and bool(rng.random() < self.run_outlier_rate)

    def ar_step(self, rng: np.random.Generator, previous: float) -> float:
        """The next run's log slowdown of the AR(1) drift (0 without one)."""
        if self.ar1 <= 0 and self.ar_sigma <= 0:
            return 0.0
        return self.ar1 * previous + float(rng.normal(0.0, self.ar_sigma))

    def ttft_factor(self, rng: np.random.Generator, *, loaded: bool, profile: str = "") -> float:
        """A loaded run's TTFT-only factor: the burst's median lands one prefill wave later. The draw is
        made for every loaded run (the later draws stay where they were); it applies only to the
        profiles in ``ttft_profiles``."""
        if not loaded or self.ttft_slow_rate <= 0:
            return 1.0
        low, high = self.ttft_slow if rng.random() < self.ttft_slow_rate else self.ttft_fast
        factor = float(rng.uniform(low, high))
        return factor if self.ttft_profiles is None or profile in self.ttft_profiles else 1.0

    def lag_p99(self, rng: np.random.Generator, *, loaded: bool, profile: str = "") -> float:
        """A loaded run's p99 dispatch lag of the load client (s): the profile's own range, else
        ``lag_p99_s``."""
        low, high = dict(self.lag_by_profile).get(profile, self.lag_p99_s)
        return float(rng.uniform(low, high)) if loaded and high > 0 else 0.0

    def request_lags(self, rng: np.random.Generator, span: float, burst: Sequence[bool]) -> list[float]:
        """Each request's own dispatch lateness (s) in a loaded run whose lag was drawn as ``span``
        (:meth:`lag_p99`), by record order; ``burst``: the request was sent at the run's first instant
        (its slot's first request). The shape is what the load runner's records show over HTTP at time
        scale 1 (docs/measurements/decision-quality.md, "Each request's own lateness"): a burst sent at
        once leaves later along its send order, up to ``span`` (``span * q ** 0.75`` at position ``q``
        in 0..1: half the burst later than 0.59 of it, as measured 0.50-0.67); a closed loop's
        turnarounds are a fraction of a millisecond late (log-normal, median 0.3 ms, log-sd 0.35; measured
        medians 0.25-0.35 ms, p90 0.37-0.52 ms), at most ``span``. Nothing without a span."""
        if span <= 0:
            return [0.0] * len(burst)
        size = sum(burst)
        position = 0
        out: list[float] = []
        for first in burst:
            if first:
                q = position / (size - 1) if size > 1 else 1.0
                out.append(span * q**0.75)
                position += 1
            else:
                out.append(min(span, TURNAROUND_LAG_S * math.exp(0.35 * float(rng.normal()))))
        return out

    def request_factors(self, rng: np.random.Generator, n: int) -> list[float]:
        """One factor per request (1.0 unless a heavy-tailed slowdown hits it)."""
        if self.tail_rate <= 0:
            return [1.0] * n
        hit = rng.random(n) < self.tail_rate
        slow = np.minimum(1.0 + rng.pareto(self.tail_shape, n), TAIL_CAP)
        return [float(s) if h else 1.0 for h, s in zip(hit, slow, strict=True)]

    def outlier_run(self, rng: np.random.Generator, runs: int) -> int | None:
        """Which of a side's ``runs`` (in measuring order) is the outlier, if any."""
        if self.outlier_rate <= 0 or runs == 0 or rng.random() >= self.outlier_rate:
            return None
        return int(rng.integers(0, runs))


NOISE_MODELS: dict[str, NoiseModel] = {
    m.name: m
    for m in (
        NoiseModel("lognormal", "run factor exp(N(0, 0.03))"),
        NoiseModel("student_t", "run factor exp(0.03 * T(3))", student_df=3.0),
        NoiseModel(
            "outlier",
            "log-normal 0.03; per side, with probability 0.25, one run 2x slower",
            outlier_rate=0.25,
        ),
        NoiseModel("drift", "log-normal 0.03; the host slows by 4% from first to last run", drift=0.04),
        NoiseModel(
            "request_tails",
            "log-normal 0.03; 5% of requests slowed by 1 + Pareto(1.5)",
            tail_rate=0.05,
        ),
        NoiseModel(
            "outlier_runs",
            "log-normal 0.03; every run, the first repeat included, 3x slower with probability 0.1",
            run_outlier_rate=0.1,
            outlier_factor=3.0,
        ),
        NoiseModel(
            "bimodal_ttft",
            "log-normal 0.03; decode_heavy's TTFT in two clusters, 0.93-1.07x or (half the runs) 1.22-1.56x "
            "(the measured model's prefill waves alone: no drift, no outlier runs, no client lag)",
            ttft_slow_rate=0.5,
            ttft_fast=(0.25 / 0.27, 0.29 / 0.27),
            ttft_slow=(0.33 / 0.27, 0.42 / 0.27),
            ttft_profiles=("decode_heavy",),
        ),
        NoiseModel(
            "measured",
            "log-normal 0.03; decode_heavy's TTFT in two clusters, 0.93-1.07x or (half the runs) "
            "1.22-1.56x (prefill waves; short's and prefill_10k's measured spreads, 1%, are within the run "
            "factor); AR(1) drift 0.8/0.02; one run in ten 3x slower; client lag p99 per loaded run "
            "1-5 ms on short, 15-30 ms on decode_heavy and prefill_10k",
            run_outlier_rate=0.1,
            outlier_factor=3.0,
            ttft_slow_rate=0.5,
            ttft_fast=(0.25 / 0.27, 0.29 / 0.27),
            ttft_slow=(0.33 / 0.27, 0.42 / 0.27),
            ar1=0.8,
            ar_sigma=0.02,
            lag_p99_s=(0.001, 0.005),
            lag_by_profile=(("decode_heavy", (0.015, 0.030)), ("prefill_10k", (0.015, 0.030))),
            ttft_profiles=("decode_heavy",),
        ),
    )
}


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial rate.

    >>> low, high = wilson_interval(0, 40)
    >>> low, round(high, 3)
    (0.0, 0.088)
    """
    if n == 0:
        return 0.0, 1.0
    z = float(norm.ppf(0.5 + confidence / 2))
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class RateBar:
    """A requirement on a rate: at least (or at most) ``bound`` of the sweeps get ``decision``."""

    decision: str
    bound: float  # a fraction of the sweeps
    at_least: bool

    def __str__(self) -> str:
        return f"{self.decision} {'>=' if self.at_least else '<='} {self.bound:.1%}".replace(".0%", "%")


def judge_rate(bar: RateBar, count: int, n: int, confidence: float = 0.95) -> str:
    """``PASS`` when the rate's Wilson interval lies wholly on the allowed side of the bar, ``FAIL`` when
    it lies wholly on the other side, ``UNDECIDED`` when it straddles the bar (the seeds cannot tell: a
    point count such as 36/40 against "at least 90%" is not evidence that the rate is 90%).

    >>> at_least_90 = RateBar("reject", 0.9, at_least=True)
    >>> [judge_rate(at_least_90, k, 40) for k in (40, 36, 30)]
    ['PASS', 'UNDECIDED', 'FAIL']
    """
    low, high = wilson_interval(count, n, confidence)
    allowed, beyond = (
        (low >= bar.bound, high < bar.bound) if bar.at_least else (high <= bar.bound, low > bar.bound)
    )
    return "PASS" if allowed else "FAIL" if beyond else "UNDECIDED"


def seeds_to_decide(
    bar: RateBar, count: int, n: int, confidence: float = 0.95, limit: int = 100_000
) -> int | None:
    """How many sweeps would decide the bar if the observed rate held (None: never, at the bar itself,
    or past ``limit``).

    >>> seeds_to_decide(RateBar("keep", 0.025, at_least=False), 0, 40)
    150
    """
    rate = count / n if n else 0.0
    if rate == bar.bound:
        return None
    size = max(n, 1)
    while size <= limit:
        if judge_rate(bar, round(rate * size), size, confidence) != "UNDECIDED":
            return size
        size = size + 1 if size < 1000 else int(size * 1.01) + 1
    return None

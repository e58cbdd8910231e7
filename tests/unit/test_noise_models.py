"""The decision-quality benchmark's noise models and the Wilson interval it reports (pure)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.noise_models import NOISE_MODELS, TAIL_CAP, NoiseModel, wilson_interval


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [(0, 40, 0.0, 0.088), (1, 40, 0.0044, 0.129), (38, 40, 0.835, 0.986), (20, 20, 0.839, 1.0)],
)
def test_wilson_interval(successes: int, n: int, low: float, high: float) -> None:
    got = wilson_interval(successes, n)
    assert got == pytest.approx((low, high), abs=1e-3)


def test_every_model_shifts_runs_around_one_and_drift_grows_with_the_position() -> None:
    for model in NOISE_MODELS.values():
        rng = np.random.default_rng(0)
        logs = [math.log(model.run_factor(rng, position=0.0, outlier=False)) for _ in range(2000)]
        assert abs(float(np.median(logs))) < 0.01, model.name
    drift = NOISE_MODELS["drift"]
    start = drift.run_factor(np.random.default_rng(1), position=0.0, outlier=False)
    end = drift.run_factor(np.random.default_rng(1), position=1.0, outlier=False)
    assert end / start == pytest.approx(math.exp(drift.drift))


def test_an_outlier_run_is_the_configured_factor_slower_at_the_configured_rate() -> None:
    model = NOISE_MODELS["outlier"]
    plain = model.run_factor(np.random.default_rng(2), position=0.5, outlier=False)
    slow = model.run_factor(np.random.default_rng(2), position=0.5, outlier=True)
    assert slow / plain == pytest.approx(model.outlier_factor)
    rng = np.random.default_rng(3)
    picks = [model.outlier_run(rng, 12) for _ in range(4000)]
    assert sum(p is not None for p in picks) / len(picks) == pytest.approx(model.outlier_rate, abs=0.03)
    assert NoiseModel("none", "").outlier_run(rng, 12) is None


def test_request_tails_hit_the_configured_share_and_are_capped() -> None:
    model = NOISE_MODELS["request_tails"]
    factors = model.request_factors(np.random.default_rng(4), 20_000)
    slowed = [f for f in factors if f > 1.0]
    assert len(slowed) / len(factors) == pytest.approx(model.tail_rate, abs=0.01)
    assert max(factors) <= TAIL_CAP
    assert NOISE_MODELS["lognormal"].request_factors(np.random.default_rng(4), 3) == [1.0, 1.0, 1.0]


def test_the_measured_model_draws_what_the_project_measured() -> None:
    """One run in ten 3x slower (any run), the loaded TTFT cluster in half the runs of decode_heavy only
    (serial, short and prefill_10k never: their medians spread 1% over HTTP at time scale 1), the
    client's lag per profile as measured (short 1-5 ms, decode_heavy and prefill_10k 15-30 ms) on loaded
    runs only, an AR(1) drift whose stationary sd is ar_sigma / sqrt(1 - ar1^2)."""
    model = NOISE_MODELS["measured"]
    rng = np.random.default_rng(5)
    n = 20_000
    assert sum(model.run_outlier(rng) for _ in range(n)) / n == pytest.approx(0.1, abs=0.01)
    loaded = [model.ttft_factor(rng, loaded=True, profile="decode_heavy") for _ in range(n)]
    slow = [f for f in loaded if f > 1.15]
    assert len(slow) / n == pytest.approx(0.5, abs=0.02)
    assert min(slow) >= 0.33 / 0.27 and max(slow) <= 0.42 / 0.27
    assert all(0.25 / 0.27 <= f <= 0.29 / 0.27 for f in loaded if f <= 1.15)
    assert {model.ttft_factor(rng, loaded=False) for _ in range(100)} == {1.0}
    # the clusters only where the project measured them: prefill_10k's median TTFT spread 1% over HTTP
    assert {model.ttft_factor(rng, loaded=True, profile="prefill_10k") for _ in range(100)} == {1.0}
    # short's median TTFT read 0.0587-0.0606 s over 8 HTTP runs at time scale 1: no prefill waves
    assert {model.ttft_factor(rng, loaded=True, profile="short") for _ in range(100)} == {1.0}
    for profile, (low, high) in (("short", (0.001, 0.005)), ("decode_heavy", (0.015, 0.030))):
        lags = [model.lag_p99(rng, loaded=True, profile=profile) for _ in range(n)]
        assert min(lags) >= low and max(lags) <= high, profile
        assert float(np.mean(lags)) == pytest.approx((low + high) / 2, rel=0.02), profile
    assert model.lag_p99(rng, loaded=True, profile="prefill_10k") >= 0.015
    assert model.lag_p99(rng, loaded=False, profile="decode_heavy") == 0.0
    state, path = 0.0, []
    for _ in range(n):
        state = model.ar_step(rng, state)
        path.append(state)
    assert float(np.std(path)) == pytest.approx(0.02 / math.sqrt(1 - 0.8**2), rel=0.1)
    assert float(np.corrcoef(path[:-1], path[1:])[0, 1]) == pytest.approx(0.8, abs=0.03)


def test_the_older_models_draw_nothing_new() -> None:
    """The new draws are off in the older models, so their documented numbers stay reproducible."""
    for name in ("lognormal", "student_t", "outlier", "drift", "request_tails"):
        model = NOISE_MODELS[name]
        rng = np.random.default_rng(6)
        before = rng.bit_generator.state
        assert not model.run_outlier(rng) and model.ar_step(rng, 0.0) == 0.0
        assert model.ttft_factor(rng, loaded=True) == 1.0 and model.lag_p99(rng, loaded=True) == 0.0
        assert rng.bit_generator.state == before, name


@pytest.mark.parametrize(
    ("burst", "span", "median", "most"),
    [
        # decode_heavy: 128 requests scheduled at once, sent one after another (measured over HTTP at
        # time scale 1: the burst's median lateness 0.50-0.67 of its largest)
        pytest.param(128, 0.024, (0.55 * 0.024, 0.62 * 0.024), 0.024, id="a_burst_late_along_its_send_order"),
        # short: a 32-way burst, then 96 turnarounds a fraction of a millisecond late (measured medians
        # 0.25-0.35 ms)
        pytest.param(32, 0.005, (0.0002, 0.0004), 0.005, id="a_closed_loop_mostly_turnarounds"),
        pytest.param(128, 0.0, (0.0, 0.0), 0.0, id="no_span_no_lateness"),
    ],
)
def test_each_request_is_late_as_the_load_runners_records_show(
    burst: int, span: float, median: tuple[float, float], most: float
) -> None:
    """Issue 42: the gates read each request's own lateness (gates/lag.py), so the benchmark's records
    carry one, in the run's drawn range (the summary's figures are read from them)."""
    firsts = [i < burst for i in range(128)]
    lags = NOISE_MODELS["measured"].request_lags(np.random.default_rng(7), span, firsts)
    assert len(lags) == 128 and min(lags) >= 0.0 and max(lags) <= most + 1e-12
    assert median[0] <= float(np.median(lags)) <= median[1]
    burst_lags = lags[:burst]
    assert burst_lags == sorted(burst_lags)  # later in the send order, later
    if span:
        assert burst_lags[-1] == pytest.approx(span)


def test_the_bimodal_model_is_the_measured_models_clusters_alone() -> None:
    """Issue 42's bimodal decode TTFT: decode_heavy's two clusters, log-normal runs, nothing else."""
    model, measured = NOISE_MODELS["bimodal_ttft"], NOISE_MODELS["measured"]
    assert (model.ttft_slow_rate, model.ttft_fast, model.ttft_slow, model.ttft_profiles) == (
        measured.ttft_slow_rate,
        measured.ttft_fast,
        measured.ttft_slow,
        measured.ttft_profiles,
    )
    rng = np.random.default_rng(8)
    assert not model.run_outlier(rng) and model.ar_step(rng, 0.0) == 0.0
    assert model.lag_p99(rng, loaded=True, profile="decode_heavy") == 0.0

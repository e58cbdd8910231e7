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

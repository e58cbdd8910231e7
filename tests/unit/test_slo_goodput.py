"""Goodput and SLO attainment of one run (load.goodput), the SLO's config checks, spec-decode figures."""

from __future__ import annotations

import math

import pytest

from contracts.errors import ConfigError
from contracts.metrics import slo_text
from contracts.results import RequestRecord
from contracts.schema import SloConfig
from load.goodput import censored_percentile, slo_summary, tpot_stats, tpot_value
from load.metrics import speculative_metrics
from tests.unit.composed import load


def rec(
    index: int,
    *,
    ttft: float | None = 0.5,
    end: float | None = 2.5,
    tokens: int = 101,
    error: str | None = None,
    visible: float | None = 0.6,
    warmup: bool = False,
) -> RequestRecord:
    return RequestRecord(
        index=index,
        warmup=warmup,
        target_prompt_tokens=100,
        target_output_tokens=tokens,
        scheduled_s=0.0,
        sent_s=0.0,
        ttft_s=ttft,
        first_visible_s=visible,
        end_s=end,
        completion_tokens=tokens,
        finish_reason=None if error else "length",
        error=error,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (rec(0, ttft=0.5, end=2.5, tokens=101), 0.02),  # (2.5 - 0.5) / 100
        (rec(0, tokens=1), 0.0),  # one token: no inter-token time
        (rec(0, error="timeout"), math.inf),
        (rec(0, end=None), math.inf),
    ],
)
def test_tpot_is_the_mean_gap_after_the_first_token(record: RequestRecord, expected: float) -> None:
    assert tpot_value(record) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        ([1.0, 2.0, math.inf], 50, 2.0),  # an exact rank never multiplies inf by 0
        ([1.0, 2.0, math.inf], 99, math.inf),
        ([], 99, math.inf),
    ],
)
def test_censored_percentile(values: list[float], q: float, expected: float) -> None:
    assert censored_percentile(values, q) == expected


SLO = SloConfig(name="chat", percentile=50, ttft_s=1.0, tpot_s=0.05)


def test_goodput_counts_only_requests_that_met_every_threshold() -> None:
    records = [
        rec(0),  # ttft 0.5, tpot 0.02: good
        rec(1, ttft=1.5, end=3.5),  # ttft over
        rec(2, ttft=0.5, end=10.5),  # tpot 0.1 over
        rec(3, error="http_5xx", ttft=None, end=None),  # failed: counts against every metric
        rec(4, warmup=True, ttft=9.0),  # warmup: ignored
    ]
    s = slo_summary(records, SLO, duration_s=10.0)
    assert (s.good_requests, s.attainment) == (1, 0.25)
    assert s.goodput_rps == pytest.approx(0.1)
    assert s.goodput_tps == pytest.approx(10.1)
    assert s.violations == {"ttft": 2, "tpot": 2}
    # p50 of TTFT over [0.5, 1.5, 0.5, inf] = 1.0 (held exactly); TPOT p50 over [0.02, 0.02, 0.1, inf] = 0.06
    assert s.observed["ttft"] == pytest.approx(1.0)
    assert s.observed["tpot"] == pytest.approx(0.06)
    assert not s.met
    assert s.margin == pytest.approx(0.05 / 0.06)


def test_a_run_holds_the_slo_when_every_percentile_is_within_its_threshold() -> None:
    s = slo_summary([rec(i) for i in range(10)], SLO, duration_s=5.0)
    assert s.met and s.attainment == 1.0
    assert s.margin == pytest.approx(min(1.0 / 0.5, 0.05 / 0.02))
    assert s.thresholds == {"ttft": 1.0, "tpot": 0.05}


def test_too_many_failures_make_the_percentile_infinite() -> None:
    records = [
        rec(0),
        rec(1, error="timeout", ttft=None, end=None),
        rec(2, error="timeout", ttft=None, end=None),
    ]
    s = slo_summary(records, SLO, duration_s=1.0)
    assert s.observed == {"ttft": None, "tpot": None}
    assert (s.met, s.margin) == (False, 0.0)


def test_no_measured_request_never_holds_the_slo() -> None:
    s = slo_summary([], SLO, duration_s=0.0)
    assert not s.met and s.attainment == 0.0 and s.goodput_tps == 0.0


def test_a_censored_visible_answer_misses_a_first_visible_threshold() -> None:
    slo = SloConfig(percentile=50, first_visible_s=1.0)
    s = slo_summary([rec(0), rec(1, visible=None)], slo, duration_s=1.0)
    assert s.violations == {"first_visible": 1} and s.good_requests == 1


def test_tpot_stats_skip_failed_and_single_token_requests() -> None:
    stats = tpot_stats([rec(0), rec(1, tokens=1), rec(2, error="timeout", ttft=None, end=None)])
    assert stats.n == 1 and stats.p50 == pytest.approx(0.02)


def test_slo_text() -> None:
    assert slo_text(SloConfig(ttft_s=2.0, tpot_s=0.1)) == "TTFT p99 <= 2 s, TPOT p99 <= 100 ms"
    assert slo_text(SloConfig(percentile=90, e2e_s=30)) == "e2e p90 <= 30 s"


def test_the_default_slo_is_composed_from_conf_slo() -> None:
    cfg, _ = load([])
    assert (cfg.slo.name, cfg.slo.ttft_s, cfg.slo.tpot_s, cfg.slo.percentile) == ("default", 2.0, 0.1, 99)
    assert cfg.capacity.profile is None
    tight, _ = load(["slo=interactive"])
    assert (tight.slo.ttft_s, tight.slo.tpot_s) == (1.0, 0.015)


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        (["slo.percentile=0"], "slo.percentile = 0.0: a percentile in (0, 100]"),
        (["slo.ttft_s=-1"], "slo.ttft_s = -1.0: a positive time"),
        (["capacity.profile=nope"], "capacity.profile = 'nope': a workload name"),
        (["capacity.profile=short", "capacity.growth=1"], "capacity.growth = 1.0: a factor > 1"),
        (
            ["capacity.profile=short", "slo.ttft_s=null", "slo.tpot_s=null"],
            "at least one threshold for a capacity search",
        ),
    ],
)
def test_bad_slo_and_capacity_settings_are_named(overrides: list[str], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(overrides)
    assert fragment in str(info.value)


def test_speculative_figures_from_the_counters() -> None:
    spec = speculative_metrics(100, 700, 350)
    assert spec is not None
    assert spec.acceptance_rate == pytest.approx(0.5)
    assert spec.mean_accepted_length == pytest.approx(4.5)
    assert speculative_metrics(None, 700, 350) is None
    empty = speculative_metrics(0, 0, 0)
    assert empty is not None and empty.acceptance_rate is None and empty.mean_accepted_length is None

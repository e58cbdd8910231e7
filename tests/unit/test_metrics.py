"""The metrics vocabulary (contracts.metrics), as tables: extractors, reductions, noise, severity, the one
definition of a reversal, and how figures print."""

from __future__ import annotations

import math

import numpy as np
import pytest

from contracts.metrics import (
    Better,
    beyond_noise,
    by_severity,
    censored_median,
    e2e_value,
    excludes_one,
    find_reversal,
    fmt_bounds,
    fmt_factor,
    fmt_ratio,
    fmt_repeats,
    fmt_value,
    geometric_mean,
    mean,
    median,
    percentile,
    ratio,
    severity,
    stats,
    ttft_value,
    visible_value,
)
from contracts.results import RequestRecord
from contracts.verdicts import Comparison, KeyFigure

# ------------------------------------------------------------------------------------------ extractors


def _record(**fields: object) -> RequestRecord:
    base: dict[str, object] = {
        "index": 0,
        "warmup": False,
        "target_prompt_tokens": 10,
        "target_output_tokens": 10,
        "scheduled_s": 0.0,
        "sent_s": 0.0,
        "ttft_s": 0.2,
        "first_visible_s": 0.5,
        "end_s": 1.5,
        "finish_reason": "stop",
        "http_status": 200,
    }
    return RequestRecord.model_validate(base | fields)


@pytest.mark.parametrize(
    ("record", "ttft", "e2e", "visible"),
    [
        (_record(), 0.2, 1.5, 0.5),
        (_record(first_visible_s=None), 0.2, 1.5, math.inf),  # thinking only: no visible answer
        (
            _record(ttft_s=None, first_visible_s=None, end_s=None, error="connect"),
            math.inf,
            math.inf,
            math.inf,
        ),
        (_record(error="http_5xx"), 0.2, math.inf, 0.5),  # a failed request's latency is censored
    ],
)
def test_extractors_censor_what_never_arrived(
    record: RequestRecord, ttft: float, e2e: float, visible: float
) -> None:
    assert (ttft_value(record), e2e_value(record), visible_value(record)) == (ttft, e2e, visible)


# ------------------------------------------------------------------------------------------ reductions


@pytest.mark.parametrize(
    ("values", "q", "want"),
    [
        ([], 50, None),
        ([3.0], 99, 3.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        ([4.0, 1.0, 3.0, 2.0], 0, 1.0),
        ([4.0, 1.0, 3.0, 2.0], 100, 4.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], 90, 9.1),
    ],
)
def test_percentile(values: list[float], q: float, want: float | None) -> None:
    got = percentile(values, q)
    assert got == pytest.approx(want) if want is not None else got is None


@pytest.mark.parametrize("q", [1, 50, 90, 99])
def test_percentile_matches_numpy(q: float) -> None:
    values = [float(v) for v in np.random.default_rng(7).lognormal(size=101)]
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_rejects_out_of_range() -> None:
    with pytest.raises(ValueError, match="outside 0-100"):
        percentile([1.0], 101)


def test_stats_of_a_sample_and_of_nothing() -> None:
    got = stats([1.0, 2.0, 3.0])
    assert (got.n, got.mean, got.p50, got.min, got.max) == (3, 2.0, 2.0, 1.0, 3.0)
    assert stats([]).p50 is None and stats([]).n == 0


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], None),
        ([3.0], 3.0),
        ([None], math.inf),
        ([1.0, 2.0], 1.5),
        ([1.0, None], math.inf),
        ([1.0, math.inf], math.inf),  # +inf and None are the same censored value
        # the case study: greedy 4/5, probabilistic 3/5 visible answers
        ([12.3, 30.2, 43.95, 61.0, None], 43.95),
        ([20.1, 76.85, 35.4, None, None], 76.85),
        ([1.0, None, None], math.inf),
        ([5.0, 1.0, 3.0, None], 4.0),
    ],
)
def test_median_counts_missing_values_as_infinite(values: list[float | None], expected: float | None) -> None:
    assert median(values) == expected


@pytest.mark.parametrize(
    ("values", "n", "censored", "value", "infinite"),
    [
        ([], 0, 0, None, False),
        ([1.0, 2.0, 3.0], 3, 0, 2.0, False),
        ([1.0, None, 3.0], 3, 1, 3.0, False),
        ([None, None, 1.0], 3, 2, None, True),
        ([1.0, 2.0, 3.0, None], 4, 1, 2.5, False),
        ([1.0, 2.0, None, None], 4, 2, None, True),
        ([None], 1, 1, None, True),
        # the case study's answer gate: 3 of 5 answered
        ([40.0, 76.85, 90.0, None, None], 5, 2, 90.0, False),
    ],
)
def test_censored_median_record(
    values: list[float | None], n: int, censored: int, value: float | None, infinite: bool
) -> None:
    got = censored_median(values)
    assert (got.n, got.censored, got.infinite) == (n, censored, infinite)
    assert got.value_s == value or (value is not None and math.isclose(got.value_s or 0, value))


@pytest.mark.parametrize(
    ("values", "arithmetic", "geometric"),
    [
        ([], None, None),
        ([2.0, 8.0], 5.0, 4.0),
        ([1.0, math.inf], math.inf, math.inf),
    ],
)
def test_means(values: list[float], arithmetic: float | None, geometric: float | None) -> None:
    assert mean(values) == arithmetic
    got = geometric_mean(values)
    assert got == geometric if geometric is None or math.isinf(geometric) else got == pytest.approx(geometric)


@pytest.mark.parametrize(
    ("value", "base", "expected"),
    [(1.0, 2.0, 0.5), (None, 2.0, None), (1.0, None, None), (1.0, 0.0, None), (1.0, math.inf, None)],
)
def test_ratio(value: float | None, base: float | None, expected: float | None) -> None:
    assert ratio(value, base) == expected


# ------------------------------------------------------------------------------------ noise, severity


@pytest.mark.parametrize(
    ("interval", "below", "above"),
    [(None, False, False), ((0.5, 0.9), True, False), ((1.1, 2.0), False, True), ((0.9, 1.1), False, False)],
)
def test_excludes_one(interval: tuple[float, float] | None, below: bool, above: bool) -> None:
    assert (excludes_one(interval, "below"), excludes_one(interval, "above")) == (below, above)


@pytest.mark.parametrize(
    ("value", "interval", "better", "worse", "expected"),
    [
        (0.12, (0.11, 0.13), "higher", True, True),  # output tok/s down, beyond noise: worse
        (0.12, (0.11, 0.13), "higher", False, False),
        (64.7, (58.4, 71.7), "lower", True, True),  # TTFT up, beyond noise: worse
        (0.82, (0.79, 0.85), "lower", False, True),  # serial latency down, beyond noise: better
        (0.82, (0.60, 1.10), "lower", False, False),  # within noise
        (0.90, None, "lower", False, True),  # no interval: beyond the 5% tolerance
        (0.97, None, "lower", False, False),
        (None, None, "lower", True, False),
    ],
)
def test_beyond_noise(
    value: float | None, interval: tuple[float, float] | None, better: Better, worse: bool, expected: bool
) -> None:
    assert beyond_noise(value, interval, better, worse=worse, tolerance=0.05) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, 0.0), (1.0, 0.0), (math.e, 1.0), (1 / math.e, 1.0), (0.0, math.inf), (math.inf, math.inf)],
)
def test_severity(value: float | None, expected: float) -> None:
    assert severity(value) == pytest.approx(expected)


def _cmp(metric: str, ratio_: float | None, profile: str = "decode_heavy") -> Comparison:
    return Comparison(
        metric=metric, profile=profile, status="fail", observed=None, baseline=None, ratio=ratio_
    )


def test_by_severity_orders_the_largest_effect_first_then_output_ttft_prompt() -> None:
    comparisons = [
        _cmp("prompt_tps", 0.5),
        _cmp("stability", None),
        _cmp("ttft_p50", 2.0),  # the same severity as the two tok/s halvings
        _cmp("output_tps", 0.5),
        _cmp("ttft_p50", 64.7, "prefill_10k"),
    ]
    ordered = [(c.metric, c.profile) for c in by_severity(comparisons)]
    assert ordered == [
        ("ttft_p50", "prefill_10k"),
        ("output_tps", "decode_heavy"),
        ("ttft_p50", "decode_heavy"),
        ("prompt_tps", "decode_heavy"),
        ("stability", "decode_heavy"),
    ]


# ------------------------------------------------------------------------------------------- reversal


def _fig(
    metric: str, profile: str, ratio_: float | None, interval: tuple[float, float] | None = None
) -> KeyFigure:
    better = "higher" if metric.endswith("_tps") else "lower"
    return KeyFigure(
        metric=metric,
        profile=profile,
        label=metric,
        unit="tok/s" if better == "higher" else "s",
        better=better,
        value=None if ratio_ is None else ratio_ * 10,
        baseline=None if ratio_ is None else 10.0,
        ratio=ratio_,
        interval=interval,
    )


SERIAL_FASTER = _fig("serial_e2e_p50", "serial", 0.82, (0.79, 0.85))
SERIAL_SLOWER = _fig("serial_e2e_p50", "serial", 1.25, (1.10, 1.40))
SERIAL_NOISY = _fig("serial_e2e_p50", "serial", 0.82, (0.60, 1.10))
OUT_LOSS = _fig("output_tps", "decode_heavy", 0.119, (0.114, 0.124))
TTFT_LOSS = _fig("ttft_p50", "decode_heavy", 64.7, (58.4, 71.7))
OUT_SMALL_LOSS = _fig("output_tps", "prefill_10k", 0.5, (0.45, 0.55))
OUT_GAIN = _fig("output_tps", "decode_heavy", 1.3, (1.2, 1.4))
OUT_NOISY = _fig("output_tps", "decode_heavy", 0.9, (0.7, 1.1))


@pytest.mark.parametrize(
    ("figures", "expected"),
    [
        # the case study: faster on the empty road, far behind under 128-way decode
        ([SERIAL_FASTER, OUT_LOSS, TTFT_LOSS], ("faster", "decode_heavy", 0.119, 64.7)),
        # the strongest opposite effect names the profile
        ([SERIAL_FASTER, OUT_SMALL_LOSS, OUT_LOSS], ("faster", "decode_heavy", 0.119, None)),
        ([SERIAL_SLOWER, OUT_GAIN], ("slower", "decode_heavy", 1.3, None)),
        ([SERIAL_NOISY, OUT_LOSS, TTFT_LOSS], None),  # serial within noise: no ranking to reverse
        ([SERIAL_FASTER, OUT_NOISY], None),  # loaded within noise
        ([SERIAL_FASTER, OUT_GAIN], None),  # both sides agree
        ([OUT_LOSS, TTFT_LOSS], None),  # no serial figure
        (
            [_fig("serial_e2e_p50", "serial", 0.9), _fig("output_tps", "decode_heavy", 0.5)],
            ("faster", "decode_heavy", 0.5, None),
        ),
    ],
)
def test_find_reversal(
    figures: list[KeyFigure], expected: tuple[str, str, float | None, float | None] | None
) -> None:
    found = find_reversal(
        "cand",
        figures,
        serial_profile="serial",
        loaded_profiles=["prefill_10k", "decode_heavy"],
        min_gain=0.05,
        tolerance=0.05,
    )
    if expected is None:
        assert found is None
        return
    assert found is not None and found.candidate == "cand"
    assert (found.direction, found.loaded_profile, found.output_ratio, found.ttft_ratio) == expected


# ----------------------------------------------------------------------------------------- formatting


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (None, "s", "n/a"),
        (math.inf, "s", "inf (censored)"),
        (math.inf, "tok/s", "inf"),
        (0.347, "s", "0.347 s"),
        (4.1, "s", "4.10 s"),
        (22.45, "s", "22.45 s"),
        (1234.0, "s", "1,234 s"),
        (10039.0, "tok/s", "10,039 tok/s"),
        (55.25, "tok/s", "55.2 tok/s"),
        (3.0, "answers", "3 answers"),
        (1.5, "", "1.5"),
    ],
)
def test_fmt_value(value: float | None, unit: str, text: str) -> None:
    assert fmt_value(value, unit) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "n/a"),
        (math.inf, "inf"),
        (0.1192, "0.119x"),
        (1.0, "1.000x"),
        (1.1999, "1.200x"),
        (1.32, "1.32x"),
        (8.39, "8.39x"),
        (64.7, "64.7x"),
        (0.0523, "0.0523x"),
    ],
)
def test_fmt_ratio(value: float | None, text: str) -> None:
    assert fmt_ratio(value) == text


@pytest.mark.parametrize(
    ("interval", "text"),
    [
        (None, ""),
        ((0.114, 0.124), " [0.114x-0.124x]"),
        ((0.0, 2.0), " [unbounded]"),
        ((0.5, math.inf), " [unbounded]"),
    ],
)
def test_fmt_bounds(interval: tuple[float, float] | None, text: str) -> None:
    assert fmt_bounds(interval) == text


@pytest.mark.parametrize(
    ("value", "text"), [(8.39, "8.4"), (1.32, "1.32"), (64.7, "64.7"), (math.inf, "inf")]
)
def test_fmt_factor(value: float, text: str) -> None:
    assert fmt_factor(value) == text


@pytest.mark.parametrize(
    ("values", "unit", "text"),
    [
        ([0.894, 0.632, 0.539], "s", "0.894/0.632/0.539 s"),
        ([10039.0, 9987.5], "tok/s", "10,039/9,988 tok/s"),
        ([], "s", "n/a"),
    ],
)
def test_fmt_repeats(values: list[float], unit: str, text: str) -> None:
    assert fmt_repeats(values, unit) == text

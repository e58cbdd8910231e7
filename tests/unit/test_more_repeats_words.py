"""'About N more repeats would settle it', checked against what more repeats gave (issue 42, item 15): the
count rests on an effect estimated from a few runs, so the verdict says "N or more ... it may be far off",
with the scale if the effect is only what counts, and never promises a number.

The rows are runs of a latency (run medians, seconds) drawn once from a lognormal model (run-to-run sd
0.08; a true ratio of 0.97 for the first five, 0.82 for the last two) and written down: at 3 runs per side
each is an inconclusive gain; the next 5 runs per side show what the estimate was worth."""

from __future__ import annotations

import pytest

from contracts.schema import GatesConfig
from contracts.verdicts import GateResult
from gates.compare import estimated, judge_gain, max_more
from gates.settle import settle_range
from gates.stats import RatioEstimate, run_level_ratio
from gates.verdict import decide

CFG = GatesConfig()


def _look(cand: list[float], base: list[float]) -> GateResult:
    """The latency gain gate as it would read these runs: one comparison, a gain of ``min_gain``."""
    est = run_level_ratio(cand, base, confidence=CFG.confidence)
    comparison = estimated(
        est,
        lambda e: judge_gain(e, "lower", CFG.min_gain),
        metric="ttft_p50",
        profile="short",
        values=(est.ratio, 1.0),
        counts=(len(cand), len(base)),
        unit="s",
        message=f"short median TTFT {est.ratio:.3f}x",
    )
    return GateResult(
        gate="latency_gain",
        role="gain",
        status=comparison.status,
        message=comparison.message,
        comparisons=[comparison],
        more_repeats=max_more([comparison]),
    )


ROWS = [
    # candidate runs, baseline runs, the count at 3 runs, what 5 more per side gave (a count, or settled)
    pytest.param(
        [0.834, 1.003, 0.967, 1.089, 0.86, 1.02, 0.941, 0.918],
        [1.029, 1.098, 1.145, 0.918, 0.944, 0.945, 0.946, 1.023],
        1,
        15,
        id="1_then_15",
    ),
    pytest.param(
        [0.989, 0.934, 0.888, 0.937, 1.034, 1.071, 1.128, 0.868],
        [1.082, 0.982, 1.05, 0.988, 0.88, 0.971, 1.204, 1.115],
        1,
        23,
        id="1_then_23",
    ),
    pytest.param(
        [0.999, 0.963, 0.939, 1.041, 0.893, 1.036, 0.738, 1.047],
        [1.151, 0.981, 1.089, 1.093, 0.924, 0.918, 0.944, 0.943],
        3,
        30,
        id="3_then_30",
    ),
    pytest.param(
        [0.931, 0.994, 0.885, 0.984, 1.025, 0.899, 1.004, 0.936],
        [1.012, 1.001, 1.111, 1.093, 1.167, 0.829, 0.901, 1.018],
        2,
        15,
        id="2_then_15",
    ),
    pytest.param(
        [1.043, 0.926, 0.927, 0.974, 0.824, 1.007, 1.116, 0.981],
        [1.249, 1.102, 1.028, 1.023, 0.876, 1.024, 0.975, 0.946],
        2,
        26,
        id="2_then_26",
    ),
    pytest.param(
        [0.83, 0.808, 0.67, 0.785, 0.817, 0.827, 0.726, 0.789],
        [0.898, 0.964, 0.859, 0.902, 0.863, 0.981, 0.904, 1.022],
        2,
        None,
        id="2_and_it_held",
    ),
    pytest.param(
        [0.844, 0.843, 0.964, 0.734, 0.88, 0.814, 0.819, 0.73],
        [0.995, 1.033, 0.924, 0.949, 0.923, 0.932, 1.016, 0.939],
        4,
        None,
        id="4_and_it_held",
    ),
]


@pytest.mark.parametrize(("cand", "base", "first", "later"), ROWS)
def test_the_count_of_more_repeats_is_never_promised(
    cand: list[float], base: list[float], first: int, later: int | None
) -> None:
    gate = _look(cand[:3], base[:3])
    assert gate.status == "inconclusive" and gate.more_repeats == first
    verdict = decide("c", "baseline", [gate], CFG)
    assert verdict.decision == "inconclusive" and verdict.more_repeats == first
    # No firm number: a lower count, what it assumes, and how sure it is.
    assert "would likely settle it" not in verdict.reason
    assert (
        f"{first} or more repeat(s) per side may settle it: {first} if the effect is as large as measured"
        in (verdict.reason)
    )
    assert "no number can be given if it is smaller" in verdict.reason
    assert "estimated from 3 run(s) per side, it may be far off" in verdict.reason
    assert verdict.settle is not None and verdict.settle.runs == 3
    # What more runs per side gave: settled with the count (the estimate held), or after 5 more a count
    # far beyond it, which only the words "or more ... no number can be given" cover.
    if later is None:
        assert _look(cand[: 3 + first], base[: 3 + first]).status == "pass"
    else:
        after = _look(cand, base)
        assert after.status == "inconclusive" and after.more_repeats == later
        assert 5 + later >= 5 * first  # the first count was off by 5x or more


@pytest.mark.parametrize(
    ("ratio", "interval", "threshold", "measured", "least"),
    [
        (0.85, (0.70, 1.03), 0.95, 2, 40),  # the scale if only 5% counts
        (0.85, (0.70, 1.03), None, 2, None),  # no threshold known: only the count as measured
        (1.20, (0.97, 1.48), 1.0, 2, None),  # a tolerance of 0: nothing short of "no change" counts
        (0.97, (0.60, 1.55), 0.95, None, None),  # beyond 200 repeats: no count at all
    ],
)
def test_the_range_and_its_words(
    ratio: float,
    interval: tuple[float, float],
    threshold: float | None,
    measured: int | None,
    least: int | None,
) -> None:
    found = settle_range(RatioEstimate(ratio, *interval, 0.95, "", 3, 3, 3), threshold)
    if measured is None:
        assert found is None
        return
    assert found is not None and (found.if_measured, found.if_least) == (measured, least)
    words = found.words()
    assert words.startswith(f"{measured} or more repeat(s) per side may settle it")
    assert ("about 40 if it is only as large as what counts (0.950x)" in words) is (least == 40)

"""The decision-quality benchmark's bars: every scenario that deserves a verdict has one, and a bar is
judged on the Wilson interval of its rate, never on the count alone (pure)."""

from __future__ import annotations

from collections import Counter

import pytest

from benchmarks.decision.scenarios import SCENARIOS, bars, judge_row
from benchmarks.noise_models import NOISE_MODELS, RateBar, judge_rate, seeds_to_decide

BY_NAME = {s.name: s for s in SCENARIOS}


@pytest.mark.parametrize(
    ("bar", "count", "n", "result"),
    [
        (RateBar("reject", 0.9, at_least=True), 40, 40, "PASS"),  # [91%, 100%]
        (RateBar("reject", 0.9, at_least=True), 36, 40, "UNDECIDED"),  # 36/40 is the point count, [77%, 96%]
        (RateBar("reject", 0.9, at_least=True), 20, 20, "UNDECIDED"),  # [84%, 100%]
        (RateBar("reject", 0.9, at_least=True), 6, 20, "FAIL"),  # [15%, 52%]
        (RateBar("keep", 0.025, at_least=False), 0, 40, "UNDECIDED"),  # [0%, 9%]
        (RateBar("keep", 0.025, at_least=False), 0, 200, "PASS"),  # [0%, 1.9%]
        (RateBar("keep", 0.025, at_least=False), 3, 20, "FAIL"),  # [5%, 36%]
        (RateBar("reject", 0.05, at_least=False), 2, 40, "UNDECIDED"),  # 2/40 met the old count, [1%, 17%]
    ],
)
def test_a_bar_is_judged_on_the_wilson_interval(bar: RateBar, count: int, n: int, result: str) -> None:
    assert judge_rate(bar, count, n) == result


@pytest.mark.parametrize(
    ("bar", "count", "n", "seeds"),
    [
        (RateBar("keep", 0.025, at_least=False), 0, 40, 150),
        (RateBar("reject", 0.9, at_least=True), 40, 40, 40),
        (RateBar("reject", 0.9, at_least=True), 36, 40, None),  # the observed rate is the bar
    ],
)
def test_seeds_to_decide_at_the_observed_rate(bar: RateBar, count: int, n: int, seeds: int | None) -> None:
    assert seeds_to_decide(bar, count, n) == seeds


@pytest.mark.parametrize("name", ["loaded_ttft_30", "high_concurrency_20", "serial_gain_loaded_loss"])
@pytest.mark.parametrize("model", list(NOISE_MODELS))
def test_the_non_uniform_effects_have_bars_under_every_noise_model(name: str, model: str) -> None:
    got = {(b.decision, b.at_least) for b in bars(BY_NAME[name], model)}
    assert ("keep", False) in got
    if name != "serial_gain_loaded_loss":
        assert ("reject", True) in got


@pytest.mark.parametrize(
    ("name", "decisions", "n", "result"),
    [
        ("loaded_ttft_30", {"reject": 6, "inconclusive": 13, "incomplete": 1}, 20, "FAIL"),
        ("high_concurrency_20", {"reject": 18, "inconclusive": 2}, 20, "UNDECIDED"),
        ("high_concurrency_20", {"reject": 19, "keep": 1}, 20, "UNDECIDED"),
        ("high_concurrency_20", {"reject": 40}, 40, "UNDECIDED"),  # kept 0/40: [0%, 9%] vs <= 2.5%
        ("high_concurrency_20", {"reject": 200}, 200, "PASS"),
        ("loaded_ttft_30", {"reject": 37, "keep": 3}, 40, "FAIL"),  # kept 3/40: [2.6%, 20%]
        ("loaded_ttft_30", {"reject": 38, "keep": 1, "inconclusive": 1}, 40, "UNDECIDED"),
        ("identical", {"neutral": 40}, 40, "UNDECIDED"),
        ("gain_10", {"keep": 1, "reject": 19}, 20, "-"),
    ],
)
def test_a_row_fails_undecides_or_passes_on_its_bars(
    name: str, decisions: dict[str, int], n: int, result: str
) -> None:
    got, checks = judge_row(bars(BY_NAME[name], "measured"), Counter(decisions), n)
    assert got == result, checks
    assert (got == "-") == (checks == ["(reported)"])

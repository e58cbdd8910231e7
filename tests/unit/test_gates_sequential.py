"""Adaptive repeats and the statistics behind the messy-data gates: pure tables."""

from __future__ import annotations

import math

import pytest

from contracts.errors import GateError
from contracts.schema import RunConfig
from contracts.verdicts import Comparison, Gap, GateResult, Verdict
from gates.sequential import SequentialPlan, candidate_plan, loop_decision
from gates.significance import compare_rates, holm
from gates.stats import RatioEstimate, mean_log_ratio_across, one_sided_p


@pytest.mark.parametrize(
    ("done", "decision", "more"),
    [
        (0, None, True),  # before min_repeats: always
        (1, "reject", True),
        (2, None, True),  # no look possible (could not judge): measure on
        (2, "inconclusive", True),
        (2, "reject", False),
        (2, "keep", False),
        (2, "neutral", False),
        (2, "incomplete", False),  # futility: more repeats cannot complete it (client lag, lost baseline)
        (3, "inconclusive", True),
        (4, "inconclusive", False),  # at the most
    ],
)
def test_the_next_repeat_runs_only_while_unsettled(done: int, decision: str | None, more: bool) -> None:
    assert SequentialPlan(2, 4).next_repeat(done, decision) is more  # type: ignore[arg-type]


def test_the_looks_spend_the_error_doubling_and_never_more_than_it() -> None:
    plan = SequentialPlan(2, 5)
    assert plan.adaptive and plan.looks == 4
    shares = [plan.spent(r) for r in (2, 3, 4, 5)]
    assert shares == pytest.approx([1 / 15, 2 / 15, 4 / 15, 8 / 15])
    assert sum(shares) == pytest.approx(1.0)
    assert plan.look_confidence(0.95, 5) == pytest.approx(1 - 0.05 * 8 / 15)
    assert plan.spent(9) == plan.spent(5) and plan.spent(1) == plan.spent(2)  # clamped to the looks
    fixed = SequentialPlan(3, 3)
    assert not fixed.adaptive and fixed.looks == 1 and fixed.look_confidence(0.95, 3) == pytest.approx(0.95)


@pytest.mark.parametrize(
    ("run", "plan"),
    [
        (RunConfig(repeats=3), (3, 3)),
        (RunConfig(repeats=3, min_repeats=2, max_repeats=5), (2, 5)),
        (RunConfig(repeats=3, max_repeats=6), (3, 6)),
        (RunConfig(repeats=3, min_repeats=2), (2, 3)),
    ],
)
def test_candidate_plan_from_the_run_section(run: RunConfig, plan: tuple[int, int]) -> None:
    got = candidate_plan(run)
    assert (got.min_repeats, got.max_repeats) == plan


def test_a_plan_must_be_ordered() -> None:
    with pytest.raises(GateError, match="min_repeats <= max_repeats"):
        SequentialPlan(4, 2)


def test_holm_is_step_down_and_stops_at_the_first_kept() -> None:
    # Sorted: 0.001 (<= 0.05/4), 0.01 (<= 0.05/3), 0.03 (> 0.05/2: stop), 0.02 is never reached.
    got = holm([0.03, 0.001, 0.01, 0.026], 0.05)
    assert [r for r, _ in got] == [False, True, True, False]
    assert [round(level, 4) for _, level in got] == [0.05, 0.0125, 0.0167, 0.025]


@pytest.mark.parametrize(
    ("est", "side", "expected"),
    [
        ((0.9, 0.85, 0.95, 0.02), "below", 0.01),
        ((0.9, 0.85, 0.95, 0.02), "above", 0.99),
        ((1.1, 1.05, 1.2, 0.04), "above", 0.02),
        ((math.inf, math.inf, math.inf, None), "above", 0.0),  # censored in every candidate repeat
        ((1.2, 0.0, math.inf, None), "above", 1.0),  # unbounded: no evidence
    ],
)
def test_one_sided_p(est: tuple[float, float, float, float | None], side: str, expected: float) -> None:
    ratio, low, high, p = est
    estimate = RatioEstimate(ratio, low, high, 0.95, "", 3, 3, 3, p_value=p)
    assert one_sided_p(estimate, side) == pytest.approx(expected)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("cand", "base", "p", "posterior", "lost"),
    [
        # Fisher's exact one-sided p (hypergeometric, exact) and P(candidate's rate lower) under Beta(1, 1)
        # priors (20,000 seeded draws: within 0.01 of the exact integral)
        ((3, 5), (4, 5), 0.5, 0.73, True),  # the case study: a loss, far within noise
        ((15, 20), (20, 20), 0.02356, 0.989, True),  # twenty prompts: a quarter lost is beyond noise
        ((5, 5), (4, 5), 1.0, 0.226, False),  # more answers: no evidence of a loss at all
    ],
)
def test_compare_rates_states_the_exact_test_and_the_posterior(
    cand: tuple[int, int], base: tuple[int, int], p: float, posterior: float, lost: bool
) -> None:
    got = compare_rates(cand, base, confidence=0.95)
    assert got.lost is lost
    assert got.p_value == pytest.approx(p, abs=5e-5)
    assert got.posterior_lower == pytest.approx(posterior, abs=0.01)
    assert got.difference[0] < cand[0] / cand[1] - base[0] / base[1] < got.difference[1]


def test_pooling_the_run_noise_over_profiles_narrows_the_drift_interval() -> None:
    groups = [([0.95], [1.0, 1.01, 0.99]), ([1.9], [2.0, 2.04, 1.98])]
    pooled = mean_log_ratio_across(groups, confidence=0.95)
    assert pooled is not None and pooled.df == 4.0 and (pooled.n_candidate, pooled.n_baseline) == (2, 6)
    alone = mean_log_ratio_across(groups[:1], confidence=0.95)
    assert alone is not None and alone.df == 2.0
    assert pooled.ratio == pytest.approx(math.exp((math.log(0.95 / 1.0) + math.log(1.9 / 2.0066)) / 2), 1e-3)
    width = [math.log(e.high / e.low) for e in (pooled, alone)]
    assert width[0] < width[1]  # more degrees of freedom and two profiles' runs: a narrower interval
    assert "prediction interval for a new run" in pooled.method
    assert mean_log_ratio_across([([math.inf], [1.0, 1.1])], confidence=0.95) is None
    assert mean_log_ratio_across([([0.9], [1.0])], confidence=0.95) is None  # no degree of freedom


def _verdict(
    decision: str, comparisons: list[Comparison], role: str = "requirement", **extra: object
) -> Verdict:
    gate = GateResult(
        gate="concurrency" if role == "requirement" else "latency_gain",
        role=role,  # type: ignore[arg-type]
        status="inconclusive",
        message="m",
        comparisons=comparisons,
    )
    return Verdict(candidate="c", decision=decision, reason="r", gates=[gate], **extra)  # type: ignore[arg-type]


def _cmp(status: str, *, n: int = 3, more: int | None = None, lag: bool = False) -> Comparison:
    return Comparison(
        metric="ttft_p50",
        profile="short",
        status=status,  # type: ignore[arg-type]
        observed=0.03,
        baseline=0.03,
        n_candidate=n,
        more_repeats=more,
        undecidable="client_lag" if lag else None,
        client_lag_s=0.005 if lag else None,
    )


LAG_GAP = Gap(kind="client_lag", side="candidate", message="short ttft_p50: late")
DATA_GAP = Gap(kind="interrupted", side="candidate", message="r1 interrupted")


@pytest.mark.parametrize(
    ("verdict", "remaining", "expected"),
    [
        # settled decisions stop; an unsettled one measures on
        pytest.param(_verdict("reject", []), 2, ("reject", False), id="reject_stops"),
        pytest.param(_verdict("keep", []), 2, ("keep", False), id="keep_stops"),
        pytest.param(
            _verdict("inconclusive", [_cmp("inconclusive", more=2)], more_repeats=2),
            2,
            ("inconclusive", True),
            id="inconclusive_that_can_settle_measures_on",
        ),
        # no futility stop on an inconclusive verdict, even when its estimate needs more than is left
        pytest.param(
            _verdict("inconclusive", [_cmp("inconclusive", more=41)], more_repeats=41),
            2,
            ("inconclusive", True),
            id="inconclusive_measures_on_whatever_its_estimate",
        ),
        # nothing left: stop whatever
        pytest.param(
            _verdict("inconclusive", [_cmp("inconclusive", more=1)], more_repeats=1),
            0,
            ("inconclusive", False),
            id="no_repeat_left",
        ),
        # incomplete by the client's lag alone while another comparison can settle: measure on
        pytest.param(
            _verdict(
                "incomplete",
                [_cmp("inconclusive", lag=True), _cmp("inconclusive", more=1)],
                missing=[LAG_GAP],
            ),
            2,
            ("inconclusive", True),
            id="lag_alone_with_a_settleable_comparison_measures_on",
        ),
        # issue 32: a requirement's comparison can still fail (a reject, whatever the lag hides) though an
        # early look's estimate asks for more repeats than are left, or has no bounded interval yet
        pytest.param(
            _verdict(
                "incomplete",
                [_cmp("inconclusive", lag=True), _cmp("inconclusive", n=2, more=5)],
                missing=[LAG_GAP],
            ),
            3,
            ("inconclusive", True),
            id="lag_alone_with_a_requirement_beyond_its_estimate_measures_on",
        ),
        pytest.param(
            _verdict(
                "incomplete",
                [_cmp("inconclusive", lag=True), _cmp("inconclusive", n=2, more=None)],
                missing=[LAG_GAP],
            ),
            3,
            ("inconclusive", True),
            id="lag_alone_with_an_unbounded_requirement_measures_on",
        ),
        # a possible gain cannot end a lagged verdict in a keep: only its own estimate keeps the loop going
        pytest.param(
            _verdict(
                "incomplete",
                [_cmp("inconclusive", lag=True), _cmp("inconclusive", n=2, more=41)],
                role="gain",
                missing=[LAG_GAP],
            ),
            3,
            ("incomplete", False),
            id="lag_alone_with_a_gain_beyond_its_estimate_stops",
        ),
        # incomplete by the lag and nothing else to settle: futility, stop
        pytest.param(
            _verdict("incomplete", [_cmp("inconclusive", lag=True), _cmp("pass")], missing=[LAG_GAP]),
            2,
            ("incomplete", False),
            id="lag_alone_nothing_to_settle_stops",
        ),
        # missing data (something to resume): stop, more repeats cannot complete it
        pytest.param(
            _verdict(
                "incomplete",
                [_cmp("inconclusive", more=1)],
                missing=[DATA_GAP],
                resume="python -m orchestrator resume x",
            ),
            2,
            ("incomplete", False),
            id="missing_data_stops",
        ),
    ],
)
def test_the_loop_acts_on_the_verdict_with_futility_and_lag(
    verdict: Verdict, remaining: int, expected: tuple[str, bool]
) -> None:
    assert loop_decision(verdict, remaining) == expected

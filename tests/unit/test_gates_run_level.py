"""Run-to-run variance in the gates: latency and drift judged with the repeat as the unit.

A whole run can be shifted by scheduling noise (the simulator at a 50x time scale turns a few wall
milliseconds into hundreds of host milliseconds). These tables pin the fix: a shift that stays within the
runs' own spread is neither a regression nor drift; a shift that every repeat shows is. The numbers of the
demo sweep that exposed the flaw (per-repeat medians, s) are used verbatim.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from contracts.errors import EXIT_INCOMPLETE
from contracts.metrics import fmt_ratio
from contracts.schema import GatesConfig
from gates import Comparison, SweepVerdict, Verdict, evaluate_sweep
from gates.bootstrap import RunSample, bootstrap_ratio, throughput_ratio
from gates.judge import exit_code
from gates.sequential import SequentialPlan
from gates.set_aside import set_aside, set_aside_runs
from gates.stats import (
    ONE_REPEAT_NOTE,
    OUTLIER_FACTOR,
    hodges_lehmann_ratio,
    latency_ratio,
    prediction_ratio,
    run_level_ratio,
    single_run_guard,
)
from tests.unit.gates_fixtures import (
    CASE_STUDY_VISIBLE,
    SweepBuilder,
    lognormal_quantiles,
    make_records,
    write_repeat,
)

CFG = GatesConfig(
    accepted_profiles=["decode_heavy"],
    loaded_profiles=["short", "decode_heavy"],
    bootstrap_resamples=500,
)

# The demo sweep (/tmp/demo/latest, simulator over HTTP at 50x): per-repeat median TTFT in seconds.
DEMO_BASE_DECODE = (0.894, 0.632, 0.539)
DEMO_RECOVERY_DECODE = (0.457,)
DEMO_BASE_SHORT = (0.398, 0.426, 0.306)
DEMO_SPEC_SHORT = (0.552, 0.444, 0.501)


def _requests(medians: Sequence[float], n: int = 32, spread: float = 0.4) -> list[list[float]]:
    """Per-repeat request latencies whose medians are ``medians`` (deterministic quantiles)."""
    return [lognormal_quantiles(m, spread, n, shift=k) for k, m in enumerate(medians)]


def _flat(runs: Sequence[Sequence[float]]) -> list[float]:
    return [v for run in runs for v in run]


# ------------------------------------------------------------------------------------------- statistics


@pytest.mark.parametrize(
    ("cand", "base", "excludes", "ratio"),
    [
        # the demo: 1.33x on the point, but the runs of each side spread as much
        pytest.param(DEMO_SPEC_SHORT, DEMO_BASE_SHORT, False, 1.333, id="demo_short_ttft_within_noise"),
        # one slow baseline run: a run-level shift, not a difference between configurations
        pytest.param((0.40, 0.41, 0.39), (0.40, 0.41, 0.62), False, 0.857, id="one_slow_run"),
        # every repeat 30% slower, runs agree within 2%: beyond noise
        pytest.param((0.52, 0.53, 0.51), (0.40, 0.41, 0.39), True, 1.300, id="consistent_30pct"),
        pytest.param((0.34, 0.35, 0.345), (0.40, 0.41, 0.405), True, 0.852, id="consistent_gain"),
        # a single candidate repeat: run-to-run noise taken from the baseline's three
        pytest.param((0.52,), (0.40, 0.41, 0.39), True, 1.300, id="one_candidate_repeat"),
        pytest.param((0.45,), DEMO_BASE_SHORT, False, 1.207, id="one_candidate_repeat_noisy_base"),
    ],
)
def test_run_level_ratio(
    cand: tuple[float, ...], base: tuple[float, ...], excludes: bool, ratio: float
) -> None:
    est = run_level_ratio(cand, base, confidence=0.95)
    assert est.ratio == pytest.approx(ratio, abs=1e-3)
    assert est.excludes_one is excludes
    assert est.low < est.ratio < est.high
    assert (est.candidate_values, est.baseline_values) == (cand, base)
    assert ("run-to-run noise from the baseline's 3 repeats only" in est.note) is (len(cand) == 1)


SINGLE_RUN_CASES = [
    # candidate repeats, baseline repeats, interval excludes 1 after the guard, p-value is 1 (Holm: none)
    pytest.param((0.52,), (0.40, 0.41, 0.39), False, True, id="one_run_1.3x_could_be_an_outlier"),
    pytest.param((1.00,), (0.40, 0.41, 0.39), False, True, id="one_run_2.5x_could_be_an_outlier"),
    pytest.param((1.20,), (0.40, 0.41, 0.39), False, True, id="one_run_3x_could_be_an_outlier"),
    pytest.param((1.80,), (0.40, 0.41, 0.39), True, False, id="one_run_4.5x_is_beyond_one_outlier"),
    pytest.param((0.08,), (0.40, 0.41, 0.39), True, False, id="one_run_0.2x_is_beyond_one_outlier"),
    pytest.param((0.40, 0.41, 0.39), (0.52,), False, True, id="one_baseline_run_guarded_too"),
    pytest.param((0.52, 0.53), (0.40, 0.41, 0.39), True, False, id="two_runs_unguarded"),
]


@pytest.mark.parametrize(("cand", "base", "excludes", "no_evidence"), SINGLE_RUN_CASES)
def test_a_single_run_decides_only_beyond_what_one_outlier_run_can_produce(
    cand: tuple[float, ...], base: tuple[float, ...], excludes: bool, no_evidence: bool
) -> None:
    raw = run_level_ratio(cand, base, confidence=0.95)
    assert raw.excludes_one  # without the guard every case here would decide
    est = single_run_guard(raw)
    assert est.excludes_one is excludes
    assert (est.p_value == 1.0) is no_evidence
    guarded = min(len(cand), len(base)) == 1
    assert ("what one outlier run can produce" in est.note) is guarded
    if guarded:
        assert est.low <= est.ratio / OUTLIER_FACTOR and est.high >= est.ratio * OUTLIER_FACTOR
    # latencies and throughput go through the guard the same way
    assert latency_ratio(_requests(cand), _requests(base), confidence=0.95).excludes_one is excludes
    tput = throughput_ratio(
        [RunSample(1000.0 / v) for v in cand],
        [RunSample(1000.0 / v) for v in base],
        confidence=0.95,
        resamples=200,
        seed=1,
    )
    assert tput.excludes_one is excludes


ONE_EACH_CASES = [
    # candidate's one run, baseline's one run (median s; tokens/s as 1000 / median), decided after the guard
    pytest.param(1.00, 0.40, False, id="one_run_2.5x_slower_against_one_run_decides_nothing"),
    pytest.param(1.20, 0.40, False, id="one_run_3x_slower_against_one_run_decides_nothing"),
    pytest.param(0.16, 0.40, False, id="one_run_2.5x_faster_against_one_run_decides_nothing"),
    pytest.param(2.00, 0.40, True, id="one_run_5x_slower_is_beyond_one_outlier_run"),
    pytest.param(0.08, 0.40, True, id="one_run_5x_faster_is_beyond_one_outlier_run"),
]


@pytest.mark.parametrize(("cand", "base", "decided"), ONE_EACH_CASES)
def test_one_run_against_one_run_decides_only_beyond_what_one_outlier_run_can_produce(
    cand: float, base: float, decided: bool
) -> None:
    """Issue 32: with one run per side the request-level interval treats every request as a draw of the
    configuration, and one 2.5x-slow run read p ~ 3e-10; latencies and tokens/s now take the single-run
    rule too."""
    c, b = _requests((cand,)), _requests((base,))
    raw = hodges_lehmann_ratio(c[0], b[0], confidence=0.95)
    assert raw.excludes_one and raw.p_value is not None and raw.p_value < 1e-6  # what decided alone
    est = latency_ratio(c, b, confidence=0.95)
    assert est.excludes_one is decided
    assert (est.p_value == 1.0) is not decided
    assert est.note.startswith(ONE_REPEAT_NOTE)
    assert "a decision needs an effect beyond 4x, what one outlier run can produce" in est.note
    assert est.low <= est.ratio / OUTLIER_FACTOR and est.high >= est.ratio * OUTLIER_FACTOR
    samples = [[RunSample(1000.0 / v, np.full(32, 256.0), np.full(32, v * 8))] for v in (cand, base)]
    tput = throughput_ratio(samples[0], samples[1], confidence=0.95, resamples=200, seed=1)
    assert tput.excludes_one is decided, tput
    assert "what one outlier run can produce" in tput.note


def test_equal_spreads_pool_and_unequal_ones_keep_welch() -> None:
    """One host, one noise: sides whose spreads agree (F-test) pool them, df = n + m - 2; when one side
    is far noisier (an outlier run), Welch-Satterthwaite's df follows the noisier side."""
    equal = run_level_ratio((1.0, 1.1, 0.9), (1.0, 1.1, 0.9), confidence=0.95)
    lopsided = run_level_ratio((1.0, 1.001, 0.999), (1.0, 1.5, 0.7), confidence=0.95)
    assert equal.df == pytest.approx(4.0) and "pooled-variance t" in equal.method
    assert lopsided.df is not None and 2.0 <= lopsided.df < 2.1
    assert "Welch t" in lopsided.method


def test_the_demo_numbers_fooled_the_request_level_interval() -> None:
    """The flaw, kept as a contrast: pooled requests call the demo's run-level noise a 1.3x regression."""
    cand, base = _requests(DEMO_SPEC_SHORT), _requests(DEMO_BASE_SHORT)
    pooled = hodges_lehmann_ratio(_flat(cand), _flat(base), confidence=0.95)
    assert pooled.excludes_one and pooled.low > 1.05
    run_level = latency_ratio(cand, base, confidence=0.95)
    assert run_level.ratio == pytest.approx(1.333, abs=0.005)
    assert not run_level.excludes_one


@pytest.mark.parametrize(
    ("new", "reference", "excludes", "ratio"),
    [
        # the demo: the recovery run is 0.68x of the baseline's repeats, which spread from 0.54 to 0.89 s
        pytest.param(DEMO_RECOVERY_DECODE, DEMO_BASE_DECODE, False, 0.679, id="demo_recovery_within_spread"),
        pytest.param((0.24,), (0.40, 0.41, 0.39), True, 0.600, id="recovery_far_outside_tight_repeats"),
        pytest.param((0.24, 0.25), (0.40, 0.41, 0.39), True, 0.612, id="two_recovery_runs"),
        pytest.param((0.60,), (0.40, 0.60, 0.30), False, 1.442, id="recovery_inside_wide_repeats"),
    ],
)
def test_prediction_ratio(
    new: tuple[float, ...], reference: tuple[float, ...], excludes: bool, ratio: float
) -> None:
    est = prediction_ratio(new, reference, confidence=0.95)
    assert est.ratio == pytest.approx(ratio, abs=1e-3)
    assert est.excludes_one is excludes
    if len(new) == 1:
        # exactly the prediction interval for a new run: mean +- t(n-1) s sqrt(1 + 1/n), log scale
        logs = np.log(reference)
        half = 4.302653 * float(np.std(logs, ddof=1)) * math.sqrt(1 + 1 / len(reference))
        low, high = math.exp(float(logs.mean()) - half), math.exp(float(logs.mean()) + half)
        assert (low <= new[0] <= high) is (not excludes)
        assert math.log(est.high / est.ratio) == pytest.approx(half, rel=1e-5)
        assert "prediction interval for a new run" in est.method


@pytest.mark.parametrize(
    ("cand", "base", "low", "high"),
    [
        ((math.inf, math.inf, math.inf), (0.4, 0.41, 0.39), math.inf, math.inf),
        ((0.4, 0.41, 0.39), (math.inf, math.inf), 0.0, 0.0),
        ((math.inf, 0.4, 0.41), (0.4, 0.41, 0.39), 0.0, math.inf),
    ],
)
def test_censored_repeats_leave_no_t_interval(
    cand: tuple[float, ...], base: tuple[float, ...], low: float, high: float
) -> None:
    est = run_level_ratio(cand, base, confidence=0.95)
    assert (est.low, est.high) == (low, high)
    assert "censored" in est.note and est.df is None


def test_one_repeat_per_side_falls_back_to_requests_and_says_so() -> None:
    est = latency_ratio(_requests((0.5,)), _requests((0.4,)), confidence=0.95)
    assert est.note.startswith(ONE_REPEAT_NOTE)
    assert "Hodges-Lehmann" in est.method
    assert est.n_candidate == 32


@pytest.mark.parametrize("run_sd", [0.0, 0.25])
def test_run_level_interval_keeps_its_coverage_with_three_repeats(run_sd: float) -> None:
    """No true difference, a run-level random effect: the 95% interval covers 1 about 95% of the time.

    The pooled-request interval, which treats requests as independent, does not once runs differ.
    """
    rng = np.random.default_rng(5)
    trials, covered, pooled_covered = 300, 0, 0
    for _ in range(trials):
        sides = [
            [list(np.exp(rng.normal(rng.normal(0, run_sd), 0.5, 32))) for _ in range(3)] for _ in range(2)
        ]
        covered += not latency_ratio(sides[0], sides[1], confidence=0.95).excludes_one
        flat = [_flat(side) for side in sides]
        pooled_covered += not hodges_lehmann_ratio(flat[0], flat[1], confidence=0.95).excludes_one
    assert 0.91 <= covered / trials <= 0.99
    if run_sd:
        assert pooled_covered / trials < 0.6


# ------------------------------------------------------------------------------------------ the gates


def _profile(
    b: SweepBuilder,
    name: str,
    profile: str,
    medians: Sequence[float],
    *,
    root: str | None = None,
    lag: float | tuple[float, ...] = 0.0,
) -> None:
    """One repeat per median: 32 requests around it, fixed throughput; ``lag``: the client's p99 dispatch
    lag of every repeat, or one per repeat."""
    for k, runs in enumerate(_requests(medians)):
        ttfts: list[float | None] = list(runs)
        records = make_records(ttfts, output_tokens=512)
        write_repeat(
            b.root,
            name,
            profile,
            k,
            records,
            output_tps=4000.0,
            prompt_tps=1000.0,
            root=root,
            dispatch_lag_p99=lag[k] if isinstance(lag, tuple) else lag,
        )


def _sweep(
    root: Path,
    cand: dict[str, Sequence[float]],
    base: dict[str, Sequence[float]],
    recovery: dict[str, Sequence[float]] | None = None,
    *,
    answers: bool = False,
    lag: dict[str, float | tuple[float, ...]] | None = None,
    plan: SequentialPlan | None = None,
    lagged: Sequence[str] | None = None,
) -> SweepVerdict:
    """``lag``: the client's p99 dispatch lag per side ("cand", "baseline"), one for every repeat or one
    per repeat, 0 where absent; on the ``lagged`` profiles only (default: every one)."""
    lags = lag or {}
    b = SweepBuilder(root)
    b.run("baseline", is_baseline=True)
    b.run("cand")
    if answers:  # the case study's answer gate: 4/5 for the baseline, 3/5 for the candidate
        b.answers("baseline", CASE_STUDY_VISIBLE["baseline"])
        b.answers("cand", CASE_STUDY_VISIBLE["spec_probabilistic"])
    for name, side, key in ((base, "baseline", "baseline"), (cand, "cand", "cand")):
        for profile, medians in name.items():
            late = lags.get(key, 0.0) if lagged is None or profile in lagged else 0.0
            _profile(b, side, profile, medians, lag=late)
    if recovery is not None:
        b.run("baseline", root="recovery", is_baseline=True)
        for profile, medians in recovery.items():
            _profile(b, "baseline", profile, medians, root="recovery")
    return evaluate_sweep(root, CFG, baseline="baseline", plan=plan)


def _ttft(verdict: Verdict, gate: str, profile: str) -> Comparison:
    result = next(g for g in verdict.gates if g.gate == gate)
    return next(c for c in result.comparisons if c.metric == "ttft_p50" and c.profile == profile)


TIGHT = (0.40, 0.41, 0.39)

GATE_CASES = [
    # candidate short, baseline short, (concurrency TTFT status, decision, message fragment)
    pytest.param(
        DEMO_SPEC_SHORT,
        DEMO_BASE_SHORT,
        ("inconclusive", "inconclusive", "per-repeat medians 0.552/0.444/0.501 s vs 0.398/0.426/0.306 s"),
        id="demo_spec_short_ttft_not_a_regression",
    ),
    pytest.param(
        (0.40, 0.41, 0.39),
        (0.40, 0.41, 0.62),
        # a possible gain within noise: not a keep
        ("pass", "inconclusive", "0.400 s vs 0.467 s (0.857x"),
        id="one_slow_baseline_run_is_noise",
    ),
    pytest.param(
        (0.52, 0.53, 0.51),
        TIGHT,
        ("fail", "reject", "0.520 s vs 0.400 s (1.30x"),
        id="consistent_30pct_slower_is_a_regression",
    ),
    pytest.param(
        (0.412, 0.42, 0.41), TIGHT, ("pass", "neutral", "(1.035x"), id="consistent_3pct_within_tolerance"
    ),
    pytest.param((0.34, 0.35, 0.345), TIGHT, ("pass", "keep", "(0.863x"), id="consistent_gain_is_kept"),
]


@pytest.mark.parametrize(("cand", "base", "expected"), GATE_CASES)
def test_loaded_ttft_is_judged_on_runs(
    tmp_path: Path, cand: Sequence[float], base: Sequence[float], expected: tuple[str, str, str]
) -> None:
    status, decision, fragment = expected
    sweep = _sweep(tmp_path, {"short": cand, "decode_heavy": TIGHT}, {"short": base, "decode_heavy": TIGHT})
    verdict = sweep.verdicts[0]
    ttft = _ttft(verdict, "concurrency", "short")
    assert ttft.status == status, ttft.message
    assert fragment in ttft.message
    assert ("Welch t" in ttft.method or "pooled-variance t" in ttft.method) and (
        ttft.n_candidate,
        ttft.n_baseline,
    ) == (3, 3)
    assert verdict.decision == decision, verdict.reason
    if decision == "reject":
        assert "concurrency regression: short median TTFT" in verdict.reason


# The load client's own lateness moves loaded TTFT: requests that leave late meet a shorter queue (TTFT
# counts from the send), so lag can only flatter the side whose runs it was in. A material difference no
# larger than the lag of the side that looks better (mean of its runs' p99) is undecidable: the comparison
# is inconclusive and marked, the verdict incomplete, never a keep (gates.compare.latency, issue 21).
# The scale-out test's twin (CI, 2026-12-03): per-repeat decode_heavy medians 0.104/0.102 s against its
# node's baseline 0.090/0.091 s, rejected at 1.143x; the baseline's repeats had run beside the other
# node's job, and a rerun of that test showed such a repeat's 16 requests leaving 0.016-0.081 s late
# (p99 0.080 s; the twin's own repeats, alone on the machine, 0.016 s).
LAG_CASES = [
    # candidate short, baseline short, {side: p99 lag, or one per repeat}, (concurrency TTFT, latency_gain
    # TTFT, decision)
    pytest.param(
        (0.104, 0.102), (0.090, 0.091), {}, ("fail", "fail", "reject"), id="ci_twin_without_lag_rejected"
    ),
    # Before issue 21 the gain gate dropped this worse comparison (fail, "no gain") and the verdict was
    # inconclusive; now both gates mark it undecidable and the verdict is incomplete.
    pytest.param(
        (0.104, 0.102),
        (0.090, 0.091),
        {"cand": 0.016, "baseline": 0.080},
        ("inconclusive", "inconclusive", "incomplete"),
        id="ci_twin_within_the_lag_is_undecidable",
    ),
    # The candidate's own lag cannot make it look worse: the baseline (lag 0) looks better.
    pytest.param(
        (0.104, 0.102),
        (0.090, 0.091),
        {"cand": 0.080},
        ("fail", "fail", "reject"),
        id="ci_twin_with_lag_on_the_worse_side_decides",
    ),
    pytest.param(
        (0.52, 0.53, 0.51), TIGHT, {"cand": 0.05}, ("fail", "fail", "reject"), id="beyond_the_lag_still_fails"
    ),
    pytest.param(
        (0.52, 0.53, 0.51),
        TIGHT,
        {"baseline": 0.08},
        ("fail", "fail", "reject"),
        id="beyond_the_baselines_lag_still_fails",
    ),
    pytest.param(
        (5.5, 5.3, 5.2),
        TIGHT,
        {"cand": 0.45},
        ("fail", "fail", "reject"),
        id="tp4_dp2_scale_loss_with_demo_lag",
    ),
    pytest.param((0.34, 0.35, 0.345), TIGHT, {}, ("pass", "pass", "keep"), id="gain_without_lag_is_kept"),
    # Before issue 21 any lag of either side (here the baseline's) voided the gain; lag on the baseline
    # only makes the baseline look better, so the gain stands.
    pytest.param(
        (0.34, 0.35, 0.345),
        TIGHT,
        {"baseline": 0.08},
        ("pass", "pass", "keep"),
        id="gain_beyond_the_baselines_lag_is_kept",
    ),
    # Issue 32: the concurrency requirement applies the same worst case, (0.345 + 0.08) / 0.40 = 1.06x
    # beyond the 5% tolerance: undecidable there too (it passed before).
    pytest.param(
        (0.34, 0.35, 0.345),
        TIGHT,
        {"cand": 0.08},
        ("inconclusive", "inconclusive", "incomplete"),
        id="gain_within_the_candidates_lag_is_not_a_keep",
    ),
    # Within the candidate's lag too, but even if the lag made all of the 0.055 s gain the candidate is
    # at most (0.345 + 0.06) / 0.40 = 1.013x the baseline: no regression beyond the 5% tolerance can hide
    # there, so it is decided (no gain, never counted towards a keep), not incomplete (issue 21: this
    # left 15% gains incomplete in the benchmark's measured noise).
    pytest.param(
        (0.34, 0.35, 0.345),
        TIGHT,
        {"cand": 0.06},
        ("pass", "fail", "neutral"),
        id="gain_within_the_lag_that_cannot_hide_a_regression_is_no_gain",
    ),
    # One slow run does not mask the others: the resolution is the mean of the runs' p99 (0.05 s here
    # against 0.15 s for the largest), and even against 0.40 + 0.05 s the loss is 1.16x, beyond the
    # tolerance (with the largest, 0.52 / 0.55 s, it would not be).
    pytest.param(
        (0.52, 0.53, 0.51),
        TIGHT,
        {"baseline": (0.0, 0.0, 0.15)},
        ("fail", "fail", "reject"),
        id="one_laggy_baseline_run_masks_nothing",
    ),
]


@pytest.mark.parametrize(("cand", "base", "lag", "expected"), LAG_CASES)
def test_a_loaded_ttft_difference_within_the_clients_dispatch_lag_decides_nothing(
    tmp_path: Path,
    cand: Sequence[float],
    base: Sequence[float],
    lag: dict[str, float | tuple[float, ...]],
    expected: tuple[str, str, str],
) -> None:
    sweep = _sweep(
        tmp_path,
        {"short": cand, "decode_heavy": TIGHT},
        {"short": base, "decode_heavy": TIGHT},
        lag=lag,
        lagged=["short"],
    )
    verdict = sweep.verdicts[0]
    conc, gain = _ttft(verdict, "concurrency", "short"), _ttft(verdict, "latency_gain", "short")
    assert (conc.status, gain.status, verdict.decision) == expected, (conc.message, gain.message)
    undecided = [c for c in (conc, gain) if c.status == "inconclusive"]
    for c in undecided:
        assert "the load client's dispatch lag (p99" in c.message, c.message
        assert c.undecidable == "client_lag" and c.client_lag_s is not None and c.client_lag_s > 0
        assert c.more_repeats is None  # more repeats cannot settle what the client did
    if verdict.decision == "incomplete":
        late = f"{max(c.client_lag_s or 0.0 for c in undecided) * 1000:.0f} ms"
        assert (
            f"short ttft_p50: the load client was {late} late at p99; re-run with fewer streams per client"
            in (verdict.reason)
        )
        assert verdict.resume is None  # resuming would not measure it again: the message says what will
        assert exit_code(sweep) == EXIT_INCOMPLETE  # not finished, though resuming would not complete it
        assert [g.kind for g in verdict.missing] == ["client_lag"]
    if not undecided and gain.status == "fail" and "dispatch lag" in gain.message:
        assert "not counted as a gain" in gain.message and "no regression can be hidden" in gain.message
    elif not undecided:
        assert "dispatch lag" not in conc.message + gain.message
    assert expected[0] != "fail" or "concurrency regression: short median TTFT" in verdict.reason
    # a gain beyond noise and the client's lag is named among the verdict's gains, and only then
    assert any(g.startswith("short median TTFT") for g in verdict.gains) is (expected[1] == "pass")


WORST_CASE_CASES = [
    # candidate short runs, baseline short runs (geometric mean 0.400 s), {side: p99 lag} on short,
    # (what the lag bounds say, concurrency short TTFT, decision); every case has a clear serial gain
    # Issue 32: looks the same, but with the candidate's 0.24 s of lag undone it could be 1.6x: was KEPT.
    pytest.param(
        (0.40, 0.41, 0.39),
        TIGHT,
        {"cand": 0.24},
        ("undecidable", "inconclusive", "incomplete"),
        id="a_loaded_ttft_up_to_1.6x_behind_the_lag_is_not_kept",
    ),
    # Issue 32: 1.30x as measured, but against the baseline with its 0.11 s of lag undone only 1.02x
    # (the raw gap, 0.12 s, is beyond the lag): was REJECTED.
    pytest.param(
        (0.52, 0.53, 0.51),
        TIGHT,
        {"baseline": 0.11},
        ("undecidable", "inconclusive", "incomplete"),
        id="a_2pct_difference_with_0.11s_of_lag_is_not_rejected",
    ),
    # A regression beyond the tolerance even against the flattered baseline (0.60 / 0.51 = 1.18x) decides.
    pytest.param(
        (0.60, 0.61, 0.59),
        TIGHT,
        {"baseline": 0.11},
        ("regression", "fail", "reject"),
        id="a_regression_beyond_the_tolerance_whatever_the_lag_is_rejected",
    ),
    # 2.5% slower, and with the candidate's 5 ms undone at most 1.04x: no regression can hide.
    pytest.param(
        (0.41, 0.42, 0.40),
        TIGHT,
        {"cand": 0.005},
        ("not a regression", "pass", "keep"),
        id="a_difference_inside_the_tolerance_whatever_the_lag_is_not_a_regression",
    ),
    # Within the raw gap of the baseline's lag, and at most 1.03x with the candidate's: not a regression.
    pytest.param(
        (0.41, 0.42, 0.40),
        TIGHT,
        {"cand": 0.002, "baseline": 0.02},
        ("not a regression", "pass", "keep"),
        id="within_the_lag_and_inside_the_tolerance_both_ways",
    ),
    pytest.param(TIGHT, TIGHT, {}, ("not a regression", "pass", "keep"), id="identical_without_lag"),
]


@pytest.mark.parametrize(("cand", "base", "lag", "expected"), WORST_CASE_CASES)
def test_the_client_lag_decides_nothing_only_where_its_worst_case_straddles_the_tolerance(
    tmp_path: Path,
    cand: Sequence[float],
    base: Sequence[float],
    lag: dict[str, float],
    expected: tuple[str, str, str],
) -> None:
    """Issue 32, the lag rule both ways: lateness only lowers the late runs' TTFT, so the ratio without it
    lies in [c / (b + lag_b), (c + lag_c) / b]. Undecidable only where that straddles 1 + tolerance; a
    regression beyond the tolerance at both ends decides, a difference inside it at both ends is none."""
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True)
    b.run("cand")
    b.serial("baseline", ttft=0.20, e2e=5.0)
    b.serial("cand", ttft=0.17, e2e=4.25)
    for side, key, medians in (("baseline", "baseline", base), ("cand", "cand", cand)):
        _profile(b, side, "short", medians, lag=lag.get(key, 0.0))
        _profile(b, side, "decode_heavy", TIGHT)
    verdict = evaluate_sweep(tmp_path, CFG, baseline="baseline").verdicts[0]
    bounds, status, decision = expected
    conc, gain = _ttft(verdict, "concurrency", "short"), _ttft(verdict, "latency_gain", "short")
    assert (conc.status, verdict.decision) == (status, decision), (conc.message, verdict.reason)
    c_lag, b_lag = lag.get("cand", 0.0), lag.get("baseline", 0.0)
    assert conc.observed is not None and conc.baseline is not None
    low, high = conc.observed / (conc.baseline + b_lag), (conc.observed + c_lag) / conc.baseline
    limit = 1 + CFG.latency_tolerance
    said = "undecidable" if low <= limit < high else ("regression" if low > limit else "not a regression")
    assert said == bounds  # the table's own arithmetic, so a row cannot claim what its numbers do not
    for c in (conc, gain):
        assert (c.undecidable == "client_lag") is (bounds == "undecidable"), c.message
    if bounds == "undecidable":
        window = f"lies anywhere in [{fmt_ratio(low)}, {fmt_ratio(high)}], across {fmt_ratio(limit)}"
        assert window in conc.message, conc.message
        assert [g.kind for g in verdict.missing] == ["client_lag"]
        assert "re-run with fewer streams per client" in verdict.reason
    else:
        assert "dispatch lag" not in conc.message


def test_a_loaded_regression_within_the_lag_behind_a_serial_gain_is_never_kept(tmp_path: Path) -> None:
    """The issue's case: 15% faster on serial, short and decode_heavy median TTFT 30% worse (far beyond
    noise) but within the client's 0.15 s lag on both sides, the concurrency gate not enabled: was KEPT."""
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True)
    b.run("cand")
    b.serial("baseline", ttft=0.20, e2e=5.0)
    b.serial("cand", ttft=0.17, e2e=4.25)
    for profile in ("short", "decode_heavy"):
        _profile(b, "baseline", profile, (0.30, 0.305, 0.295), lag=0.15)
        _profile(b, "cand", profile, (0.39, 0.395, 0.385), lag=0.15)
    gates_only = dataclasses.replace(CFG, enabled=["latency_gain", "stability"])
    verdict = evaluate_sweep(tmp_path, gates_only, baseline="baseline").verdicts[0]
    assert (verdict.decision, verdict.decision_on_partial) == ("incomplete", "inconclusive"), verdict.reason
    assert "the load client was 150 ms late at p99; re-run with fewer streams per client" in verdict.reason
    assert {g.file for g in verdict.missing} == {"short/ttft_p50", "decode_heavy/ttft_p50"}
    gain = next(g for g in verdict.gates if g.gate == "latency_gain")
    assert gain.status == "inconclusive" and "but undecidable within the load client's lag" in gain.message


DRIFT_CASES = [
    # baseline decode_heavy, recovery decode_heavy, drift status
    pytest.param(DEMO_BASE_DECODE, DEMO_RECOVERY_DECODE, "inconclusive", id="demo_recovery_within_spread"),
    # TTFT alone (throughput unchanged) says "possible drift" and voids nothing (gates/drift.py: _judge).
    pytest.param(TIGHT, (0.24,), "inconclusive", id="ttft_far_outside_tight_repeats_is_not_decisive"),
    pytest.param(TIGHT, (0.41,), "pass", id="recovery_inside"),
    # outside the prediction interval (the repeats agree within 0.2%), but only 3% away: not drift
    pytest.param((0.400, 0.401, 0.399), (0.412,), "pass", id="outside_interval_within_tolerance"),
]


@pytest.mark.parametrize(("base", "end", "status"), DRIFT_CASES)
def test_drift_needs_the_recovery_run_outside_the_baselines_spread(
    tmp_path: Path, base: Sequence[float], end: Sequence[float], status: str
) -> None:
    sweep = _sweep(
        tmp_path,
        {"short": TIGHT, "decode_heavy": (0.345, 0.35, 0.34)},
        {"short": TIGHT, "decode_heavy": base},
        recovery={"decode_heavy": end},
    )
    ttft = next(c for c in sweep.drift.comparisons if c.metric == "ttft_p50")
    assert ttft.status == status, ttft.message
    assert sweep.drift.status == status
    assert "prediction interval for a new run" in ttft.message
    assert "median TTFT later vs the opening repeats, across decode_heavy" in ttft.message
    opening = "/".join(f"{v:.3f}" for v in base)
    assert f"decode_heavy {'/'.join(f'{v:.3f}' for v in end)} s vs {opening} s" in ttft.message
    verdict = sweep.verdicts[0]
    if status == "fail":
        assert "BASELINE DRIFT" in sweep.drift.message
        assert verdict.decision == "inconclusive" and verdict.decision_before_drift is not None
    else:
        assert verdict.decision_before_drift is None
        assert "BASELINE DRIFT" not in verdict.reason


def test_the_demo_sweep_numbers_give_no_drift_and_no_spurious_ttft_regression(tmp_path: Path) -> None:
    """The demo: baseline decode_heavy 0.894/0.632/0.539 s, recovery 0.457 s; short TTFT of the candidate
    0.552/0.444/0.501 s against 0.398/0.426/0.306 s. Before the fix: drift (0.693x [0.534, 0.749]) and a
    concurrency regression (1.32x [1.23, 1.40]) from the same run-level noise."""
    sweep = _sweep(
        tmp_path,
        {"short": DEMO_SPEC_SHORT, "decode_heavy": (0.291, 0.449, 0.313)},
        {"short": DEMO_BASE_SHORT, "decode_heavy": DEMO_BASE_DECODE},
        recovery={"decode_heavy": DEMO_RECOVERY_DECODE},
        answers=True,
    )
    assert sweep.drift.status != "fail", sweep.drift.message
    assert "decode_heavy 0.457 s vs 0.894/0.632/0.539 s (0.679x)" in sweep.drift.message
    verdict = sweep.verdicts[0]
    assert verdict.decision_before_drift is None
    # As in the case study: rejected on visible answers alone, and no load advantage.
    assert (verdict.decision, verdict.failed) == ("reject", ["answer_reliability"])
    assert "no clear load advantage" in verdict.reason
    conc = next(g for g in verdict.gates if g.gate == "concurrency")
    assert conc.status == "inconclusive"
    short = _ttft(verdict, "concurrency", "short")
    assert short.ratio == pytest.approx(1.333, abs=0.005)
    assert short.interval is not None and short.interval[0] < 1 < short.interval[1]


def test_one_repeat_each_side_says_run_to_run_noise_was_not_measured(tmp_path: Path) -> None:
    sweep = _sweep(
        tmp_path,
        {"short": (0.52,), "decode_heavy": (0.40,)},
        {"short": (0.40,), "decode_heavy": (0.40,)},
        recovery={"decode_heavy": (0.41,)},
    )
    short = _ttft(sweep.verdicts[0], "concurrency", "short")
    assert ONE_REPEAT_NOTE in short.message
    assert "HL ratio" in short.message and "32 vs 32 requests" in short.message
    assert all(ONE_REPEAT_NOTE in c.message for c in sweep.drift.comparisons)


# ------------------------------------------------------------------------------------------ throughput


def _samples(values: Sequence[float]) -> list[RunSample]:
    return [RunSample(v) for v in values]


@pytest.mark.parametrize(
    ("cand", "base", "excludes"),
    [
        # 7% lower, but each side's runs spread by 8%: the bootstrap over 3 repeats sees only their range
        pytest.param((93.0, 97.0, 89.0), (100.0, 104.0, 96.0), False, id="shift_within_run_spread"),
        pytest.param((80.0, 81.0, 79.0), (100.0, 101.0, 99.0), True, id="consistent_20pct_loss"),
        pytest.param((101.0, 99.0, 100.0), (100.0, 99.0, 101.0), False, id="identical"),
    ],
)
def test_throughput_interval_is_widened_to_the_run_level_one(
    cand: tuple[float, ...], base: tuple[float, ...], excludes: bool
) -> None:
    boot = bootstrap_ratio(_samples(cand), _samples(base), confidence=0.95, resamples=1000, seed=1)
    est = throughput_ratio(_samples(cand), _samples(base), confidence=0.95, resamples=1000, seed=1)
    assert est.ratio == boot.ratio
    assert est.low <= boot.low and est.high >= boot.high
    assert est.excludes_one is excludes
    assert est.candidate_values == cand and est.df is not None


def test_throughput_widening_matters_with_three_repeats() -> None:
    cand, base = _samples((93.0, 97.0, 89.0)), _samples((100.0, 104.0, 96.0))
    boot = bootstrap_ratio(cand, base, confidence=0.95, resamples=1000, seed=1)
    est = throughput_ratio(cand, base, confidence=0.95, resamples=1000, seed=1)
    assert boot.excludes_one and not est.excludes_one
    assert "widened to pooled-variance t" in est.method  # the spreads agree: one run-to-run variance


def test_throughput_with_one_repeat_per_side_is_the_bootstrap_noted() -> None:
    est = throughput_ratio(_samples((90.0,)), _samples((100.0,)), confidence=0.95, resamples=200, seed=1)
    assert est.note.startswith(ONE_REPEAT_NOTE) and est.df is None


#: Adaptive repeats 1..5: the looks after 1 and 2 candidate repeats and their confidence (gates.sequential).
EARLY_PLAN = SequentialPlan(min_repeats=1, max_repeats=5)

EARLY_LOOK_CASES = [
    # candidate's short runs, baseline's short runs (decode_heavy alike, TIGHT's first ones), decision
    pytest.param((1.0,), TIGHT, "inconclusive", id="one_run_2.5x_slower_is_not_rejected_at_the_first_look"),
    pytest.param((1.2,), TIGHT, "inconclusive", id="one_run_3x_slower_is_not_rejected_at_the_first_look"),
    pytest.param((2.0,), TIGHT, "reject", id="one_run_5x_slower_is_rejected"),
    # Issue 42: two runs 2.5x slower can both be the host's slow runs (1% of a look's profiles at one in
    # ten), which no rule can set aside among two: the next repeat decides (they were rejected here).
    pytest.param((1.0, 1.01), TIGHT, "inconclusive", id="two_runs_2.5x_slower_could_be_two_outlier_runs"),
    pytest.param((2.0, 2.02), TIGHT, "reject", id="two_runs_5x_slower_are_rejected_at_the_second_look"),
    pytest.param((1.0, 1.01, 0.99), TIGHT, "reject", id="three_runs_2.5x_slower_are_rejected"),
    # issue 32: a one-run baseline (run.repeats=1): the request-level interval decided alone
    pytest.param((1.0,), (0.40,), "inconclusive", id="one_run_2.5x_slower_against_one_baseline_run"),
    pytest.param((1.2,), (0.40,), "inconclusive", id="one_run_3x_slower_against_one_baseline_run"),
    pytest.param((2.0,), (0.40,), "reject", id="one_run_5x_slower_against_one_baseline_run_is_rejected"),
]


@pytest.mark.parametrize(("short", "base", "decision"), EARLY_LOOK_CASES)
def test_an_early_look_survives_one_outlier_run(
    tmp_path: Path, short: tuple[float, ...], base: tuple[float, ...], decision: str
) -> None:
    """Adaptive repeats' first look has one candidate repeat: an identical candidate whose only run was
    2.5x slower (a cold burst) was rejected there 9-16% of the time under the outlier model (issue 21).
    Judged as the sweep's loop judges a look: with the plan, at the look's confidence."""
    sweep = _sweep(
        tmp_path,
        {"short": short, "decode_heavy": TIGHT[: len(short)]},
        {"short": base, "decode_heavy": TIGHT[: len(base)]},
        plan=EARLY_PLAN,
    )
    verdict = sweep.verdicts[0]
    assert verdict.decision == decision, verdict.reason
    ttft = _ttft(verdict, "concurrency", "short")
    look = EARLY_PLAN.look_confidence(CFG.confidence, len(short))
    level = f"{look * 100:.2f}".rstrip("0").rstrip(".") + "%"
    assert f"family-wise {level}" in ttft.message, ttft.message  # the look's own confidence
    assert level != "95%"
    if decision == "inconclusive":
        outliers = (
            "one outlier run" if len(short) == 1 else "2 candidate runs, too few to set an outlier run aside"
        )
        assert outliers in verdict.reason and "a decision needs an effect beyond 4x" in verdict.reason
        assert ttft.status == "inconclusive" and ttft.interval is not None
        assert ttft.interval[0] < 1 < ttft.interval[1]


TWO_RUN_CASES = [
    # the candidate's two decode_heavy runs' output tokens/s against the baseline's three (10,000 tok/s),
    # TTFT unchanged, at the adaptive look after two repeats: decision
    # Issue 42: two runs at a third of the baseline's throughput are what two of the host's 3x-slow runs
    # give (1% of a look's profiles at one in ten); they were rejected here (outlier_runs, seeds 71, 188).
    pytest.param(3_400.0, "inconclusive", id="two_runs_at_0.34x_could_be_two_outlier_runs"),
    pytest.param(2_000.0, "reject", id="two_runs_at_0.2x_are_beyond_outlier_runs"),
    pytest.param(9_900.0, "neutral", id="two_runs_within_tolerance"),
]


@pytest.mark.parametrize(("tps", "decision"), TWO_RUN_CASES)
def test_two_candidate_runs_decide_only_beyond_what_outlier_runs_can_produce(
    tmp_path: Path, tps: float, decision: str
) -> None:
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True)
    b.run("cand")
    b.loaded("baseline", "decode_heavy", output_tps=10_000.0, prompt_tps=2_500.0, ttft=0.30)
    b.loaded("cand", "decode_heavy", output_tps=tps, prompt_tps=tps / 4, ttft=0.30, repeats=2)
    cfg = dataclasses.replace(CFG, loaded_profiles=["decode_heavy"])
    verdict = evaluate_sweep(tmp_path, cfg, baseline="baseline", plan=EARLY_PLAN).verdicts[0]
    assert verdict.decision == decision, verdict.reason
    conc = next(g for g in verdict.gates if g.gate == "concurrency")
    output = next(c for c in conc.comparisons if c.metric == "output_tps")
    assert "2 candidate runs, too few to set an outlier run aside" in output.message  # the rule is said


@pytest.mark.parametrize(
    ("values", "aside"),
    [
        pytest.param((0.40, 0.41, 1.25), 2, id="one_run_3x_slower"),
        pytest.param((0.40, 0.41, 0.39, 0.12), None, id="a_fast_run_is_never_set_aside"),
        pytest.param((0.40, 1.20, 1.25), None, id="two_slow_runs_of_three_leave_the_fast_one_in"),
        pytest.param((0.40, 0.41, 0.62), None, id="1.5x_is_run_to_run_spread"),
        pytest.param((0.25, 0.42, 0.27), None, id="prefill_wave_clusters_stay"),
        pytest.param((0.4, 1.2), None, id="two_runs_cannot_say_which"),
        pytest.param((0.3, 0.9, 2.0), None, id="the_others_disagree_too"),
        pytest.param((0.4, 0.41, math.inf), None, id="censored_runs_stay"),
    ],
)
def test_one_outlier_run_per_side_is_set_aside(values: tuple[float, ...], aside: int | None) -> None:
    assert set_aside(values) == aside
    assert set_aside_runs(values) == ([] if aside is None else [aside])


@pytest.mark.parametrize(
    ("values", "aside"),
    [
        # five runs: two slow ones (a minority) are set aside together, the three left agree
        pytest.param((0.032, 0.105, 0.037, 0.106, 0.036), [1, 3], id="two_slow_runs_of_five"),
        # four runs: at most one; two slow of four is half the side, not a minority
        pytest.param((0.40, 1.20, 0.41, 1.25), [], id="two_slow_runs_of_four_stay"),
        # three slow of five is the majority: nothing is set aside
        pytest.param((0.40, 1.20, 1.25, 1.22, 0.41), [], id="three_slow_runs_of_five_stay"),
        # one slow run of five: only that one
        pytest.param((0.40, 0.41, 0.39, 0.42, 1.3), [4], id="one_slow_run_of_five"),
        # tokens/s: slow is low
        pytest.param((9000.0, 3000.0, 9100.0, 2900.0, 8900.0), [1, 3], id="two_slow_throughput_runs"),
    ],
)
def test_a_minority_of_slow_runs_is_set_aside(values: tuple[float, ...], aside: list[int]) -> None:
    slow = "lower" if values[0] > 100 else "higher"
    assert set_aside_runs(values, slow) == aside  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("cand", "base", "decision"),
    [
        # a 20% regression whose baseline has one run 3x slower: decided, the message says what was set aside
        pytest.param((0.48, 0.49, 0.47), (0.40, 0.41, 1.20), "reject", id="regression_behind_a_slow_run"),
        # identical, with one candidate run 3x slower: not a regression
        pytest.param((0.40, 1.23, 0.39), (0.40, 0.41, 0.39), "neutral", id="identical_with_a_slow_run"),
    ],
)
def test_a_slow_run_neither_hides_nor_makes_a_regression(
    tmp_path: Path, cand: tuple[float, ...], base: tuple[float, ...], decision: str
) -> None:
    sweep = _sweep(tmp_path, {"short": cand, "decode_heavy": TIGHT}, {"short": base, "decode_heavy": TIGHT})
    verdict = sweep.verdicts[0]
    assert verdict.decision == decision, verdict.reason
    conc = _ttft(verdict, "concurrency", "short")
    assert "set aside as one outlier run (beyond 2x)" in conc.message
    assert (conc.n_candidate, conc.n_baseline) == ((2, 3) if max(cand) > 1 else (3, 2))


def test_an_interval_beyond_the_float_range_saturates_instead_of_crashing_the_judge() -> None:
    """1 vs 2 runs (df 1) at a first look's 99.84% with runs far apart: the t-interval's ends lie beyond
    exp's range; a benchmark sweep crashed the judge with OverflowError before."""
    est = run_level_ratio([0.5], [1e-9, 1.0], confidence=0.9984)
    assert (est.low, est.high) == (0.0, math.inf)
    assert not est.excludes_one


# ------------------------------------------------------------------- the serial gain: one combined test

GAIN_CFG = GatesConfig(
    accepted_profiles=["decode_heavy"],
    loaded_profiles=["short", "decode_heavy", "prefill_10k"],
    bootstrap_resamples=200,
)


def _serial_runs(
    b: SweepBuilder,
    name: str,
    *,
    ratio: float,
    factors: Sequence[float],
    ttft_factors: Sequence[float] | None = None,
) -> None:
    """Serial repeats of 8 requests: TTFT 0.2 s and latency 5 s times ``ratio``, each repeat shifted by
    its factor (a run-level shift of both), or TTFT by ``ttft_factors`` alone."""
    for k, factor in enumerate(factors):
        ttft = 0.2 * ratio * (ttft_factors[k] if ttft_factors else factor)
        itl = (5.0 * ratio * factor - ttft) / 256
        ttfts = lognormal_quantiles(ttft, 0.03, 8, shift=k)
        records = make_records(list(ttfts), output_tokens=256, prompt_tokens=512, itl_s=itl)
        write_repeat(b.root, name, "serial", k, records, output_tps=256 / 5.0, prompt_tps=512 / 5.0)


SPREAD_BASE, SPREAD_CAND = (1.0, 1.05, 0.96), (1.0, 0.95, 1.04)

SERIAL_GAIN_CASES = [
    # candidate serial ratio, its TTFT-only factors, (decision, combined status, serial e2e status)
    # 14% faster, runs spread +-5%: each serial metric's interval at 99% (1 of 5 slots) reaches 1.012x;
    # the one combined test at 98% (the 2 slots it replaces) excludes 1: a keep (before: inconclusive)
    pytest.param(0.86, None, ("keep", "pass", "inconclusive"), id="serial_gain_one_test_for_both_is_kept"),
    # the same runs, no effect: never a gain
    pytest.param(1.0, None, ("neutral", "fail", "fail"), id="identical_serial_is_not_a_gain"),
    # wider spread (+-7%): neither way beyond noise, inconclusive as before
    pytest.param(0.86, "wide", ("inconclusive", "inconclusive", "inconclusive"), id="within_noise"),
    # TTFT 0.68x bought with a 14% slower request: the combined 0.88x is not counted as a gain
    pytest.param(1.14, (0.6, 0.6, 0.6), ("neutral", "fail", "fail"), id="ttft_gain_with_slower_requests"),
]


@pytest.mark.parametrize(("ratio", "ttft", "expected"), SERIAL_GAIN_CASES)
def test_the_serial_gain_is_one_test_of_ttft_and_latency_together(
    tmp_path: Path, ratio: float, ttft: object, expected: tuple[str, str, str]
) -> None:
    b = SweepBuilder(tmp_path)
    b.run("baseline", is_baseline=True)
    b.run("cand")
    wide = ttft == "wide"
    _serial_runs(b, "baseline", ratio=1.0, factors=(1.0, 1.07, 0.94) if wide else SPREAD_BASE)
    _serial_runs(
        b,
        "cand",
        ratio=ratio,
        factors=(1.0, 0.93, 1.06) if wide else SPREAD_CAND,
        ttft_factors=ttft if isinstance(ttft, tuple) else None,
    )
    for profile, m in (("short", 0.3), ("decode_heavy", 0.4), ("prefill_10k", 9.0)):
        _profile(b, "baseline", profile, (m, m * 1.3, m * 0.8))
        _profile(b, "cand", profile, (m * 1.3, m, m * 0.8))
    verdict = evaluate_sweep(tmp_path, GAIN_CFG, baseline="baseline").verdicts[0]
    gain = next(g for g in verdict.gates if g.gate == "latency_gain")
    by = {c.metric: c for c in gain.comparisons}
    decision, combined, e2e = expected
    assert (verdict.decision, by["serial_combined_p50"].status, by["serial_e2e_p50"].status) == (
        decision,
        combined,
        e2e,
    ), gain.message
    assert by["serial_combined_p50"].interval is not None and by["serial_e2e_p50"].interval is not None
    # one test at the share of two slots: narrower than either serial metric's own interval
    assert by["serial_combined_p50"].interval[1] < by["serial_e2e_p50"].interval[1] or ratio > 1
    assert "98% CI" in by["serial_combined_p50"].message and "99% CI" in by["serial_e2e_p50"].message
    if ratio > 1:
        assert "not counted as a gain" in by["serial_combined_p50"].message

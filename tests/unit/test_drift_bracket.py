"""A concurrency regression must show against the baseline on both sides of the candidate (gates/bracket.py).

The false REJECTs the rule is for (docs/measurements/decision-quality.md, the identical configuration under
the ``measured`` noise model's AR(1) drift): ``short output tokens/s 3,236 vs 3,439 tok/s (0.941x, 98.6% CI
[0.892x, 0.992x]; 3 vs 3 repeats)``: the candidate's three runs, measured one block after the baseline's,
carry the host's drift as one block. The baseline's own block right after the candidate sees the same
drift; a failure that the baseline at the block's speed would explain is inconclusive, not a REJECT.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from contracts.layout import block_root
from contracts.schema import GatesConfig
from contracts.verdicts import Comparison
from gates import evaluate_sweep
from gates.bracket import (
    HostShift,
    agreed_shift,
    bracket_holds,
    bracket_interval,
    bracket_ratio,
    within_drift,
)
from gates.compare import Measured
from gates.stats import RatioEstimate
from tests.unit.gates_fixtures import lognormal_quantiles, make_records, write_repeat, write_run

CFG = GatesConfig(
    accepted_profiles=["decode_heavy"],
    loaded_profiles=["short", "decode_heavy"],
    bootstrap_resamples=500,
)

AGREED_CASES = [
    pytest.param((0.95, 0.97), 0.97, id="both_slower_the_smaller_shift"),
    pytest.param((1.04, 1.02), 1.02, id="both_faster_the_smaller_shift"),
    pytest.param((0.96, 1.01), 1.0, id="disagree_no_drift"),
    pytest.param((1 / 3, 1.01), 1.01, id="one_slow_outlier_run_left_out_not_drift"),
    pytest.param((1 / 3, 0.98), 0.98, id="slow_outlier_beside_a_drifted_run_the_drifted"),
    pytest.param((1 / 3, 0.45), 1.0, id="two_slow_outlier_runs_are_not_a_host_at_0.4x"),
    pytest.param((1 / 3, 1.02), 1.02, id="an_outlier_left_out_the_other_run_shows_the_shift"),
    pytest.param((2.5, 0.97), 0.97, id="a_fast_outlier_left_out"),
    pytest.param((0.97,), 0.97, id="one_run"),
    pytest.param((), 1.0, id="no_runs"),
    pytest.param((0.97, math.inf), 1.0, id="a_value_not_finite_no_drift"),
]


@pytest.mark.parametrize(("ratios", "expected"), AGREED_CASES)
def test_the_shift_every_block_run_agrees_on(ratios: Sequence[float], expected: float) -> None:
    assert agreed_shift(ratios) == pytest.approx(expected)


HOLDS_CASES = [
    # ratio against the opening, threshold, better, block speed, ratio against the block, still a failure
    pytest.param(0.941, 0.95, "higher", 1.0, 0.941, True, id="no_drift_tokens_fail_stands"),
    pytest.param(0.941, 0.95, "higher", 0.98, 0.941 / 0.98, False, id="host_slowed_2pct_explains_0.941x"),
    pytest.param(0.941, 0.95, "higher", 0.995, 0.941 / 0.995, True, id="host_slowed_too_little"),
    pytest.param(0.90, 0.95, "higher", 0.97, 0.90 / 0.97, True, id="regression_10_beyond_a_3pct_drift"),
    pytest.param(0.941, 0.95, "higher", 1.03, 0.941 / 1.03, True, id="host_sped_up_the_failure_stands"),
    pytest.param(1.067, 1.05, "lower", 1.0, 1.067, True, id="no_drift_ttft_fail_stands"),
    pytest.param(1.067, 1.05, "lower", 0.972, 1.067 * 0.972, False, id="host_slowed_ttft_explained"),
    pytest.param(1.30, 1.05, "lower", 0.97, 1.30 * 0.97, True, id="ttft_regression_beyond_the_drift"),
]


@pytest.mark.parametrize(("ratio", "threshold", "better", "speed", "after", "holds"), HOLDS_CASES)
def test_a_failure_must_hold_against_the_baseline_at_both_ends(  # noqa: PLR0917 (one table row)
    ratio: float, threshold: float, better: str, speed: float, after: float, holds: bool
) -> None:
    assert bracket_ratio(ratio, better, speed) == pytest.approx(after)  # type: ignore[arg-type]
    assert bracket_holds(ratio, threshold, better, speed) is holds  # type: ignore[arg-type]


INTERVAL_CASES = [
    pytest.param((0.892, 0.992), "higher", 0.98, (0.892, 0.992 / 0.98), id="tokens_host_slowed"),
    pytest.param((0.892, 0.992), "higher", 1.03, (0.892 / 1.03, 0.992), id="tokens_host_sped_up"),
    pytest.param((1.01, 1.12), "lower", 0.98, (1.01 * 0.98, 1.12), id="ttft_host_slowed"),
]


@pytest.mark.parametrize(("interval", "better", "speed", "widened"), INTERVAL_CASES)
def test_the_interval_against_the_baseline_at_both_ends(
    interval: tuple[float, float], better: str, speed: float, widened: tuple[float, float]
) -> None:
    assert bracket_interval(interval, better, speed) == pytest.approx(widened)  # type: ignore[arg-type]


def _measured(status: str, ratio: float, interval: tuple[float, float]) -> Measured:
    est = RatioEstimate(ratio, interval[0], interval[1], 0.95, "t", 3, 3, 3)
    comparison = Comparison(
        metric="output_tps",
        profile="short",
        status=status,  # type: ignore[arg-type]
        observed=ratio,
        baseline=1.0,
        ratio=ratio,
        interval=interval,
        threshold=0.95,
        more_repeats=4 if status == "inconclusive" else None,
        message="short output tokens/s",
    )
    return Measured(comparison, est, [])


def _tps(sweep: Path, root: str, name: str, profile: str, speeds: Sequence[float], *, first: int) -> None:
    """One repeat per speed: output tokens/s 4000 x speed, median TTFT 0.40 s / speed (a slower host is
    slower in both)."""
    for k, speed in enumerate(speeds):
        records = make_records(lognormal_quantiles(0.40 / speed, 0.3, 32, shift=k), output_tokens=512)
        write_repeat(
            sweep, name, profile, first + k, records, output_tps=4000.0 * speed, prompt_tps=1000.0, root=root
        )


OPENING = (1.0, 1.01, 0.99)
#: the candidate measured after the opening on a host 6% slower (identical configuration)
SLOWED = (0.945, 0.935, 0.94)

SWEEP_CASES = [
    # block after the candidate (its decode_heavy runs' speeds; None: no block), concurrency status,
    # a fragment of the failed or unsettled comparison's message
    pytest.param(None, "fail", "short output tokens/s", id="no_block_fails_as_before"),
    pytest.param((1.0,), "fail", "short output tokens/s", id="block_at_the_opening_speed_no_drift"),
    pytest.param((0.94,), "inconclusive", "within the host's drift", id="block_as_slow_as_the_candidate"),
    pytest.param((0.955, 0.95), "inconclusive", "within the host's drift", id="two_block_runs_agree"),
    pytest.param((1 / 3, 1.0), "fail", "short output tokens/s", id="one_slow_block_run_is_not_drift"),
]


@pytest.mark.parametrize(("block", "status", "fragment"), SWEEP_CASES)
def test_the_concurrency_gate_judges_against_the_block_after_the_candidate(
    tmp_path: Path, block: Sequence[float] | None, status: str, fragment: str
) -> None:
    sweep = tmp_path
    base_root = "candidates/baseline"
    write_run(sweep, "baseline", is_baseline=True, root=base_root)
    write_run(sweep, "cand")
    for profile in ("short", "decode_heavy"):
        _tps(sweep, base_root, "baseline", profile, OPENING, first=0)
        _tps(sweep, "candidates/cand", "cand", profile, SLOWED, first=0)
    if block is not None:
        root = block_root(base_root, "cand")
        write_run(sweep, "baseline", is_baseline=True, root=root, follows="cand")
        _tps(sweep, root, "baseline", "decode_heavy", block, first=1)
    verdict = evaluate_sweep(sweep, CFG, baseline="baseline").verdicts[0]
    gate = next(g for g in verdict.gates if g.gate == "concurrency")
    assert gate.status == status, gate.message
    assert fragment in gate.message, gate.message
    if status == "inconclusive":
        assert verdict.decision != "reject", verdict.reason
        unsettled = [c for c in gate.comparisons if "within the host's drift" in c.message]
        assert unsettled and all(c.status == "inconclusive" and c.more_repeats is None for c in unsettled)
    else:
        assert verdict.decision == "reject", verdict.reason


def test_only_failures_are_touched() -> None:
    """A pass, an inconclusive comparison and a gain-side ratio stay as they were; a failure within the
    drift becomes inconclusive without a repeats estimate."""
    shift = HostShift(speed=0.97, runs=2, block="candidates/baseline/blocks/after-cand")
    rows = [
        _measured("pass", 0.99, (0.95, 1.03)),
        _measured("inconclusive", 0.93, (0.85, 1.01)),
        _measured("fail", 0.94, (0.90, 0.99)),
        _measured("fail", 0.80, (0.75, 0.85)),
    ]
    out = within_drift(rows, shift)
    assert [m.comparison.status for m in out] == ["pass", "inconclusive", "inconclusive", "fail"]
    assert out[1].comparison.more_repeats == 4  # not a failure: untouched
    assert out[2].comparison.more_repeats is None
    assert "0.970x of its opening tokens/s; against it the candidate is 0.969x, not worse beyond" in (
        out[2].comparison.message
    )
    assert within_drift(rows, None) == rows

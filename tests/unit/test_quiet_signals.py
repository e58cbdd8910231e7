"""Quiet signals in a KEEP (issue 42, item 8): a requirement that passes with a comparison left
inconclusive (a FLAGGED greedy agreement) makes a KEEP or a NEUTRAL INCONCLUSIVE; a slow run that comes
back in the candidate's confirmation runs does too; the runs set aside are named in a KEEP's reason."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from contracts.schema import GatesConfig
from contracts.sweepdir import load_results
from contracts.verdicts import Comparison, Decision, GateResult, SetAside
from gates import evaluate_sweep
from gates.quiet import confirmation_runs
from gates.sequential import SequentialPlan
from gates.verdict import decide
from tests.unit.gates_fixtures import SweepBuilder, baseline_like
from tests.unit.test_answer_accuracy import _answers, _evaluate
from tests.unit.test_confirm import _slow_runs
from tests.unit.test_gates_incomplete import CFG as SWEEP_CFG

CFG = GatesConfig()


def _gain(status: str) -> GateResult:
    return GateResult(
        gate="latency_gain",
        role="gain",
        status=status,  # type: ignore[arg-type]
        message=f"serial median request latency 0.800x (gain {status})",
        comparisons=[
            Comparison(
                metric="serial_combined_p50",
                profile="serial",
                status=status,  # type: ignore[arg-type]
                observed=0.16,
                baseline=0.20,
                ratio=0.8,
                interval=(0.75, 0.85),
                message="serial median request latency 0.800x",
            )
        ],
    )


def _requirement(gate: str, status: str, comparisons: Sequence[Comparison] = ()) -> GateResult:
    return GateResult(
        gate=gate,
        role="requirement",
        status=status,  # type: ignore[arg-type]
        message=f"{gate} {status}",
        comparisons=list(comparisons),
    )


FLAG = Comparison(
    metric="greedy_agreement",
    profile="accuracy",
    status="inconclusive",
    observed=0.7,
    baseline=1.0,
    message="FLAGGED: greedy agreement with the baseline 28/40 (70%) token-identical, below the baseline's "
    "own repeat-to-repeat agreement 40/40 although it claims greedy draft sampling",
)


def _tps(*aside: SetAside) -> Comparison:
    return Comparison(
        metric="output_tps",
        profile="decode_heavy",
        status="pass",
        observed=10_000.0,
        baseline=10_000.0,
        ratio=1.0,
        interval=(0.97, 1.03),
        set_aside=list(aside),
    )


def _slow(side: str, repeat: int, factor: float = 2.9) -> SetAside:
    return SetAside(side=side, repeat=repeat, value=3_400.0, factor=factor)  # type: ignore[arg-type]


ACCURACY_FLAGGED = _requirement("answer_accuracy", "pass", [FLAG])
LAGGED = FLAG.model_copy(
    update={"metric": "ttft_p50", "profile": "short", "undecidable": "client_lag", "client_lag_s": 0.03}
)
CONFIRMED = {"decode_heavy": frozenset({4, 5})}  # r1-r3 fixed, r4 and r5 confirmation runs


@pytest.mark.parametrize(
    ("results", "decision", "said", "unsaid"),
    [
        pytest.param([_gain("pass")], "keep", ["KEEP: latency gain beyond noise"], ["set aside"], id="keep"),
        pytest.param(
            [_gain("pass"), ACCURACY_FLAGGED],
            "inconclusive",
            [
                "INCONCLUSIVE: answer_accuracy passed with accuracy greedy_agreement unsettled (FLAGGED",
                "more repeats will not settle it",
                "(without it: KEEP: latency gain beyond noise",
            ],
            [],
            id="keep_flagged",
        ),
        pytest.param(
            [_gain("fail"), ACCURACY_FLAGGED],
            "inconclusive",
            ["INCONCLUSIVE: answer_accuracy passed", "(without it: NEUTRAL: fails no requirement"],
            [],
            id="neutral_flagged",
        ),
        pytest.param(
            [_gain("pass"), _requirement("concurrency", "pass", [LAGGED])],
            "incomplete",
            ["INCOMPLETE: short ttft_p50: the load client was 30 ms late"],
            ["a question of correctness"],
            id="a_comparison_within_the_lag_is_a_gap_not_a_quiet_signal",
        ),
        pytest.param(
            [_gain("pass"), ACCURACY_FLAGGED, _requirement("stability", "fail")],
            "reject",
            ["REJECT: stability"],
            ["FLAGGED"],
            id="reject_stays",
        ),
        pytest.param(
            [_gain("pass"), _requirement("concurrency", "pass", [_tps(_slow("candidate", 2))])],
            "keep",
            [
                "KEEP: latency gain beyond noise",
                "runs set aside as slow outliers (beyond 2x the median of their side's other runs): "
                "candidate decode_heavy r2 (output_tps 2.9x slower)",
            ],
            [],
            id="keep_names_a_run_set_aside",
        ),
        pytest.param(
            [_gain("pass"), _requirement("concurrency", "pass", [_tps(_slow("baseline", 1, 3.2))])],
            "keep",
            ["baseline decode_heavy r1 (output_tps 3.2x slower)"],
            [],
            id="keep_names_the_baselines",
        ),
        pytest.param(
            [
                _gain("pass"),
                _requirement("concurrency", "pass", [_tps(_slow("candidate", 1), _slow("candidate", 2))]),
            ],
            "keep",
            ["candidate decode_heavy r1 (output_tps 2.9x slower); candidate decode_heavy r2"],
            ["INCONCLUSIVE"],
            id="two_slow_fixed_repeats_outnumbered_by_the_confirmation_runs",
        ),
        pytest.param(
            [
                _gain("pass"),
                _requirement("concurrency", "pass", [_tps(_slow("candidate", 1), _slow("candidate", 4))]),
            ],
            "inconclusive",
            [
                "INCONCLUSIVE: the candidate's decode_heavy runs r1 2.9x, r4 2.9x",
                "slow runs came back in its confirmation runs: a slow minority that recurs is a finding",
                "(without it: KEEP: latency gain",
            ],
            [],
            id="a_slow_confirmation_run_recurs",
        ),
        pytest.param(
            [
                _gain("fail"),
                _requirement("concurrency", "pass", [_tps(_slow("candidate", 1), _slow("candidate", 5))]),
            ],
            "neutral",
            ["NEUTRAL: fails no requirement", "slow runs came back in its confirmation runs"],
            ["INCONCLUSIVE"],
            id="neutral_names_slow_runs_that_recur",
        ),
        pytest.param(
            [_gain("fail"), _requirement("concurrency", "pass", [_tps(_slow("candidate", 2))])],
            "neutral",
            ["NEUTRAL: fails no requirement"],
            ["set aside"],
            id="neutral_not_named",
        ),
        pytest.param(
            [
                _gain("pass"),
                _requirement("concurrency", "pass", [_tps(_slow("baseline", 1), _slow("baseline", 4))]),
            ],
            "keep",
            ["baseline decode_heavy r1", "baseline decode_heavy r4"],  # against the KEEP: named, no finding
            [],
            id="the_baselines_slow_runs_are_named",
        ),
    ],
)
def test_quiet_signals_in_a_keep(
    results: list[GateResult], decision: Decision, said: list[str], unsaid: list[str]
) -> None:
    verdict = decide("c", "baseline", results, CFG, confirmations=CONFIRMED)
    assert verdict.decision == decision, verdict.reason
    for words in said:
        assert words in verdict.reason, (words, verdict.reason)
    for words in unsaid:
        assert words not in verdict.reason, (words, verdict.reason)


def test_a_lossless_candidate_flagged_by_the_accuracy_gate_is_not_kept(tmp_path: Path) -> None:
    """Right answers worded differently on 12 items under a greedy claim: the gate passes and flags it;
    with a latency gain the verdict would have been a KEEP."""
    reworded = [f"so {t}" if i < 12 and t else t for i, t in enumerate(_answers())]
    accuracy = _evaluate(tmp_path, [reworded], [_answers(), _answers()], claim="greedy draft sampling")
    assert accuracy.status == "pass" and accuracy.comparisons[1].status == "inconclusive"
    verdict = decide("c", "baseline", [_gain("pass"), accuracy], CFG)
    assert verdict.decision == "inconclusive" and "FLAGGED: greedy agreement" in verdict.reason
    assert verdict.more_repeats is None


def _faster_with_slow_runs(root: Path, slow: dict[int, float], runs: int) -> None:
    """A candidate whose serial latency is 20% lower (a KEEP), with decode_heavy runs ``slow``."""
    b = SweepBuilder(root)
    b.run("baseline", is_baseline=True, free_gib=[1.0] * 8)
    baseline_like(b, "baseline")
    b.run("cand", free_gib=[1.0] * 8)
    baseline_like(b, "cand")
    b.serial("cand", ttft=0.16, e2e=4.0)
    shutil.rmtree(root / "candidates" / "cand" / "decode_heavy")
    (root / "candidates" / "cand" / "decode_heavy").mkdir()
    _slow_runs(root, "cand", slow, repeats=runs)


@pytest.mark.parametrize(
    ("slow", "decision", "said"),
    [
        ({}, "keep", []),
        ({1: 3.0}, "keep", ["candidate decode_heavy r1 ("]),  # one slow of 3 + 1 confirmation run
        ({1: 3.0, 2: 3.0}, "keep", ["candidate decode_heavy r1 (", "candidate decode_heavy r2 ("]),
        ({1: 3.0, 3: 3.0}, "inconclusive", ["slow runs came back in its confirmation runs"]),
    ],
)
def test_a_sweep_whose_slow_runs_recur_after_the_confirmation_runs_keeps_nothing(
    tmp_path: Path, slow: dict[int, float], decision: Decision, said: list[str]
) -> None:
    """Runs r0-r2 are the fixed repeats (this builder counts from 0), r3 and r4 confirmation runs; the judge
    passes the plan, as a sweep's judge does."""
    runs = 4 if slow == {1: 3.0} else 5
    _faster_with_slow_runs(tmp_path, slow, runs)
    plan = SequentialPlan(3, 3)
    cand = load_results(tmp_path, "candidates/cand", "cand")
    assert confirmation_runs(cand, plan, None)["decode_heavy"] == frozenset(range(3, runs))
    verdict = evaluate_sweep(tmp_path, SWEEP_CFG, baseline="baseline", plan=plan).verdicts[0]
    assert verdict.decision == decision, verdict.reason
    for words in said:
        assert words in verdict.reason, (words, verdict.reason)

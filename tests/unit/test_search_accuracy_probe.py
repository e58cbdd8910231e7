"""The accuracy probe at a trial's screen (issue 43 item 1, orchestrator.measure.trial_accuracy): a space
that touches a lossy setting runs the labelled profile once, scored as the answer_accuracy gate scores it;
a loss the gate would refuse is a broken requirement (its size: how far the drop's upper bound lies beyond
the tolerance, in accuracy points)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.schema import AccuracyGateConfig, GatesConfig
from orchestrator.measure.trial_accuracy import accuracy_size, requirement_name, space_fields, touches_lossy
from orchestrator.search.confirm import relax_advice
from tests.unit.test_answer_accuracy import _answers, _side

pytestmark = pytest.mark.unit

GATES = GatesConfig(accuracy=AccuracyGateConfig(profile="accuracy", tolerance=0.0, min_items=20))


@pytest.mark.parametrize(
    ("space", "lossy"),
    [
        ({"max_num_seqs": "choice(64, 128)"}, False),
        ({"layout": "choice(a, b)", "gpu_memory_utilization": "choice(0.8, 0.9)"}, False),
        ({"speculative": {"num_speculative_tokens": "choice(3, 5)"}}, True),
        ({"speculative": {"method": "choice(off, dspark)"}}, True),
        ({"kv_cache_dtype": "choice(auto, fp8)"}, True),
        ({"extra_args": {"kv_cache_dtype": "choice(auto, fp8)"}}, True),
        ({"extra_args": {"block_size": "choice(16, 32)"}}, False),
    ],
)
def test_a_space_that_touches_a_lossy_setting_is_probed(space: dict[str, object], lossy: bool) -> None:
    assert touches_lossy(space_fields(space)) is lossy


@pytest.mark.parametrize(
    ("wrong", "missing", "size"),
    [
        ([0, 1], [], 0.0),  # the same answers: met, at the tolerance
        ([], [], -0.05),  # two items more right than the baseline: met, by 5 points
        ([0, 1, 3, 4], [], 0.0),  # two items lost: within noise at 40 items, met at a screen
        # seven more lost (17.5 points): the gate fails; it would pass them at a tolerance of the drop's
        # upper bound, 31.95 points (a tolerance of 17.5 would leave them inconclusive)
        ([0, 1, 5, 6, 7, 8, 9, 10, 11], [], 0.3195),
        ([0, 1], list(range(20, 30)), 0.4019),  # ten unanswered items count against the candidate (25 points)
    ],
)
def test_the_accuracy_requirement_is_the_gates_verdict_on_one_run(
    tmp_path: Path, wrong: list[int], missing: list[int], size: float
) -> None:
    base = _side(tmp_path, "baseline", [_answers(wrong=[0, 1])]).repeats("accuracy")
    cand = _side(tmp_path, "c", [_answers(wrong=wrong, missing=missing)]).repeats("accuracy")
    assert accuracy_size(base, cand, GATES) == pytest.approx(size, abs=1e-4)


def test_no_labelled_runs_no_ruling(tmp_path: Path) -> None:
    base = _side(tmp_path, "baseline", [_answers()]).repeats("accuracy")
    assert accuracy_size(base, [], GATES) is None
    few = GatesConfig(accuracy=AccuracyGateConfig(profile="accuracy", min_items=41))
    assert accuracy_size(base, base, few) is None  # fewer items than the gate decides on


def test_what_to_relax_for_an_accuracy_loss() -> None:
    assert requirement_name("accuracy") == "accuracy" and requirement_name("gsm") == "gsm accuracy"
    assert relax_advice({"accuracy": 0.3195}, GATES) == ["accuracy: gates.accuracy.tolerance 0.32 (now 0)"]

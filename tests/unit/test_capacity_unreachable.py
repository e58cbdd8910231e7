"""The SLO held at no level the baseline's search tried (issue 42, item 7): the verdict says exactly that and
what to change; a candidate that holds the SLO where the baseline never does is a capacity gain with a
one-sided interval. Before: "the baseline held SLO ... at no level tried: nothing to compare against",
and the verdict added "the effect is too small for more repeats to settle it", which was false."""

from __future__ import annotations

import pytest

from contracts.results import CapacityResult
from contracts.verdicts import GateResult
from gates.verdict import decide
from orchestrator.measure.capacity_search import SearchSettings
from tests.unit.capacity_fixtures import CFG, searched, side
from tests.unit.capacity_fixtures import judge as judge_capacity

W = (0.03, -0.02, 0.01, -0.04, 0.02, 0.0, -0.01, 0.04)
FROM_8 = SearchSettings(start=8, min_level=8, max_level=512, integer=True)  # capacity.min_level 8
FROM_2 = SearchSettings(start=4, min_level=2, max_level=512, integer=True)
COMPAT = GateResult(gate="compatibility", role="requirement", status="pass", message="started")
NO_LATENCY_GAIN = GateResult(gate="latency_gain", role="gain", status="fail", message="no latency gain")


@pytest.mark.parametrize(
    ("cand", "base", "status", "decision", "says"),
    [
        # Neither side held the SLO at any level tried: nothing compares; say so and what measures it.
        pytest.param(
            searched(5, settings=FROM_8),
            searched(6, settings=FROM_8),
            "not_run",
            "incomplete",
            [
                "the baseline held the SLO at no level tried (lowest 8 concurrent)",
                "a looser SLO or a lower capacity.min_level",
            ],
            id="neither_held",
        ),
        # The candidate holds the SLO up to 19 where the baseline held it nowhere (down to 8): at least
        # 2.4x, a gain with a one-sided interval, and a keep when nothing else speaks against it.
        pytest.param(
            searched(20, wobble=W),
            searched(6, settings=FROM_8),
            "pass",
            "keep",
            [
                "the baseline held the SLO at no level tried: a one-sided interval",
                "\u2265 2.",
                "capacity at the SLO up beyond noise",
            ],
            id="candidate_held_where_the_baseline_never_did",
        ),
        # The candidate held only below the baseline's lowest level tried: at least 0.5x decides nothing.
        pytest.param(
            searched(5, settings=FROM_2),
            searched(6, settings=FROM_8),
            "not_run",
            "incomplete",
            ["the ratio is at least 0.", "a lower capacity.min_level"],
            id="candidate_held_only_below_the_baselines_lowest",
        ),
    ],
)
def test_an_slo_the_baseline_never_held_says_so_and_what_to_change(
    cand: CapacityResult, base: CapacityResult, status: str, decision: str, says: list[str]
) -> None:
    gate = judge_capacity(side("c", cand), side("b", base))
    assert gate.status == status, gate.message
    verdict = decide("c", "b", [COMPAT, gate, NO_LATENCY_GAIN], CFG)
    assert verdict.decision == decision, verdict.reason
    for text in says:
        assert text in verdict.reason, verdict.reason
    assert "too small for more repeats" not in verdict.reason
    assert "rerun the missing" not in verdict.reason

"""Capacity at the SLO up beyond noise is a gain (gates.verdict): a search for capacity can end in KEEP.

A table over the capacity gate's ratio and interval and the latency gain gate's status: more capacity with
the whole interval above 1 (and by ``min_gain``) keeps, unless a latency got worse beyond tolerance (a
trade-off: neutral, saying so); a capacity ratio within noise or under ``min_gain`` is no gain.
"""

from __future__ import annotations

import pytest

from contracts.schema import GatesConfig
from contracts.verdicts import Comparison, GateResult, GateStatus
from gates.verdict import decide


def _capacity(ratio: float, interval: tuple[float, float]) -> GateResult:
    text = f"decode_heavy capacity {ratio:.3f}x [{interval[0]:.3f}x-{interval[1]:.3f}x]"
    return GateResult(
        gate="capacity",
        role="requirement",
        status="pass",
        message=text,
        comparisons=[
            Comparison(
                metric="capacity",
                profile="decode_heavy",
                status="pass",
                observed=216.0 * ratio,
                baseline=216.0,
                ratio=ratio,
                interval=interval,
                message=text,
            )
        ],
    )


def _gain(status: GateStatus, worse: bool) -> GateResult:
    """The latency gain gate: ``worse``: serial latency 1.19x with its interval above 1 (beyond the 5%
    tolerance); else a serial latency within noise."""
    ratio, interval = (1.19, (1.042, 1.36)) if worse else (1.01, (0.95, 1.07))
    serial = Comparison(
        metric="serial_e2e_p50",
        profile="serial",
        status="fail",
        observed=1.43 * ratio,
        baseline=1.43,
        ratio=ratio,
        interval=interval,
        message=f"serial median latency {ratio}x",
    )
    return GateResult(gate="latency_gain", role="gain", status=status, message=status, comparisons=[serial])


@pytest.mark.parametrize(
    ("ratio", "interval", "latency", "worse", "decision", "says"),
    [
        # 1.29x with its interval above 1, no latency gain, nothing worse: capacity is the gain.
        (1.29, (1.12, 1.45), "fail", False, "keep", "capacity at the SLO up beyond noise"),
        (1.29, (1.12, 1.45), "inconclusive", False, "keep", "capacity at the SLO up beyond noise"),
        # A latency gain keeps as before; the capacity gain is listed beside it.
        (1.29, (1.12, 1.45), "pass", False, "keep", "KEEP: latency gain beyond noise"),
        # More capacity, a serial latency worse beyond tolerance: a trade-off the gates do not make.
        (1.29, (1.12, 1.45), "fail", True, "neutral", "a trade-off"),
        # Within noise (the demo's confirmation read 1.174x [0.996x-1.38x]): no gain.
        (1.174, (0.996, 1.38), "inconclusive", False, "inconclusive", "inconclusive"),
        (1.174, (0.996, 1.38), "fail", False, "neutral", "no clear gain"),
        # Beyond noise but under min_gain (5%): no gain.
        (1.03, (1.01, 1.05), "fail", False, "neutral", "no clear gain"),
    ],
)
def test_capacity_up_beyond_noise_is_a_gain_unless_a_latency_got_worse(
    ratio: float, interval: tuple[float, float], latency: GateStatus, *, worse: bool, decision: str, says: str
) -> None:
    results = [
        GateResult(gate="compatibility", role="requirement", status="pass", message="started"),
        _capacity(ratio, interval),
        _gain(latency, worse),
    ]
    verdict = decide("winner", "baseline", results, GatesConfig())
    assert verdict.decision == decision, verdict.reason
    assert says in verdict.reason
    capacity_listed = any("capacity" in g for g in verdict.gains)
    assert capacity_listed == (ratio >= 1.05 and interval[0] > 1), verdict.gains

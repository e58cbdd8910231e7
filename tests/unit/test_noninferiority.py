"""Non-inferiority of accuracy (issue 44 item 2): Tango's score interval of the paired drop against its
published values, the items a tolerance needs, and plan's refusal of a labelled set too small to pass."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from contracts.errors import ConfigError
from gates.noninferiority import items_needed, noninferiority, paired_drop, tango_interval
from orchestrator.config.compose import load
from orchestrator.config.validate import validate

Z2 = 1.959963984540054**2


@pytest.mark.parametrize(
    ("lost", "gained", "items", "low", "high"),
    [
        # Published: Fagerland, Lydersen and Laake, "Statistical Analysis of Contingency Tables" (2017),
        # chapter 8, the Cavo et al. (2012) table (59, 6 / 16, 80): Tango's 95% interval -0.1240 to -0.0054.
        (6, 16, 161, -0.1240, -0.0054),
        (16, 6, 161, 0.0054, 0.1240),  # the sides swapped: the interval negated
        # No discordant item: the closed form [-z^2 / (n + z^2), z^2 / (n + z^2)], finite and non-zero.
        (0, 0, 40, -Z2 / (40 + Z2), Z2 / (40 + Z2)),
        (0, 0, 189, -Z2 / (189 + Z2), Z2 / (189 + Z2)),
        (0, 0, 300, -Z2 / (300 + Z2), Z2 / (300 + Z2)),
    ],
)
def test_tangos_score_interval(lost: int, gained: int, items: int, low: float, high: float) -> None:
    got = tango_interval(lost, gained, items, 0.95)
    assert got == pytest.approx((low, high), abs=5e-5)


@pytest.mark.parametrize(
    ("tolerance", "confidence", "needed"),
    [(0.02, 0.95, 189), (0.05, 0.95, 73), (0.01, 0.95, 381), (0.02, 0.9, 133), (0.0, 0.95, None)],
)
def test_the_items_a_tolerance_needs(tolerance: float, confidence: float, needed: int | None) -> None:
    """The fewest items with which an identical candidate passes, and one fewer does not."""
    assert items_needed(tolerance, confidence) == needed
    if needed is not None:
        assert noninferiority(paired_drop(needed, 0, 0, confidence=confidence), tolerance) == "pass"
        assert noninferiority(paired_drop(needed - 1, 0, 0, confidence=confidence), tolerance) != "pass"


def _set(tmp: Path, items: int) -> Path:
    path = tmp / "mine.jsonl"
    path.write_text(
        "".join(json.dumps({"prompt": f"{i} + {i}?", "answer": 2 * i}) + "\n" for i in range(items))
    )
    return path


@pytest.mark.parametrize(
    ("items", "tolerance", "fragment"),
    [
        (
            40,
            0.02,
            "a labelled set of at least 189 items: with 40 items the accuracy drop's upper bound "
            "(95% Tango score interval) is at best 8.8 points",
        ),
        (188, 0.02, "at least 189 items"),
        (189, 0.02, None),
        (300, 0.02, None),
        (40, 0.1, None),
        (72, 0.05, "a gates.accuracy.tolerance of at least 0.051 for this one"),
        (73, 0.05, None),
        (300, 0.0, "gates.accuracy.tolerance = 0.0: above 0 when the sweep runs the labelled profile"),
    ],
)
def test_plan_refuses_a_set_too_small_to_ever_pass(
    tmp_path: Path, items: int, tolerance: float, fragment: str | None
) -> None:
    cfg, _ = load([])
    cfg.workloads["accuracy"] = replace(
        cfg.workloads["accuracy"], prompts_file=str(_set(tmp_path, items)), num_requests=items
    )
    cfg.gates.accuracy = replace(cfg.gates.accuracy, tolerance=tolerance)
    validate(cfg)  # not in run.profiles: not applicable, nothing refused
    cfg.run.profiles = [*cfg.run.profiles, "accuracy"]
    if fragment is None:
        validate(cfg)
        return
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    assert fragment in str(info.value)


def test_the_shipped_set_can_pass_at_the_default() -> None:
    cfg, _ = load(["run.profiles=[serial,accuracy]"])
    validate(cfg)
    need = items_needed(cfg.gates.accuracy.tolerance, cfg.gates.confidence)
    assert cfg.gates.accuracy.tolerance == 0.02 and need is not None
    assert cfg.workloads["accuracy"].num_requests == 300 >= need

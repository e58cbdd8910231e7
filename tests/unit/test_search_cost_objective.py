"""The $/Mtok-at-the-SLO objective (issue 43 item 1): minimised, refused without a price, and "better" read
the right way by the search's rules (orchestrator.search.rules, .study, .checks; measure.trial)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from contracts.schema import GauntletConfig
from contracts.search import SearchConfig
from contracts.trials import SearchRecord, TrialRecord
from orchestrator.config.validate import Sources
from orchestrator.measure.trial import WORST_USD, usd_at
from orchestrator.search.checks import search_problems
from orchestrator.search.rules import best_trial, stop_reason
from orchestrator.search.study import directions

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("objective", "pareto", "expected"),
    [
        ("capacity", False, ["maximize"]),
        ("goodput", True, ["maximize", "minimize"]),
        ("usd_per_mtok_at_slo", False, ["minimize"]),
        ("usd_per_mtok_at_slo", True, ["minimize", "minimize"]),
    ],
)
def test_directions(objective: str, pareto: bool, expected: list[str]) -> None:
    assert directions(SearchConfig(objective=objective, pareto=pareto)) == expected


@pytest.mark.parametrize(
    ("output_tps", "gpus", "price", "expected"),
    [
        (2000.0, 8, 2.5, 2.7778),  # contracts.cost's example: 8 x $2.5 per hour over 2000 tokens/s
        (1000.0, 4, 2.5, 2.7778),
        (0.0, 8, 2.5, WORST_USD),  # nothing served within the SLO: the worst cost
    ],
)
def test_usd_at(output_tps: float, gpus: int, price: float, expected: float) -> None:
    assert round(usd_at(output_tps, gpus, price), 4) == expected


def _record(values: list[float], direction: str) -> SearchRecord:
    trials = [
        TrialRecord(number=i, name=f"s_t{i:03d}", params={"k": i}, state="complete", values=[v], launches=1)
        for i, v in enumerate(values)
    ]
    return SearchRecord(
        name="s",
        objective="x",
        directions=[direction],  # type: ignore[list-item]
        space_size=9,
        trials=trials,
        launches=len(values),
    )


@pytest.mark.parametrize(
    ("values", "direction", "best"),
    [
        ([2.0, 1.5, 1.8], "minimize", "s_t001"),  # the cheapest
        ([2.0, 1.5, 1.8], "maximize", "s_t000"),
    ],
)
def test_best_is_read_in_the_objectives_direction(values: list[float], direction: str, best: str) -> None:
    chosen = best_trial(_record(values, direction))
    assert chosen is not None and chosen.name == best


@pytest.mark.parametrize(
    ("values", "direction", "stalled"),
    [
        # $/Mtok falling by more than 2% each time: improving
        ([2.0, 1.9, 1.8, 1.7], "minimize", False),
        # rising cost never improves the best: stalled after 3
        ([2.0, 2.1, 2.2, 2.3], "minimize", True),
        ([2.0, 2.1, 2.2, 2.3], "maximize", False),
    ],
)
def test_a_stall_is_read_in_the_objectives_direction(
    values: list[float], direction: str, stalled: bool
) -> None:
    reason = stop_reason(_record(values, direction), SearchConfig(stall_trials=3, max_launches=99))
    assert (reason is not None and reason.startswith("improvement stalled")) is stalled


@pytest.mark.parametrize(
    ("objective", "price", "confirm_top", "fields"),
    [
        ("usd_per_mtok_at_slo", None, 2, ["host.gpu_hour_price"]),
        ("usd_per_mtok_at_slo", 2.5, 2, []),
        ("capacity", None, 0, ["search.confirm_top"]),
        ("capacity", None, 2, []),
    ],
)
def test_the_checks_refuse_a_cost_objective_without_a_price(
    objective: str, price: float | None, confirm_top: int, fields: list[str]
) -> None:
    base = GauntletConfig()
    cfg = replace(
        base,
        host=replace(base.host, gpu_hour_price=price),
        capacity=replace(base.capacity, profile="decode_heavy"),
        search=SearchConfig(
            space={"max_num_seqs": "choice(32,64)"}, objective=objective, confirm_top=confirm_top
        ),
    )
    _space, problems = search_problems(cfg, Sources(), elsewhere=False)
    assert [p.field for p in problems] == fields

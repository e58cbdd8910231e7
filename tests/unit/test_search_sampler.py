"""The search's sampler (orchestrator.search.study, issue 43 item 5): an interval on an integer field is an
integer distribution, TPE models the fields jointly and lies about trials in flight only where there are
some, and the baseline's point is asked first and, with the capacity objective, reuses the sweep's opening
measurement of the baseline instead of a launch.

Before: an interval on max_num_seqs drew floats (a failed launch each; once the encoding was one, a point
pruned before start), TPESampler ran with Optuna's defaults, and the baseline's point was asked only if the
sampler happened on it, then launched and measured again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest

from contracts.errors import ConfigError
from contracts.files import write_model
from contracts.layout import SweepPaths
from contracts.results import CapacityResult
from contracts.search import INTEGER_FIELDS, SearchConfig
from contracts.trials import SearchRecord, TrialRecord, read_search
from orchestrator.config.space import parse_space
from orchestrator.measure.trial import TrialOutcome
from orchestrator.search.loop import SearchRun
from orchestrator.search.rules import best_trial, stop_reason
from orchestrator.search.study import (
    SearchStudy,
    TrialTicket,
    distributions,
    make_sampler,
    open_study,
    ordered_values,
)
from tests.unit.composed import load

MEMORY = "sqlite:///:memory:"


@pytest.mark.parametrize(
    ("field", "expression", "kind", "bounds", "log"),
    [
        ("max_num_seqs", "interval(32,256)", optuna.distributions.IntDistribution, (32, 256), False),
        ("max_num_seqs", "tag(log,interval(32,256))", optuna.distributions.IntDistribution, (32, 256), True),
        (
            "max_num_batched_tokens",
            "interval(4096,32768)",
            optuna.distributions.IntDistribution,
            (4096, 32768),
            False,
        ),
        (
            "max_num_batched_tokens",
            "tag(log,interval(4096,32768))",
            optuna.distributions.IntDistribution,
            (4096, 32768),
            True,
        ),
        (
            "speculative.num_speculative_tokens",
            "interval(1,7)",
            optuna.distributions.IntDistribution,
            (1, 7),
            False,
        ),
        # the whole numbers of an interval with fractional ends
        (
            "speculative.num_speculative_tokens",
            "interval(0.5,7.5)",
            optuna.distributions.IntDistribution,
            (1, 7),
            False,
        ),
        (
            "gpu_memory_utilization",
            "interval(0.7,0.9)",
            optuna.distributions.FloatDistribution,
            (0.7, 0.9),
            False,
        ),
        (
            "gpu_memory_utilization",
            "tag(log,interval(0.7,0.9))",
            optuna.distributions.FloatDistribution,
            (0.7, 0.9),
            True,
        ),
    ],
)
def test_an_interval_on_an_integer_field_is_an_integer_distribution(
    field: str, expression: str, kind: type, bounds: tuple[float, float], log: bool
) -> None:
    head, _, tail = field.partition(".")
    space = parse_space(SearchConfig(space={head: {tail: expression}} if tail else {field: expression}))
    (dist,) = distributions(space).values()
    assert type(dist) is kind
    assert (dist.low, dist.high, dist.log) == (*bounds, log)  # type: ignore[attr-defined]
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    drawn = [study.ask({field: dist}).params[field] for _ in range(20)]
    assert all(type(v) is (int if field in INTEGER_FIELDS else float) for v in drawn)


def test_an_interval_on_an_integer_field_holds_a_whole_number() -> None:
    with pytest.raises(
        ConfigError, match=r"an interval holding a whole number \(max_num_seqs takes integers\)"
    ):
        parse_space(SearchConfig(space={"max_num_seqs": "interval(32.2,32.8)"}))


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        # TPE models the fields jointly; nothing in flight when a sequential search asks in its own study;
        # its model starts after 4 finished trials, the baseline's point and the start probes counted
        ({}, (optuna.samplers.TPESampler, True, True, False, 4)),
        ({"pareto": True}, (optuna.samplers.TPESampler, True, True, False, 4)),
        # trials side by side, or another sweep's in a shared study: those in flight count as bad
        ({"parallel": 4}, (optuna.samplers.TPESampler, True, True, True, 4)),
        (
            {"storage": "postgresql+psycopg://team@db/gauntlet"},
            (optuna.samplers.TPESampler, True, True, True, 4),
        ),
        ({"startup_trials": 10}, (optuna.samplers.TPESampler, True, True, False, 10)),
        ({"sampler": "random", "parallel": 4}, (optuna.samplers.RandomSampler, None, None, None, None)),
    ],
)
def test_the_samplers_settings(settings: dict[str, Any], expected: tuple[Any, ...]) -> None:
    search = SearchConfig(name="s", space={"max_num_seqs": "choice(1,2)"}, **settings)
    study, _ = open_study(search, MEMORY)
    sampler = study.sampler
    got = (
        type(sampler),
        getattr(sampler, "_multivariate", None),
        getattr(sampler, "_group", None),
        getattr(sampler, "_constant_liar", None),
        getattr(sampler, "_n_startup_trials", None),
    )
    assert got == expected


@pytest.mark.parametrize(
    ("overrides", "startup"),
    [
        # the demo's search (make demo-search, the search-quality benchmark's spaces) as shipped: 4
        # (docs/measurements/search-quality.md: 6 found edge's best in 4 of 10 tuning seeds, 4 in 8)
        (["search=demo"], 4),
        (["search=demo", "search.startup_trials=6"], 6),
    ],
)
def test_the_demos_tpe_models_the_space_after_four_trials(overrides: list[str], startup: int) -> None:
    cfg, _ = load(overrides)
    assert cfg.search is not None
    sampler = make_sampler(cfg.search)
    assert isinstance(sampler, optuna.samplers.TPESampler)
    assert sampler._n_startup_trials == startup


def _name(overrides: list[str]) -> str:
    return next(o.split("=", 1)[1] for o in overrides if o.startswith("candidate.name="))


def _search(tmp_path: Path, *overrides: str, value: float = 50.0) -> tuple[list[list[str]], SearchRecord]:
    """A search of the demo's space (less the fields given) on a fake launcher; the jobs it launched and
    its record. Every launched point measures ``value``."""
    fast = [
        "search.sampler=random",
        "search.pruner=none",
        f"search.storage={MEMORY}",
        "search.stall_trials=99",
        "run.interleave=false",  # no block after a confirmation (test_search_confirm_rounds)
    ]
    # 3 trials: +2 launches kept for the confirmations (search.confirm_top), not launched here
    cfg, _ = load(["search=demo", "search.max_launches=5", *fast, *overrides])
    assert cfg.search is not None
    launched: list[list[str]] = []

    def one(job: list[str], ticket: TrialTicket | None) -> TrialOutcome:
        launched.append(job)
        return TrialOutcome(state="complete", fidelity="full", values=[value], launches=1, gpus=8)

    run = SearchRun(
        cfg,
        tmp_path,
        baseline_option="baseline",
        space=parse_space(cfg.search),
        flag_check=None,
        launch_job=one,
        say=lambda _: None,
    )
    run.run()
    record = read_search(tmp_path)
    assert record is not None
    return launched, record


def test_an_integer_interval_launches_integer_points(tmp_path: Path) -> None:
    launched, record = _search(
        tmp_path,
        "search.space.max_num_seqs='interval(32,256)'",
        "search.space.max_num_batched_tokens='tag(log,interval(4096,32768))'",
    )
    assert len(launched) == 3 and all(t.state == "complete" for t in record.trials), record.trials
    for job in launched:
        for field in ("max_num_seqs", "max_num_batched_tokens"):
            (value,) = [o.split("=", 1)[1] for o in job if o.startswith(f"candidate.{field}=")]
            assert value.isdigit(), job


#: The demo's space less max_num_seqs (the baseline leaves it to vLLM): the baseline is a point of it,
#: layout tp2_dp4, 16,384 tokens, 0.81, k = 7.
HOLDS_BASELINE = "~search.space.max_num_seqs"
BASELINE_POINT = {
    "layout": "tp2_dp4",
    "max_num_batched_tokens": 16384,
    "gpu_memory_utilization": 0.81,
    "speculative.num_speculative_tokens": 7,
}


def _opening_capacity(sweep: Path, capacity: float) -> None:
    path = SweepPaths(sweep).candidate("baseline").capacity
    path.parent.mkdir(parents=True, exist_ok=True)
    result = CapacityResult(
        candidate="baseline",
        profile="decode_heavy",
        mode="concurrency",
        unit="concurrent",
        slo="interactive",
        slo_text="",
        capacity=capacity,
        low=capacity,
        high=capacity * 1.1,
        resolution=0.1,
        gpus=8,
    )
    write_model(path, result)


@pytest.mark.parametrize(
    ("opening", "overrides", "launched_first"),
    [
        # the opening measured the baseline's capacity: trial 0 is the baseline's point, nothing launched
        (120.0, [HOLDS_BASELINE], False),
        # no opening capacity (or another objective): the baseline's point is still asked first, launched
        (None, [HOLDS_BASELINE], True),
        (120.0, [HOLDS_BASELINE, "search.objective=goodput", "search.load_level=8"], True),
    ],
)
def test_the_baselines_point_is_asked_first_and_reuses_the_openings_measurement(
    tmp_path: Path, opening: float | None, overrides: list[str], launched_first: bool
) -> None:
    if opening is not None:
        _opening_capacity(tmp_path, opening)
    launched, record = _search(tmp_path, *overrides)
    first = record.trials[0]
    assert (first.number, first.params, first.baseline) == (0, BASELINE_POINT, True)
    assert first.launches == (1 if launched_first else 0)
    assert _name(launched[0]) == ("demo_t000" if launched_first else "demo_t001")
    if not launched_first:
        assert first.state == "complete" and first.values == [opening] and first.fidelity == "full"
        assert "sweep's opening" in first.why
        assert record.launches == 3 and len(launched) == 3  # the budget went to other points
    # the best estimate (120 against 50, or a tie at 50 where it changes nothing) is the baseline's point:
    # the current configuration is the best found, nothing is confirmed (it would be against itself)
    assert record.winner is None and record.best_is_baseline
    assert all(t.baseline is (t.params == BASELINE_POINT) for t in record.trials if t.same_as is None)


def test_a_space_without_the_baselines_point_asks_nothing_first(tmp_path: Path) -> None:
    """The demo's max_num_seqs choices do not hold the baseline's (vLLM's default): nothing enqueued."""
    _opening_capacity(tmp_path, 120.0)
    _, record = _search(tmp_path)
    assert not any(t.baseline for t in record.trials)
    assert all(t.launches == 1 for t in record.trials)


@pytest.mark.parametrize(
    ("values", "stalled"),
    [
        # the baseline's point (measured by the opening, nothing launched) is the first best estimate:
        # three trials no better than it by 2% are a stall
        ([100.0, 101.0, 101.0, 101.0], True),
        ([100.0, 101.0, 103.0, 101.0], False),
    ],
)
def test_the_baselines_point_is_the_first_estimate_a_stall_is_counted_from(
    values: list[float], stalled: bool
) -> None:
    trials = [
        TrialRecord(
            number=k,
            name=f"s_t{k:03d}",
            params={"max_num_seqs": k},
            state="complete",
            fidelity="full",
            values=[v],
            launches=0 if k == 0 else 1,
            baseline=k == 0,
        )
        for k, v in enumerate(values)
    ]
    record = SearchRecord(
        name="s", objective="capacity", directions=["maximize"], space_size=9, trials=trials
    )
    record.launches = len(values) - 1
    reason = stop_reason(record, SearchConfig(stall_trials=3, max_launches=10))
    assert (reason is not None and reason.startswith("improvement stalled: 3")) is stalled, reason
    assert best_trial(record) is not None and best_trial(record).number != 0  # type: ignore[union-attr]


# ---------------------------------------------------------------- ordered choices (issue 43 item 9)
# Before: every `choice` was a categorical distribution, so TPE saw 48 sequences as far from 32 as from 256
# and could not carry "near a good value" to an untried neighbour.


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ((32, 48, 64, 256), (32, 48, 64, 256)),
        ((256, 32, 64), (32, 64, 256)),  # the positions are the values' order, not the list's
        ((0.72, 0.81, 0.9), (0.72, 0.81, 0.9)),
        ((1, 2.5, 4), (1, 2.5, 4)),
        ((1, 3), None),  # two values: no neighbour to carry anything to
        (("tp2_dp4", "tp4_dp2", "tp8_dp1"), None),  # names: no order
        ((True, False, True), None),  # a flag's booleans are not numbers here
        ((1, 2, "auto"), None),
    ],
)
def test_a_choice_of_three_or_more_numbers_is_ordered(
    values: tuple[Any, ...], expected: tuple[Any, ...] | None
) -> None:
    assert ordered_values(values) == expected


def test_an_ordered_choice_is_held_by_optuna_as_its_position_and_asked_back_as_its_value() -> None:
    search = SearchConfig(
        name="ordered",
        space={"layout": "choice(tp2_dp4,tp4_dp2)", "max_num_seqs": "choice(64,32,48,256)"},
        layouts={"tp2_dp4": {"tensor_parallel_size": 2}, "tp4_dp2": {"tensor_parallel_size": 4}},
    )
    space = parse_space(search)
    dists = distributions(space)
    assert dists["max_num_seqs"] == optuna.distributions.IntDistribution(0, 3)
    assert isinstance(dists["layout"], optuna.distributions.CategoricalDistribution)
    study = SearchStudy(search, space, MEMORY, sweep="s")
    point = {"layout": "tp4_dp2", "max_num_seqs": 48}
    study.enqueue(point)
    asked = study.ask()
    assert asked.params == point
    assert asked.trial.params == {"layout": "tp4_dp2", "max_num_seqs": 1}  # 48 is the second of 32..256
    drawn = [study.ask().params["max_num_seqs"] for _ in range(12)]
    assert set(drawn) <= {32, 48, 64, 256} and all(type(v) is int for v in drawn)
    refused = r"max_num_seqs=40 is not one of the space's values \[32, 48, 64, 256\]"
    with pytest.raises(ValueError, match=refused):
        study.enqueue({"layout": "tp2_dp4", "max_num_seqs": 40})

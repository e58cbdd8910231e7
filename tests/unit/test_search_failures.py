"""Failures that teach and cost less (issue 43, items 4 and 11): a server lost under load is infeasible,
a screen within its noise of the best is not cut, the memory probe, the stall that must have screened
every value, and the baseline's point as the best answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest

from contracts.files import write_model
from contracts.results import CapacityPoint, CapacityResult, WatchEvent
from contracts.schema import CandidateConfig
from contracts.search import Dimension, SearchConfig, Space
from contracts.trials import SearchRecord, TrialRecord, read_search
from launch.preflight import memory_fit_check
from orchestrator.config.space import parse_space
from orchestrator.measure.trial import DIED_UNDER_LOAD, TrialOutcome, unfinished
from orchestrator.search.coverage import fewest_launches, untried
from orchestrator.search.loop import SearchRun
from orchestrator.search.memory import Ceiling, MemoryCheck, ceilings, memory_refusal, next_probe
from orchestrator.search.reuse import opening_outcome
from orchestrator.search.rules import best_trial, is_baseline, stop_reason
from orchestrator.search.screen_rule import screen_outranked
from orchestrator.search.study import TrialTicket, make_pruner
from tests.unit.composed import load
from tests.unit.test_doctor import probes

pytestmark = pytest.mark.unit


def _event(kind: str, detail: str = "x") -> WatchEvent:
    return WatchEvent(at="2026-12-06T10:00:00Z", kind=kind, detail=detail)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kinds", "state"),
    [
        # the server started, then died (OOM-killed: exit -9), hung or turned unhealthy under load: the
        # point is infeasible, a constraint the sampler learns, never launched again
        (["died"], "infeasible"),
        (["hung"], "infeasible"),
        (["unhealthy"], "infeasible"),
        (["recovered", "died"], "infeasible"),
        # the load runner's own fault, or a run that only lacked its SLO figure, says nothing of the point
        (["harness"], "failed"),
        ([], "failed"),
        (["restarted", "recovered"], "failed"),
    ],
)
def test_a_server_lost_under_load_is_infeasible_and_a_harness_fault_is_not(
    kinds: list[str], state: str
) -> None:
    events = [_event(k, "exit code -9 (SIGKILL: out of memory)") for k in kinds]
    outcome = unfinished(TrialOutcome(state="running", fidelity="screen", launches=1), events, "the screen")
    assert outcome.state == state
    if state == "infeasible":
        assert outcome.why.startswith(DIED_UNDER_LOAD) and "SIGKILL" in outcome.why
    else:
        assert outcome.why == "the screen did not complete"
    assert outcome.launches == 1 and outcome.fidelity == "screen"  # what it spent and reached stays


@pytest.mark.parametrize(
    ("screen", "others", "noise", "cut"),
    [
        (94.0, [100.0, 90.0], 0.1, False),  # 94% of the best: within a 10% noise, not cut
        (91.0, [100.0], 0.1, False),  # 91 x 1.1 = 100.1 >= 100
        (90.0, [100.0], 0.1, True),  # 90 x 1.1 = 99 < 100: beyond noise below
        (94.0, [100.0], 0.0, True),  # no noise: the halving rule's word stands
        (50.0, [], 0.1, False),  # nothing to be below
        (100.0, [100.0], 0.1, False),
    ],
)
def test_a_screen_is_cut_only_beyond_its_noise_below_the_best(
    screen: float, others: list[float], noise: float, cut: bool
) -> None:
    assert screen_outranked(screen, others, noise) is cut


@pytest.mark.parametrize(
    ("pruner", "screens", "last", "noise", "pruned"),
    [
        # successive halving (reduction 3) alone would cut 94 (not in the best third of its rung); with
        # the screen's 10% noise it goes on to the full measurement
        ("successive_halving", [100.0, 99.0, 98.0, 97.0, 96.0, 95.0], 94.0, 0.1, False),
        ("successive_halving", [100.0, 99.0, 98.0, 97.0, 96.0, 95.0], 94.0, 0.0, True),
        ("successive_halving", [100.0, 99.0, 98.0, 97.0, 96.0, 95.0], 80.0, 0.1, True),
        ("hyperband", [100.0, 99.0, 98.0, 97.0, 96.0, 95.0], 94.0, 0.1, False),
    ],
)
def test_the_pruner_does_not_cut_a_point_within_the_screens_noise_of_the_best(
    pruner: str, screens: list[float], last: float, noise: float, pruned: bool
) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", pruner=make_pruner(pruner, 3, noise))
    dist = {"x": optuna.distributions.FloatDistribution(0.0, 1.0)}
    for value in screens:
        trial = study.ask(dist)
        trial.report(value, 1)
        trial.should_prune()  # the halving rule records each screen's rung when asked, as a trial's job does
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    trial = study.ask(dist)
    trial.report(last, 1)
    assert trial.should_prune() is pruned


# ---------------------------------------------------------------- the baseline's point as the best answer


def _opening(path: Path, capacity: float, high: float | None, runs: list[tuple[float, float, float]]) -> None:
    """A baseline's capacity.json: ``runs`` (level, margin, goodput tok/s) at output 2x the goodput."""
    points = [
        CapacityPoint(
            level=level,
            attempt=1,
            summary_file="x",
            met=margin >= 1,
            margin=margin,
            attainment=0.99,
            goodput_rps=1.0,
            goodput_tps=goodput,
            output_tps=2 * goodput,
            tps_per_user=None,
        )
        for level, margin, goodput in runs
    ]
    result = CapacityResult(
        candidate="baseline",
        profile="decode_heavy",
        mode="concurrency",
        unit="concurrent",
        slo="interactive",
        slo_text="",
        capacity=capacity,
        low=capacity,
        high=high,
        resolution=0.1,
        gpus=8,
        points=points,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    write_model(path, result)


@pytest.mark.parametrize(
    ("search", "level", "expected"),
    [
        # capacity: the opening's capacity search is the trial's full measurement, with its margin there
        (SearchConfig(objective="capacity"), 64.0, ([64.0], False, 1.25)),
        # goodput / tokens/s per GPU at the screen level: the opening's runs at that level (two: 800, 1000)
        (SearchConfig(objective="goodput"), 64.0, ([900.0], False, None)),
        (SearchConfig(objective="tps_per_gpu"), 64.0, ([225.0], False, None)),
        # a load level the opening's capacity search never ran: launched
        (SearchConfig(objective="goodput", load_level=50.0), 50.0, None),
        # a Pareto search: launched (its serial run's reuse is not implemented)
        (SearchConfig(objective="capacity", pareto=True), 64.0, None),
    ],
)
def test_the_baselines_point_reuses_the_openings_runs_where_they_measured_the_same(
    tmp_path: Path,
    search: SearchConfig,
    level: float,
    expected: tuple[list[float], bool, float | None] | None,
) -> None:
    path = tmp_path / "capacity.json"
    _opening(path, 64.0, 70.0, [(32.0, 2.0, 400.0), (64.0, 1.2, 800.0), (64.0, 1.3, 1000.0), (70.0, 0.9, 1)])
    outcome = opening_outcome(search, path, level, gpus=8)
    if expected is None:
        assert outcome is None
        return
    assert outcome is not None and outcome.launches == 0 and outcome.fidelity == "full"
    assert (outcome.values, outcome.at_least, outcome.margin) == expected
    assert "sweep's opening" in outcome.why


def _full(number: int, value: float, **kw: Any) -> TrialRecord:
    return TrialRecord(
        number=number,
        name=f"s_t{number:03d}",
        params={"k": number},
        state="complete",
        fidelity="full",
        values=[value],
        launches=0 if kw.get("baseline") else 1,
        **kw,
    )


@pytest.mark.parametrize(
    ("trials", "best", "baseline_best"),
    [
        # the baseline's point (trial 0) measures best: the current configuration is the answer
        ([_full(0, 120, baseline=True), _full(1, 100), _full(2, 110)], 0, True),
        # a point better than the baseline's is the one to confirm
        ([_full(0, 100, baseline=True), _full(1, 120)], 1, False),
        # a tie with the baseline below the ceiling: the point changes settings for nothing seen
        ([_full(0, 100, baseline=True), _full(1, 100)], 0, True),
        # a tie at the ceiling (both held the SLO at max_level): the larger SLO margin there wins...
        (
            [
                _full(0, 512, baseline=True, at_least=True, margin=1.0, attainment=1.0),
                _full(1, 512, at_least=True, margin=3.69, attainment=1.0),
            ],
            1,
            False,
        ),
        (
            [
                _full(0, 512, baseline=True, at_least=True, margin=3.69, attainment=1.0),
                _full(1, 512, at_least=True, margin=1.0, attainment=1.0),
            ],
            0,
            True,
        ),
        # ...then the attainment
        (
            [
                _full(0, 512, baseline=True, at_least=True, margin=2.0, attainment=0.97),
                _full(1, 512, at_least=True, margin=2.0, attainment=0.995),
            ],
            1,
            False,
        ),
        # a point that changes none of the baseline's settings is the baseline's configuration
        ([_full(1, 100), _full(2, 120)], 2, True),
    ],
)
def test_the_best_point_breaks_a_ceiling_tie_on_margin_and_may_be_the_baseline(
    trials: list[TrialRecord], best: int, baseline_best: bool
) -> None:
    record = SearchRecord(
        name="s", objective="capacity", directions=["maximize"], space_size=9, trials=trials
    )

    def changes(t: TrialRecord) -> int:
        return 0 if t.baseline or (t.number == 2 and t.values == [120]) else 1

    found = best_trial(record, changes)
    assert found is not None and found.number == best
    assert is_baseline(found, changes) is baseline_best


# ---------------------------------------------------------------- the memory probe and the stall's coverage

UTIL = "gpu_memory_utilization"
LAYOUTS = ("a", "b")


def _space(utils: tuple[float, ...] = (0.72, 0.81, 0.9), seqs: tuple[int, ...] = (32, 64)) -> Space:
    dims = (Dimension("layout", LAYOUTS), Dimension("max_num_seqs", seqs), Dimension(UTIL, utils))
    return Space(dims, layouts={"a": {"tensor_parallel_size": 2}, "b": {"tensor_parallel_size": 4}}, fixed={})


def _launched(number: int, layout: str, util: float, *, oom: bool = False, seqs: int = 64) -> TrialRecord:
    return TrialRecord(
        number=number,
        name=f"s_t{number:03d}",
        params={"layout": layout, "max_num_seqs": seqs, UTIL: util},
        state="infeasible" if oom else "complete",
        fidelity="start" if oom else "full",
        values=None if oom else [100.0],
        launches=1,
        startup="out-of-memory" if oom else "",
    )


@pytest.mark.parametrize(
    ("trials", "expected"),
    [
        ([], {}),
        # a start at 0.81, no start at 0.9: higher values of layout a are known not to start
        ([_launched(0, "a", 0.9, oom=True), _launched(1, "a", 0.81)], {"a": Ceiling(0.81, 0.9, 0)}),
        # two out-of-memory starts: the lowest above the highest start is the ceiling
        (
            [_launched(0, "a", 0.9, oom=True), _launched(1, "a", 0.85, oom=True), _launched(2, "a", 0.81)],
            {"a": Ceiling(0.81, 0.85, 1)},
        ),
        # an out-of-memory start below one that started is not the ceiling (too little memory, not too much)
        ([_launched(0, "a", 0.81), _launched(1, "a", 0.72, oom=True)], {"a": Ceiling(0.81, None, None)}),
        # layouts are apart
        (
            [_launched(0, "a", 0.9, oom=True), _launched(1, "b", 0.9)],
            {"a": Ceiling(None, 0.9, 0), "b": Ceiling(0.9)},
        ),
    ],
)
def test_each_layouts_utilisation_ceiling_is_learnt_from_its_starts(
    trials: list[TrialRecord], expected: dict[str, Ceiling]
) -> None:
    assert ceilings(trials) == expected


@pytest.mark.parametrize(
    ("point", "refused"),
    [
        ({"layout": "a", UTIL: 0.9}, True),
        ({"layout": "a", UTIL: 0.95}, True),
        ({"layout": "a", UTIL: 0.81}, False),
        ({"layout": "b", UTIL: 0.9}, False),  # layout b has not been refused
    ],
)
def test_a_utilisation_its_layout_ran_out_of_memory_at_is_pruned_before_launch(
    point: dict[str, Any], refused: bool
) -> None:
    known = ceilings([_launched(0, "a", 0.9, oom=True), _launched(1, "a", 0.81)])
    why = memory_refusal(point, known)
    assert (why is not None) is refused
    if why is not None:
        assert "layout a did not start at gpu_memory_utilization=0.9 (out-of-memory, trial 0)" in why


@pytest.mark.parametrize(
    ("trials", "probe"),
    [
        # nothing known: layout a at the highest value
        ([], ("a", 0.9)),
        # a ran out of memory at 0.9: one step down
        ([_launched(0, "a", 0.9, oom=True)], ("a", 0.81)),
        # a started at 0.81 below its ceiling: known; b next
        ([_launched(0, "a", 0.9, oom=True), _launched(1, "a", 0.81)], ("b", 0.9)),
        # a started at its highest value: known at once
        ([_launched(0, "a", 0.9)], ("b", 0.9)),
        # every layout known: the sampler's turn
        ([_launched(0, "a", 0.9), _launched(1, "b", 0.9, oom=True), _launched(2, "b", 0.81)], None),
        # nothing of layout a starts: known too (every value is pruned)
        (
            [
                _launched(0, "a", 0.9, oom=True),
                _launched(1, "a", 0.81, oom=True),
                _launched(2, "a", 0.72, oom=True),
                _launched(3, "b", 0.9),
            ],
            None,
        ),
    ],
)
def test_the_highest_utilisation_that_starts_is_probed_once_per_layout_stepping_down(
    trials: list[TrialRecord], probe: tuple[str, float] | None
) -> None:
    got = next_probe(_space(), trials, CandidateConfig(name="b"))
    assert (None if got is None else (got["layout"], got[UTIL])) == probe


def test_a_utilisation_of_one_value_or_an_interval_is_not_probed() -> None:
    assert next_probe(_space(utils=(0.9,)), [], CandidateConfig(name="b")) is None


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ([], [("layout", "a"), ("layout", "b"), ("max_num_seqs", 32), ("max_num_seqs", 64)]),
        ([("a", 64)], [("layout", "b"), ("max_num_seqs", 32)]),
        ([("a", 64), ("b", 32)], []),
    ],
)
def test_the_values_no_trial_has_tried_yet(params: list[tuple[str, int]], expected: list[Any]) -> None:
    trials = [_launched(k, layout, 0.81, seqs=seqs) for k, (layout, seqs) in enumerate(params)]
    space = _space(utils=(0.81,))
    assert untried(space, trials) == expected
    assert fewest_launches(space) == 2


@pytest.mark.parametrize(
    ("untried_values", "expected"),
    [
        (0, "improvement stalled: 3 trials"),
        # a value of a list not tried yet: the stall waits (the loop asks it)
        (1, None),
    ],
)
def test_a_stall_waits_for_every_listed_value_to_be_tried(untried_values: int, expected: str | None) -> None:
    trials = [_full(k, 100.0) for k in range(4)]
    record = SearchRecord(
        name="s", objective="capacity", directions=["maximize"], space_size=9, trials=trials
    )
    record.launches = 4
    reason = stop_reason(record, SearchConfig(stall_trials=3), untried_values)
    assert reason == expected if expected is None else reason is not None and reason.startswith(expected)


def _run(
    tmp_path: Path, outcome: Any, *overrides: str, memory_check: MemoryCheck | None = None
) -> tuple[list[list[str]], SearchRecord, list[str]]:
    """A search of the demo's space on a fake launcher (``outcome(job)`` measures each job)."""
    cfg, _ = load(
        [
            "search=demo",
            "search.sampler=random",
            "search.pruner=none",
            "search.storage=sqlite:///:memory:",
            *overrides,
        ]
    )
    launched: list[list[str]] = []
    said: list[str] = []

    def one(job: list[str], ticket: TrialTicket | None) -> TrialOutcome:
        launched.append(job)
        return outcome(
            dict(o.removeprefix("candidate.").split("=", 1) for o in job if o.startswith("candidate."))
        )

    run = SearchRun(
        cfg,
        tmp_path,
        baseline_option="baseline",
        space=parse_space(cfg.search),  # type: ignore[arg-type]
        flag_check=None,
        launch_job=one,
        say=said.append,
        memory_check=memory_check,
    )
    run.run()
    record = read_search(tmp_path)
    assert record is not None
    return launched, record, said


def _oom_at_09(job: dict[str, str]) -> TrialOutcome:
    """The demo host: 0.9 of the memory never starts (no room for CUDA graphs outside vLLM's budget)."""
    if float(job[UTIL]) >= 0.9:
        return TrialOutcome(
            state="infeasible", fidelity="start", launches=1, startup="out-of-memory", why="oom"
        )
    value = 100.0 + float(job["max_num_seqs"]) / 10
    return TrialOutcome(state="complete", fidelity="full", values=[value], launches=1, gpus=8)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_utilisation_that_never_starts_costs_one_launch_per_layout(tmp_path: Path, seed: int) -> None:
    launched, record, _ = _run(
        tmp_path, _oom_at_09, "search.max_launches=32", "search.stall_trials=99", f"search.seed={seed}"
    )
    out_of_memory = [t for t in record.trials if t.startup == "out-of-memory"]
    assert len(out_of_memory) == 3 and len({t.params["layout"] for t in out_of_memory}) == 3
    # the probes came first: each layout at 0.9, then at 0.81, which started
    assert [(t.params["layout"], t.params[UTIL]) for t in record.trials[:6]] == [
        ("tp2_dp4", 0.9),
        ("tp2_dp4", 0.81),
        ("tp4_dp2", 0.9),
        ("tp4_dp2", 0.81),
        ("tp8_dp1", 0.9),
        ("tp8_dp1", 0.81),
    ]
    pruned = [t for t in record.trials if t.launches == 0 and t.params[UTIL] == 0.9]
    assert all("did not start at gpu_memory_utilization=0.9" in t.why for t in pruned)
    assert len(launched) == record.launches == 28  # 32 less 2 confirmations and their blocks kept


def test_a_stalled_search_has_tried_every_value_of_its_lists(tmp_path: Path) -> None:
    """Every point measures the same: the search stalls, but only once every listed value was tried."""

    def flat(_job: dict[str, str]) -> TrialOutcome:
        return TrialOutcome(state="complete", fidelity="full", values=[100.0], launches=1, gpus=8)

    _, record, _ = _run(
        tmp_path, flat, "search.max_launches=200", "search.stall_trials=2", "search.startup_trials=99"
    )
    assert record.stopped.startswith("improvement stalled")
    space = parse_space(load(["search=demo"])[0].search)  # type: ignore[arg-type]
    assert untried(space, record.trials) == []
    assert record.launches < 40  # the coverage asked the missing values; it did not sweep the space


@pytest.mark.parametrize(
    ("host", "util", "ep", "fits"),
    [
        ("host=h100x8", 0.81, True, True),  # the DeepSeek-like model's experts over all 8 GPUs
        ("host=h100x8", 0.81, False, False),  # each replica holds every expert: cannot fit
        ("host=h100x8", 0.2, True, False),  # a utilisation below the weights
        ("host=sim", 0.2, True, None),  # the simulator models its own memory: not estimated
    ],
)
def test_doctors_memory_fit_is_a_check_of_one_candidate(
    host: str, util: float, ep: bool, fits: bool | None
) -> None:
    cfg, _ = load([host])
    check, note = memory_fit_check(cfg, probes())
    if fits is None:
        assert check is None and note == ""
        return
    assert check is not None and note.startswith("memory fit: weights ~")
    cand = CandidateConfig(
        name="c",
        tensor_parallel_size=2,
        data_parallel_size=4,
        enable_expert_parallel=ep,
        gpu_memory_utilization=util,
    )
    why = check(cand)
    assert (why is None) is fits
    if why is not None:
        assert why.startswith("TP2 x DP4") and "cannot fit" in why


def test_a_point_the_memory_fit_says_cannot_fit_is_pruned_before_launch(tmp_path: Path) -> None:
    def too_small(cand: CandidateConfig) -> str | None:
        return "cannot fit: weights ~50 GiB > 57.3 GiB" if cand.gpu_memory_utilization < 0.8 else None

    ok = lambda job: TrialOutcome(state="complete", fidelity="full", values=[100.0], launches=1, gpus=8)  # noqa: E731
    launched, record, _ = _run(tmp_path, ok, "search.max_launches=12", memory_check=too_small)
    assert all(
        float(dict(o.split("=", 1) for o in job if "=" in o)["candidate.gpu_memory_utilization"]) >= 0.8
        for job in launched
    )
    told = [t for t in record.trials if t.params[UTIL] == 0.72]
    assert told and all(t.launches == 0 and t.state == "infeasible" and "cannot fit" in t.why for t in told)

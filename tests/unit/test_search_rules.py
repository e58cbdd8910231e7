"""The search's rules (orchestrator.search.rules, .lines, .study): when it stops, which trial is confirmed,
the winner's file, and what Optuna is told for each trial's outcome."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

from contracts.schema import CandidateConfig, SpeculativeConfig
from contracts.search import Dimension, SearchConfig, Space
from contracts.trials import SearchRecord, TrialRecord, Winner, read_search, write_search
from contracts.verdicts import DriftResult, SweepVerdict, Verdict
from orchestrator.config.space import parse_space
from orchestrator.search.confirm import NO_BETTER, confirmation_lines
from orchestrator.search.lines import opening_line
from orchestrator.search.point import candidate_at, changed_fields
from orchestrator.search.rules import best_trial, stop_reason, winner_yaml
from orchestrator.search.study import distributions, open_study


def _trial(number: int, value: float | None, *, state: str = "complete", launches: int = 1) -> TrialRecord:
    return TrialRecord(
        number=number,
        name=f"s_t{number:03d}",
        params={"max_num_seqs": number},
        state=state,  # type: ignore[arg-type]
        fidelity="full" if state == "complete" else "screen",
        values=None if value is None else [value],
        launches=launches,
    )


def _record(trials: list[TrialRecord], **kw: Any) -> SearchRecord:
    record = SearchRecord(
        name="s", objective="capacity", directions=["maximize"], space_size=10, trials=trials
    )
    record.launches = sum(t.launches for t in trials)
    for key, value in kw.items():
        setattr(record, key, value)
    return record


@pytest.mark.parametrize(
    ("values", "search", "expected"),
    [
        # budget in launches
        # budget in launches, less what the trials keep for the confirmations (search.confirm_top, 2)
        ([100, 110, 120], SearchConfig(max_launches=5), "budget spent: 3 of 5 launches (2 kept for the "),
        ([100, 110], SearchConfig(max_launches=5), None),
        ([100, 110], SearchConfig(max_launches=3, confirm_top=1), "budget spent: 2 of 3 launches (1 kept "),
        ([100, 110], SearchConfig(max_launches=4), "budget spent: 2 of 4 launches (2 kept for the "),
        # a search launches at least one trial: a budget of one keeps nothing for a confirmation
        ([100], SearchConfig(max_launches=1), "budget spent: 1 of 1 launches"),
        # stall: 3 launched trials in a row no better than 2% over the best
        ([100, 101, 99, 101.9], SearchConfig(stall_trials=3), "improvement stalled: 3 trials measured fully"),
        ([100, 101, 99, 102.1], SearchConfig(stall_trials=3), None),
        # pruned screens could not improve the best: they spend the budget, not the stall
        ([100, None, None, None], SearchConfig(stall_trials=3), None),
        ([100, None, 99, None, 101, None, 100], SearchConfig(stall_trials=3), "improvement stalled: 3"),
        # no completed trial yet: no stall (nothing to improve on)
        ([None, None, None, None], SearchConfig(stall_trials=3), None),
        # a Pareto search stops on its budget only
        ([100, 90, 80, 70], SearchConfig(stall_trials=2, pareto=True), None),
    ],
)
def test_the_search_stops_on_its_budget_or_when_improvement_stalls(
    values: list[float | None], search: SearchConfig, expected: str | None
) -> None:
    trials = [_trial(k, v, state="complete" if v is not None else "pruned") for k, v in enumerate(values)]
    reason = stop_reason(_record(trials), search)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and reason.startswith(expected)


def test_points_that_launched_nothing_do_not_spend_the_budget_nor_the_stall() -> None:
    trials = [_trial(0, 100), *[_trial(k, None, state="infeasible", launches=0) for k in range(1, 9)]]
    assert stop_reason(_record(trials), SearchConfig(max_launches=5, stall_trials=2)) is None


@pytest.mark.parametrize(
    ("dims", "search", "interleave", "expected"),
    [
        (
            (Dimension("max_num_seqs", (64, 128, 256)), Dimension("layout", ("a", "b"))),
            SearchConfig(name="demo", max_launches=48, stall_trials=6),
            False,
            "search demo over 6 configurations (budget: 48 launches, 2 of them kept for the confirmations "
            "(2 x 1: its finalist's launch); stalled after 6 trials measured fully",
        ),
        # each confirmation with the baseline's interleaved block after it: 2 launches each
        (
            (Dimension("max_num_seqs", (64, 128, 256)), Dimension("layout", ("a", "b"))),
            SearchConfig(name="demo", max_launches=48, stall_trials=6),
            True,
            "search demo over 6 configurations (budget: 48 launches, 4 of them kept for the confirmations "
            "(2 x 2: its finalist's launch, the baseline's interleaved block after it); ",
        ),
        (
            (Dimension("gpu_memory_utilization", low=0.6, high=0.8),),
            SearchConfig(name="wide", max_launches=10, max_gpu_hours=2.5),
            False,
            "search wide over a continuous space (budget: 10 launches, 2 of them kept for the confirmations "
            "(2 x 1: its finalist's launch) or 2.5 GPU-hours;",
        ),
    ],
)
def test_a_search_sweep_opens_with_its_space_and_budget(
    dims: tuple[Dimension, ...], search: SearchConfig, interleave: bool, expected: str
) -> None:
    line = opening_line(search, Space(dimensions=dims, layouts={}, fixed={}), interleave=interleave)
    assert line.startswith(expected), line
    assert "job(s)" not in line and line.endswith("its best points then confirmed against the baseline,")


def test_failed_starts_do_not_count_towards_the_stall() -> None:
    trials = [_trial(0, 100), *[_trial(k, None, state="infeasible") for k in range(1, 9)]]
    assert stop_reason(_record(trials), SearchConfig(max_launches=20, stall_trials=2)) is None


def test_gpu_hours_are_a_budget_too() -> None:
    record = _record([_trial(0, 100)], gpu_hours=2.5)
    over = stop_reason(record, SearchConfig(max_gpu_hours=2.0))  # an overrun says why (a trial's time)
    assert over == (
        "budget spent: 2.5 of 2 GPU-hours; 0.5 over: a trial's time is known only once it has run, "
        "and each was started where the costliest before it would fit"
    )
    assert stop_reason(record, SearchConfig(max_gpu_hours=3.0)) is None


@pytest.mark.parametrize(
    ("trials", "pareto", "best"),
    [
        ([_trial(0, 100), _trial(1, 150), _trial(2, 120)], [], 1),
        # a pruned trial's screen estimate is never the winner, however high
        ([_trial(0, 100), _trial(1, 500, state="pruned"), _trial(2, 120)], [], 2),
        # nothing measured fully: nothing to confirm
        ([_trial(0, 100, state="pruned"), _trial(1, None, state="infeasible")], [], None),
        # on a Pareto front, the highest capacity of the front
        ([_trial(0, 100), _trial(1, 150), _trial(2, 120)], [0, 2], 2),
        # a tie goes to the point that changes fewest of the baseline's settings (here: trial number mod 3)
        ([_trial(4, 189), _trial(3, 181), _trial(5, 189), _trial(6, 189)], [], 6),
        # then to the earliest trial
        ([_trial(3, 189), _trial(6, 189)], [], 3),
        # never over a higher estimate
        ([_trial(3, 189), _trial(4, 190)], [], 4),
    ],
)
def test_the_trial_confirmed_is_the_best_fully_measured_one(
    trials: list[TrialRecord], pareto: list[int], best: int | None
) -> None:
    found = best_trial(_record(trials, pareto=pareto), lambda t: t.number % 3)
    assert (found.number if found is not None else None) == best


@pytest.mark.parametrize(
    ("point", "changed"),
    [
        # the demo's tie: the same capacity estimate with the baseline's budget or a quarter of it
        (
            {"max_num_batched_tokens": 16384, "speculative.num_speculative_tokens": 3},
            ["speculative.num_speculative_tokens"],
        ),
        (
            {"max_num_batched_tokens": 4096, "speculative.num_speculative_tokens": 3},
            ["max_num_batched_tokens", "speculative.num_speculative_tokens"],
        ),
        # a layout expands to its fields; the baseline's own layout changes nothing
        ({"layout": "tp2_dp4"}, []),
        ({"layout": "tp4_dp2"}, ["data_parallel_size", "tensor_parallel_size"]),
        # a setting the baseline leaves to vLLM's default counts as changed when the point sets it
        ({"max_num_seqs": 256}, ["max_num_seqs"]),
    ],
)
def test_changed_fields_counts_what_a_point_changes_from_the_baseline(
    point: dict[str, Any], changed: list[str]
) -> None:
    base = CandidateConfig(
        name="baseline",
        tensor_parallel_size=2,
        data_parallel_size=4,
        max_num_batched_tokens=16384,
        speculative=SpeculativeConfig(method="dspark", num_speculative_tokens=7),
    )
    layouts = {
        "tp2_dp4": {"tensor_parallel_size": 2, "data_parallel_size": 4},
        "tp4_dp2": {"tensor_parallel_size": 4, "data_parallel_size": 2},
    }
    assert changed_fields(base, candidate_at(base, point, layouts, "t")) == changed


def test_the_winner_is_a_candidate_file_on_the_baselines() -> None:
    trial = TrialRecord(
        number=7,
        name="demo_t007",
        params={"layout": "tp4_dp2", "max_num_seqs": 256, "speculative.num_speculative_tokens": 3},
        state="complete",
        values=[152.0],
    )
    layouts = {"tp4_dp2": {"tensor_parallel_size": 4, "data_parallel_size": 2}}
    base = CandidateConfig(
        name="baseline", speculative=SpeculativeConfig(method="dspark", num_speculative_tokens=7)
    )
    text = winner_yaml(SearchConfig(name="demo"), trial, "baseline", layouts, base)
    assert text.startswith("# The best point of search demo (trial 7; the search's estimate: 152)")
    assert yaml.safe_load(text) == {
        "defaults": ["baseline", "_self_"],
        "name": "demo_t007",
        "description": "search demo, trial 7",
        "tensor_parallel_size": 4,
        "data_parallel_size": 2,
        "max_num_seqs": 256,
        "speculative": {"num_speculative_tokens": 3},
    }


def test_a_resumed_study_keeps_its_trials_and_fails_the_one_a_crash_left_running(tmp_path: Path) -> None:
    search = SearchConfig(name="s", space={"max_num_seqs": "choice(1,2,3)"}, seed=1)
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    dists = distributions(parse_space(search))
    study, left = open_study(search, storage)
    assert left == []
    done = study.ask(dists)
    study.tell(done, [5.0])
    study.ask(dists)  # the crash: never told
    again, left = open_study(search, storage)
    assert [t.number for t in left] == [1]
    states = [t.state for t in again.get_trials(deepcopy=False)]
    assert states == [optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL]
    assert again.best_value == 5.0


def _verdicts(decision: str | None) -> SweepVerdict:
    found = [] if decision is None else [Verdict(candidate="s_t000", decision=decision, reason="r")]  # type: ignore[arg-type]
    retained = "s_t000" if decision == "keep" else "b"  # the gates retain their one KEEP
    return SweepVerdict(
        baseline="b",
        retained=retained,
        retained_reason="",
        drift=DriftResult.model_construct(),
        verdicts=found,
    )


@pytest.mark.parametrize(
    ("decision", "line"),
    [
        ("keep", "search: recommend s_t000: KEEP (search's estimate 100; search/winner.yaml)"),
        ("reject", f"{NO_BETTER}: confirmed s_t000 REJECT (r); the baseline stays"),
        ("neutral", f"{NO_BETTER}: confirmed s_t000 NEUTRAL (r); the baseline stays"),  # issue 42
        ("inconclusive", f"{NO_BETTER}: confirmed s_t000 INCONCLUSIVE (r); the baseline stays"),
        ("incomplete", f"{NO_BETTER}: confirmed s_t000 INCOMPLETE (r); the baseline stays"),
        # no verdict: its confirmation was not measured, which is not "confirmed"
        (
            None,
            f"{NO_BETTER}: s_t000 not measured (INCOMPLETE: the confirmation was not measured); the "
            "baseline stays",
        ),
    ],
)
def test_the_winners_line_is_the_confirmations_verdict_and_only_a_keep_is_recommended(
    tmp_path: Path, decision: str | None, line: str
) -> None:
    assert confirmation_lines(tmp_path, _verdicts(decision)) == []  # no search: no line
    record = _record([_trial(0, 100)])
    write_search(tmp_path, record)
    # no finalist: the honest answer (the baseline stays); s_t000 was measured fully and broke nothing,
    # so the line says it was not confirmed (before: "no point was measured fully and met every
    # constraint", a false line)
    assert confirmation_lines(tmp_path, _verdicts(decision)) == [
        f"{NO_BETTER}: 1 point(s) measured fully and met every constraint (best s_t000, estimate 100), "
        "none confirmed: the budget held no confirmation (search.max_launches); the baseline stays"
    ]
    record.best_is_baseline = True  # the baseline's configuration is the best found: said, nothing more
    write_search(tmp_path, record)
    assert confirmation_lines(tmp_path, _verdicts(decision)) == []
    record.best_is_baseline = False
    record.winner = Winner(
        name="s_t000", trial=0, params={}, estimate=[100.0], yaml_file="search/winner.yaml"
    )
    write_search(tmp_path, record)
    got = confirmation_lines(tmp_path, _verdicts(decision))
    label = (decision or "incomplete").upper()
    said = "confirmed" if decision is not None else "not confirmed"  # no verdict: never measured
    assert got[0].startswith(f"search: {said} s_t000 (1 of 1): {label} (search's estimate 100")
    assert got[1] == line  # the one finalist's verdict decides: only a KEEP is recommended
    confirmation = read_search(tmp_path).confirmation  # type: ignore[union-attr]
    assert confirmation is not None and confirmation.decision == (decision or "incomplete")

"""The search's finalists, their confirmation and the honest answer (orchestrator.search.confirm): the top-k
distinct feasible points, the best confirmed KEEP, and the trade-off when none is better."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contracts.schema import GatesConfig
from contracts.trials import Confirmation, SearchRecord, TrialRecord, Winner, read_search, write_search
from contracts.verdicts import DriftResult, SweepVerdict, Verdict
from orchestrator.ledger.journal import JournalState
from orchestrator.recovery import recommend
from orchestrator.search.confirm import (
    NO_BETTER,
    confirmation_lines,
    finalists,
    recommended,
    relax_advice,
    tradeoff,
)
from report.search_tradeoff import tradeoff_section

pytestmark = pytest.mark.unit

GATES = GatesConfig(latency_tolerance=0.05, throughput_tolerance=0.05)


def _trial(
    number: int,
    value: float | None,
    *,
    seqs: int | None = None,
    state: str = "complete",
    broken: dict[str, float] | None = None,
    screen: float | None = None,
    **kw: Any,
) -> TrialRecord:
    return TrialRecord(
        number=number,
        name=f"s_t{number:03d}",
        params={"max_num_seqs": seqs if seqs is not None else number},
        state=state,  # type: ignore[arg-type]
        fidelity="full" if value is not None else "screen",
        values=None if value is None else [value],
        screen=screen,
        constraints=broken or {"serial latency": -0.01},
        launches=1,
        **kw,
    )


def _record(trials: list[TrialRecord], baseline: float | None = 168.0) -> SearchRecord:
    return SearchRecord(
        name="s",
        objective="capacity",
        directions=["maximize"],
        space_size=10,
        trials=trials,
        baseline=baseline,
    )


@pytest.mark.parametrize(
    ("trials", "k", "expected"),
    [
        # the two best, best first
        ([_trial(1, 150), _trial(2, 190), _trial(3, 180)], 2, ["s_t002", "s_t003"]),
        ([_trial(1, 150), _trial(2, 190), _trial(3, 180)], 1, ["s_t002"]),
        # a point whose screen broke a constraint is never a finalist, whatever its estimate
        (
            [
                _trial(1, 150),
                _trial(2, None, state="infeasible", screen=216, broken={"serial latency": 0.14}),
            ],
            2,
            ["s_t001"],
        ),
        # distinct points: a repeat of the best point (a second trial at the same point) is not the runner-up
        (
            [_trial(1, 190, seqs=64), _trial(2, 185, seqs=64), _trial(3, 170, seqs=32)],
            2,
            ["s_t001", "s_t003"],
        ),
        # the baseline's own point, pruned and failed trials are never confirmed; a point the search
        # ranked below the baseline's own configuration is not worth a confirmation either, so a best
        # baseline leaves none (said: "your current configuration is the best found")
        (
            [_trial(0, 200, baseline=True), _trial(1, None, state="pruned", screen=300), _trial(2, 120)],
            2,
            [],
        ),
        (
            [_trial(0, 200, baseline=True), _trial(1, 210), _trial(2, 190), _trial(3, 230)],
            None,
            ["s_t003", "s_t001"],
        ),
        ([], 2, []),
        # a runner-up hedges the first finalist's risk: the best point clear of the requirement the first
        # was left at the limit of (size 0: beyond or at it, within noise) comes before an equal risk
        (
            [
                _trial(1, 181, broken={"prefill_10k TTFT": 0.0, "serial TTFT": -0.05}),
                _trial(2, 181, broken={"prefill_10k TTFT": 0.0, "serial TTFT": -0.08}),
                _trial(3, 173, broken={"prefill_10k TTFT": -0.011, "serial TTFT": 0.0}),
            ],
            None,
            ["s_t001", "s_t003", "s_t002"],
        ),
        # a limit of another requirement is no shared risk; none failing shows as 0 and is none
        (
            [
                _trial(1, 181, broken={"prefill_10k TTFT": 0.0, "decode_heavy failed requests": 0.0}),
                _trial(2, 180, broken={"serial TTFT": 0.0, "decode_heavy failed requests": 0.0}),
                _trial(3, 173, broken={"prefill_10k TTFT": -0.02}),
            ],
            2,
            ["s_t001", "s_t002"],
        ),
        # no clear point beats the baseline's own configuration: the next at the same limit, not the baseline
        (
            [
                _trial(0, 170, baseline=True, broken={"prefill_10k TTFT": -0.03}),
                _trial(1, 181, broken={"prefill_10k TTFT": 0.0}),
                _trial(2, 180, broken={"prefill_10k TTFT": 0.0}),
                _trial(3, 150, broken={"prefill_10k TTFT": -0.03}),
            ],
            2,
            ["s_t001", "s_t002"],
        ),
    ],
)
def test_finalists_are_the_best_distinct_feasible_points(
    trials: list[TrialRecord], k: int | None, expected: list[str]
) -> None:
    assert [t.name for t in finalists(_record(trials), k)] == expected


@pytest.mark.parametrize(
    ("hedge", "min_gain", "expected"),
    [
        (173.0, 0.05, ["s_t001", "s_t003"]),  # 173 > 152 x 1.05: the hedge can win, it comes next
        (159.0, 0.0, ["s_t001", "s_t003"]),
        # the demo's k = 7 8K point on its 152 baseline: 159 is 1.046x, no gain the capacity gate keeps
        # (min_gain 5%): the runner-up is the next best at the same limit, a point that can win
        (159.0, 0.05, ["s_t001", "s_t002"]),
    ],
)
def test_a_hedging_runner_up_must_be_able_to_win(hedge: float, min_gain: float, expected: list[str]) -> None:
    trials = [
        _trial(1, 181, broken={"serial latency": 0.0}),
        _trial(2, 177, broken={"serial latency": 0.0}),
        _trial(3, hedge, broken={"serial latency": -0.02, "prefill_10k TTFT": 0.0}),
    ]
    assert [t.name for t in finalists(_record(trials, baseline=152.0), 2, min_gain=min_gain)] == expected


_AT_TWO = {"serial latency": 0.0, "prefill_10k TTFT": 0.0}
_AT_ONE = {"serial latency": 0.0, "prefill_10k TTFT": -0.02}


@pytest.mark.parametrize(
    ("trials", "min_gain", "expected"),
    [
        # 181 and 173 are one capacity level apart, no 5% gain over each other (the gates' min_gain): the
        # points its screen left at one limit go before the one it left at two
        (
            [_trial(1, 181, broken=_AT_TWO), _trial(2, 173, broken=_AT_ONE), _trial(3, 173, broken=_AT_ONE)],
            0.05,
            ["s_t002", "s_t003"],
        ),
        # told apart (no least gain): the best estimate first
        (
            [_trial(1, 181, broken=_AT_TWO), _trial(2, 173, broken=_AT_ONE), _trial(3, 173, broken=_AT_ONE)],
            0.0,
            ["s_t001", "s_t002"],
        ),
        # beyond the least gain: the best estimate first, whatever its limits
        ([_trial(1, 200, broken=_AT_TWO), _trial(2, 173, broken=_AT_ONE)], 0.05, ["s_t001", "s_t002"]),
        # make demo-search at 12583bf: every point at two limits (the 16K ones at serial TTFT's by noise),
        # and no 16K point clear of the first finalist's: the runner-up shares the fewest of its limits
        (
            [
                _trial(1, 181, broken=_AT_TWO),
                _trial(2, 181, broken=_AT_TWO),
                _trial(3, 173, broken={"serial latency": 0.0, "serial TTFT": 0.0, "prefill_10k TTFT": -0.05}),
            ],
            0.05,
            ["s_t001", "s_t003"],
        ),
        # the baseline's own point within the least gain is never the one picked, and still ends the list
        (
            [_trial(0, 178, baseline=True, broken={}), _trial(1, 181, broken=_AT_TWO), _trial(2, 120)],
            0.05,
            ["s_t001"],
        ),
    ],
)
def test_capacities_within_the_least_gain_go_to_the_point_at_fewer_limits(
    trials: list[TrialRecord], min_gain: float, expected: list[str]
) -> None:
    chosen = finalists(_record(trials, baseline=168.0), 2, min_gain=min_gain)
    assert [t.name for t in chosen] == expected


@pytest.mark.parametrize(
    ("decisions", "retained", "expected"),
    [
        (["keep", "reject"], "a", "a"),
        # the runner-up answers when the first is refused or undecided
        (["reject", "keep"], "b", "b"),
        (["inconclusive", "keep"], "b", "b"),
        (["incomplete", "keep"], "b", "b"),
        # two KEEPs: the one the gates retain (their best under load), which promote and run.promote_keep
        # adopt; before, the search recommended b, the higher confirmed capacity (180 against 195 below),
        # while promote adopted a
        (["keep", "keep"], "a", "a"),
        (["keep", "keep"], "b", "b"),
        # no KEEP: no recommendation
        (["reject", "inconclusive"], "base", None),
        (["neutral", "reject"], "base", None),
    ],
)
def test_the_recommendation_is_the_keep_promote_adopts(
    tmp_path: Path, decisions: list[str], retained: str, expected: str | None
) -> None:
    record = _record([])
    record.finalists = [
        Winner(name=n, trial=i, params={}, estimate=[1.0], yaml_file="x") for i, n in enumerate("ab")
    ]
    record.confirmations = [
        Confirmation(decision=d, name=n, capacity=c)
        for n, d, c in zip("ab", decisions, [180, 195], strict=True)
    ]
    verdicts = _verdicts(dict(zip("ab", decisions, strict=True)))
    verdicts = verdicts.model_copy(update={"baseline": "base", "retained": retained})
    promoted = recommend.recommended(verdicts, JournalState())  # what promote and status name
    assert recommended(record, verdicts.retained) == expected
    assert (promoted.name if promoted is not None else None) == expected
    # the report says the same
    lines = tradeoff_section(record, verdicts).splitlines()
    said = f"Recommended: **{expected}** (KEEP)." if expected else "No configuration beats the baseline"
    assert any(line.startswith(said) for line in lines), lines


@pytest.mark.parametrize(
    ("broken", "expected"),
    [
        # 14.4% beyond a 1.05 limit: the tolerance that admits it is 1.05 x 1.144 - 1
        ({"serial latency": 0.144}, ["serial latency: gates.latency_tolerance 0.20 (now 0.05)"]),
        (
            {"prefill_10k tokens/s": 0.1875},
            ["prefill_10k tokens/s: gates.throughput_tolerance 0.20 (now 0.05)"],
        ),
        (
            {"prefill_10k failed requests": 0.25},
            ["prefill_10k failed requests: requests failed; no setting admits it (the stability gate)"],
        ),
    ],
)
def test_what_to_relax_to_take_the_best_estimate(broken: dict[str, float], expected: list[str]) -> None:
    assert relax_advice(broken, GATES) == expected


@pytest.mark.parametrize(
    ("trials", "best", "feasible", "gain"),
    [
        # the demo's shape: the best estimate breaks serial latency; the best feasible point 1.15x
        (
            [
                _trial(1, None, state="infeasible", screen=216, broken={"serial latency": 0.144}),
                _trial(2, 193),
                _trial(3, None, state="infeasible", screen=200, broken={"prefill_10k TTFT": 0.03}),
            ],
            ("s_t001", 216.0, {"serial latency": 0.144}),
            "s_t002",
            1.149,
        ),
        # the feasible point is the best estimate: no trade-off to describe
        (
            [_trial(1, None, state="infeasible", screen=150, broken={"serial TTFT": 0.2}), _trial(2, 193)],
            (None, None, {}),
            "s_t002",
            1.149,
        ),
        # nothing met every constraint
        (
            [_trial(1, None, state="infeasible", screen=150, broken={"serial TTFT": 0.2})],
            ("s_t001", 150.0, {"serial TTFT": 0.2}),
            None,
            None,
        ),
    ],
)
def test_the_tradeoff_found(
    trials: list[TrialRecord],
    best: tuple[str | None, float | None, dict[str, float]],
    feasible: str | None,
    gain: float | None,
) -> None:
    record = _record(trials)
    trade = tradeoff(record, finalists(record, 2), GATES, maximize=True)
    assert (trade.best_name, trade.best_estimate, trade.best_broken) == best
    assert trade.feasible_name == feasible
    assert (round(trade.feasible_gain, 3) if trade.feasible_gain else None) == gain
    assert bool(trade.relax) is (best[0] is not None)


def _verdicts(decisions: dict[str, str]) -> SweepVerdict:
    found = [Verdict(candidate=n, decision=d, reason=f"{d} because") for n, d in decisions.items()]  # type: ignore[arg-type]
    retained = next((n for n, d in decisions.items() if d == "keep"), "b")  # the gates' one KEEP
    return SweepVerdict(
        baseline="b",
        retained=retained,
        retained_reason="",
        drift=DriftResult.model_construct(),
        verdicts=found,
    )


@pytest.mark.parametrize(
    ("decisions", "last"),
    [
        ({"s_t002": "keep", "s_t003": "reject"}, ["search: recommend s_t002: KEEP (search's estimate 193; "]),
        # the runner-up after a REJECT of the first
        ({"s_t002": "reject", "s_t003": "keep"}, ["search: recommend s_t003: KEEP (search's estimate 180; "]),
        ({"s_t002": "inconclusive", "s_t003": "keep"}, ["search: recommend s_t003: KEEP"]),
        # none is a KEEP: the honest answer and the trade-off, in that order
        (
            {"s_t002": "reject", "s_t003": "inconclusive"},
            [
                f"{NO_BETTER}: confirmed s_t002 REJECT (reject because), s_t003 INCONCLUSIVE (inconclusive "
                "because); the baseline stays",
                "search: best estimate s_t001 (216 at its screen) breaks serial latency +14.4% beyond its "
                "limit",
                "search: to take s_t001, relax serial latency: gates.latency_tolerance 0.20 (now 0.05)",
                "search: best point that met every constraint: s_t002 (estimate 193, 1.15x the baseline's; "
                "confirmed REJECT)",
            ],
        ),
        # a confirmation that was not measured is no KEEP either
        (
            {"s_t003": "reject"},
            [
                f"{NO_BETTER}: confirmed s_t003 REJECT (reject because); s_t002 not measured (INCOMPLETE: "
                "the confirmation was not measured); the baseline stays"
            ],
        ),
    ],
)
def test_the_last_lines_recommend_a_keep_or_say_none_is_better(
    tmp_path: Path, decisions: dict[str, str], last: list[str]
) -> None:
    trials = [
        _trial(1, None, state="infeasible", screen=216, broken={"serial latency": 0.144}),
        _trial(2, 193),
        _trial(3, 180),
    ]
    record = _record(trials)
    chosen = finalists(record, 2)
    record.finalists = [
        Winner(
            name=t.name,
            trial=t.number,
            params=t.params,
            estimate=t.values or [],
            yaml_file=f"search/{t.name}.yaml",
        )
        for t in chosen
    ]
    record.winner = record.finalists[0]
    record.tradeoff = tradeoff(record, chosen, GATES, maximize=True)
    write_search(tmp_path, record)
    lines = confirmation_lines(tmp_path, _verdicts(decisions))
    measured = "confirmed" if "s_t002" in decisions else "not confirmed"  # no verdict: not measured
    assert lines[0].startswith(f"search: {measured} s_t002 (1 of 2): ")
    assert lines[1].startswith("search: confirmed s_t003 (2 of 2): ")
    tail = lines[2 : 2 + len(last)]
    assert [got[: len(want)] for got, want in zip(tail, last, strict=True)] == last
    stored = read_search(tmp_path)
    assert stored is not None and [c.name for c in stored.confirmations] == ["s_t002", "s_t003"]
    keep = next((n for n in ("s_t002", "s_t003") if decisions.get(n) == "keep"), None)
    assert stored.recommended == keep


def test_no_search_no_lines_and_nothing_confirmed_is_the_honest_answer(tmp_path: Path) -> None:
    assert confirmation_lines(tmp_path, _verdicts({})) == []
    record = _record([_trial(1, None, state="infeasible", screen=216, broken={"serial latency": 0.144})])
    record.tradeoff = tradeoff(record, [], GATES, maximize=True)
    write_search(tmp_path, record)
    lines = confirmation_lines(tmp_path, _verdicts({}))
    assert (
        lines[0] == f"{NO_BETTER}: no point was measured fully and met every constraint; the baseline stays"
    )
    assert lines[-1] == "search: no point measured fully met every constraint"


@pytest.mark.parametrize(
    ("decisions", "expected"),
    [
        (
            {"s_t002": "reject", "s_t003": "keep"},
            ["| s_t002 | 193 | REJECT |", "| s_t003 | 180 | KEEP |", "Recommended: **s_t003** (KEEP)."],
        ),
        (
            {"s_t002": "reject"},
            [
                "| s_t003 | 180 | not measured |",
                "No configuration beats the baseline on every profile: the baseline stays.",
                "The best estimate, s_t001 (216 at its screen), breaks serial latency +14.4% beyond the "
                "gates' "
                "limits; to take it, relax serial latency: gates.latency_tolerance 0.20 (now 0.05).",
                "The best point that met every constraint: s_t002 (estimate 193, 1.15x the baseline's).",
            ],
        ),
    ],
)
def test_the_reports_tradeoff_section(decisions: dict[str, str], expected: list[str]) -> None:
    assert tradeoff_section(None, _verdicts(decisions)) == ""
    trials = [
        _trial(1, None, state="infeasible", screen=216, broken={"serial latency": 0.144}),
        _trial(2, 193),
        _trial(3, 180),
    ]
    record = _record(trials)
    chosen = finalists(record, 2)
    record.finalists = [
        Winner(name=t.name, trial=t.number, params={}, estimate=t.values or [], yaml_file="x") for t in chosen
    ]
    record.tradeoff = tradeoff(record, chosen, GATES, maximize=True)
    lines = tradeoff_section(record, _verdicts(decisions)).splitlines()
    for want in expected:
        assert want in lines, (want, lines)


@pytest.mark.parametrize(
    ("objective", "gain"), [("capacity", 1.149), ("goodput", None), ("usd_per_mtok_at_slo", None)]
)
def test_the_gain_is_a_ratio_to_the_baselines_capacity_only_for_capacity(
    objective: str, gain: float | None
) -> None:
    record = _record([_trial(2, 193)])
    record.objective = objective
    trade = tradeoff(record, finalists(record, 1), GATES, maximize=True)
    assert (round(trade.feasible_gain, 3) if trade.feasible_gain else None) == gain


@pytest.mark.parametrize(
    ("trials", "confirmed", "decisions", "line"),
    [
        # no point met every constraint and was measured fully
        (
            [_trial(1, None, state="infeasible", screen=216, broken={"serial latency": 0.144})],
            [],
            {},
            f"{NO_BETTER}: no point was measured fully and met every constraint; the baseline stays",
        ),
        # two did, and the budget confirmed neither (before: "no point was measured fully and met every
        # constraint", false)
        (
            [_trial(2, 193), _trial(3, 180)],
            [],
            {},
            f"{NO_BETTER}: 2 point(s) measured fully and met every constraint (best s_t002, estimate 193), "
            "none confirmed: the budget held no confirmation (search.max_launches); the baseline stays",
        ),
        # confirmed and not kept: which verdict and why; the feasible point left unconfirmed is said
        (
            [_trial(2, 193), _trial(3, 180)],
            ["s_t002"],
            {"s_t002": "reject"},
            f"{NO_BETTER}: confirmed s_t002 REJECT (reject because); 1 more measured fully and met every "
            "constraint, not confirmed: s_t003; the baseline stays",
        ),
        (
            [_trial(2, 193)],
            ["s_t002"],
            {"s_t002": "inconclusive"},
            f"{NO_BETTER}: confirmed s_t002 INCONCLUSIVE (inconclusive because); the baseline stays",
        ),
        (
            [_trial(2, 193)],
            ["s_t002"],
            {"s_t002": "incomplete"},
            f"{NO_BETTER}: confirmed s_t002 INCOMPLETE (incomplete because); the baseline stays",
        ),
        # a confirmation with no verdict was not measured: not "confirmed"
        (
            [_trial(2, 193)],
            ["s_t002"],
            {},
            f"{NO_BETTER}: s_t002 not measured (INCOMPLETE: the confirmation was not measured); the "
            "baseline stays",
        ),
        (
            [_trial(2, 193), _trial(3, 180)],
            ["s_t002"],
            {"s_t002": "keep"},
            "search: recommend s_t002: KEEP (search's estimate 193; search/s_t002.yaml)",
        ),
    ],
)
def test_the_honest_answer_is_true_in_each_case(
    tmp_path: Path, trials: list[TrialRecord], confirmed: list[str], decisions: dict[str, str], line: str
) -> None:
    record = _record(trials)
    record.finalists = [
        Winner(
            name=t.name,
            trial=t.number,
            params=t.params,
            estimate=t.values or [],
            yaml_file=f"search/{t.name}.yaml",
        )
        for t in trials
        if t.name in confirmed
    ]
    record.winner = record.finalists[0] if record.finalists else None
    write_search(tmp_path, record)
    lines = confirmation_lines(tmp_path, _verdicts(decisions))
    assert lines[len(confirmed)] == line

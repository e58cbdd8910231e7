"""Confirmations inside the search's budget (issue 43 item 2, :meth:`orchestrator.search.loop.SearchRun.
confirm`): the trials leave ``search.confirm_top`` launches of ``search.max_launches`` for them; the best
``confirm_top`` distinct feasible points are confirmed together, then, while the gates KEEP none, the
runner-up, one at a time, while the budget lasts; each confirmation is charged to the budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.layout import SweepPaths
from contracts.trials import read_search
from orchestrator.config.space import parse_space
from orchestrator.measure.trial import TrialOutcome
from orchestrator.search.loop import SearchRun
from orchestrator.search.nodes import NodeBaselines
from orchestrator.search.study import TrialTicket
from tests.unit.composed import load

pytestmark = pytest.mark.unit


def _name(overrides: list[str]) -> str:
    return next(o.split("=", 1)[1] for o in overrides if o.startswith("candidate.name="))


def _seqs(overrides: list[str]) -> int:
    return int(next(o.split("=", 1)[1] for o in overrides if o.startswith("candidate.max_num_seqs=")))


@pytest.mark.parametrize(
    ("budget", "top", "keeps", "expected"),  # expected: trials launched, confirmed, judged
    [
        # 8 launches, 2 kept: 6 trials, the best two confirmed together; one KEEP, nothing more
        (8, 2, {1}, (6, 2, 0)),
        # no KEEP among the two: the budget is spent (8 of 8), no runner-up
        (8, 2, set(), (6, 2, 0)),
        # confirm_top 1 on a budget the trials stopped short of (the space exhausted): the first, refused,
        # then the
        # runner-up, a KEEP: the third is not confirmed
        (8, 1, {2}, (4, 2, 2)),
        # confirm_top 1, nothing KEEPs: runner-ups one at a time until the budget is spent
        (8, 1, set(), (4, 4, 3)),
        # a first KEEP ends the confirmations at once
        (8, 1, {1}, (4, 1, 1)),
        # a budget of one launch keeps none: the trial is launched, nothing is confirmed
        (1, 2, {1}, (1, 0, 0)),
    ],
)
def test_confirmations_spend_the_budget_and_a_runner_up_follows_no_keep(
    tmp_path: Path, budget: int, top: int, keeps: set[int], expected: tuple[int, int, int]
) -> None:
    trials, confirmed, judged = expected
    # the confirm_top 1 rows: a space of 4 points (max_num_seqs only), exhausted after 4 trials
    small = ["search.space.max_num_batched_tokens=8192"] if top == 1 and budget == 8 else []
    cfg, _ = load(
        [
            "search=demo",
            "search.sampler=random",
            "search.pruner=none",
            "search.storage=sqlite:///:memory:",
            f"search.max_launches={budget}",
            f"search.confirm_top={top}",
            "search.stall_trials=99",
            "search.space.layout=tp8_dp1",
            "search.space.gpu_memory_utilization=0.81",
            "search.space.speculative.num_speculative_tokens=3",
            *small,
            "host.time_scale=1",
            "run.interleave=false",  # one launch per confirmation; its block: the test below
        ]
    )
    assert cfg.search is not None
    jobs: list[str] = []
    ranks: dict[str, int] = {}

    def launch_job(overrides: list[str], ticket: TrialTicket | None) -> TrialOutcome | str:
        name = _name(overrides)
        jobs.append(name)
        if ticket is None:  # a confirmation: an ordinary candidate's job
            return name
        value = float(_seqs(overrides) + int(name.rsplit("_t", 1)[1]))  # distinct estimates
        return TrialOutcome(state="complete", fidelity="full", values=[value], launches=1, gpus=8)

    asked: list[list[str]] = []

    def verdicts(names: list[str]) -> dict[str, str]:
        asked.append(list(names))
        return {n: "keep" if ranks[n] in keeps else "reject" for n in names}

    lines: list[str] = []
    run = SearchRun(
        cfg,
        tmp_path,
        baseline_option="baseline",
        space=parse_space(cfg.search),
        flag_check=None,
        launch_job=launch_job,
        say=lines.append,
        clock=lambda: 0.0,
    )
    queue = run.run()
    ranks.update({t.name: i + 1 for i, t in enumerate(queue)})  # 1: the best estimate
    run.confirm(verdicts)
    record = read_search(tmp_path)
    assert record is not None
    launched_trials = [t for t in record.trials if t.launches]
    assert len(launched_trials) == trials, [t.name for t in record.trials]
    names = [w.name for w in record.finalists]
    assert names == [t.name for t in queue[:confirmed]]  # best estimate first
    assert jobs[trials:] == names  # each finalist launched as an ordinary candidate, in that order
    assert record.confirm_launches == confirmed and record.launches == trials + confirmed <= budget
    assert len(asked) == judged  # the gates asked after a round, while a runner-up could follow
    if confirmed:
        assert record.winner is not None and record.winner.name == names[0]
    runner_ups = [line for line in lines if "confirming the runner-up" in line]
    assert len(runner_ups) == max(0, confirmed - top)


@pytest.mark.parametrize(
    ("budget", "top", "nodes", "started", "expected"),  # expected: trials, confirmed, launches, confirm's
    [
        # the baseline's interleaved block after each confirmation (run.interleave) is a launch: 8
        # launches keep 2 x 2 for two confirmations, 4 trials (before: 6 trials, then 2 confirmations
        # and their 2 blocks, 10 launched and 8 recorded)
        (8, 2, None, True, (4, 2, 8, 4)),
        # a confirmation that did not start has no block: paid 2 before it started, charged the 1 it
        # launched; the 2 left pay for a runner-up
        (8, 2, None, False, (4, 3, 7, 3)),
        # confirm_top 1 with nodes not known here (SLURM): a trial and its node's baseline are 2, a
        # confirmation, its node's baseline and its block 3; 10 launches: 3 trials (6 of the 7 the
        # confirmation leaves), then one confirmation (9); no room for a runner-up's 3 (before: 4
        # trials, and a confirmation recorded as 1 launch)
        (10, 1, "slurm", True, (3, 1, 9, 3)),
    ],
)
def test_a_confirmations_block_and_node_baseline_are_paid_before_it_starts(  # noqa: PLR0917 (a table)
    tmp_path: Path,
    budget: int,
    top: int,
    nodes: str | None,
    started: bool,
    expected: tuple[int, int, int, int],
) -> None:
    trials, confirmed, launches, confirm_launches = expected
    cfg, _ = load(
        [
            "search=demo",
            "search.sampler=random",
            "search.pruner=none",
            "search.storage=sqlite:///:memory:",
            f"search.max_launches={budget}",
            f"search.confirm_top={top}",
            "search.stall_trials=99",
            "search.space.layout=tp8_dp1",
            "search.space.gpu_memory_utilization=0.81",
            "search.space.speculative.num_speculative_tokens=3",
            "host.time_scale=1",
        ]
    )
    assert cfg.search is not None and cfg.run.interleave
    paths = SweepPaths(tmp_path)
    base = f"{cfg.baseline.name}@node1" if nodes else cfg.baseline.name
    recorded: list[int] = []  # the confirmation launches on the record while each confirmation runs

    def launch_job(overrides: list[str], ticket: TrialTicket | None) -> TrialOutcome | str:
        name = _name(overrides)
        if ticket is None:  # a confirmation: its node's baseline, its launch, the block after it
            now = read_search(tmp_path)
            assert now is not None
            recorded.append(now.confirm_launches)
            if nodes:
                paths.candidate(base).root.mkdir(parents=True, exist_ok=True)
                paths.candidate(base).run_file.write_text("{}")
            if started:
                block = paths.candidate(base).block(name)
                block.root.mkdir(parents=True, exist_ok=True)
                block.run_file.write_text("{}")
            return name
        value = float(_seqs(overrides) + int(name.rsplit("_t", 1)[1]))
        outcome = TrialOutcome(state="complete", fidelity="full", values=[value], launches=1, gpus=8)
        outcome.baseline_launches = 1 if nodes else 0
        return outcome

    run = SearchRun(
        cfg,
        tmp_path,
        baseline_option="baseline",
        space=parse_space(cfg.search),
        flag_check=None,
        launch_job=launch_job,
        say=lambda _line: None,
        clock=lambda: 0.0,
        nodes=NodeBaselines(None, lambda: 0) if nodes else None,
    )
    run.run()
    run.confirm(lambda names: dict.fromkeys(names, "reject"))
    record = read_search(tmp_path)
    assert record is not None
    assert len([t for t in record.trials if t.launches]) == trials
    assert len(record.finalists) == confirmed
    assert (record.launches, record.confirm_launches) == (launches, confirm_launches)
    assert record.launches <= budget
    each = 3 if nodes else 2  # paid before it starts: on the record while it runs
    launched = confirm_launches // confirmed  # what each confirmation launched
    assert recorded == [launched * k + each for k in range(confirmed)]

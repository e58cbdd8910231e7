"""The search's budget (issue 43 item 8, orchestrator.search.budget): a trial pays its own share, so cheap
screens buy more points, and a parallel search's node baselines are counted."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from contracts.schema import GauntletConfig
from contracts.trials import read_search
from orchestrator.app.controller import jobs_run_elsewhere
from orchestrator.config.space import parse_space
from orchestrator.measure.trial import TrialOutcome
from orchestrator.plan import search_plan
from orchestrator.search.budget import Cost, trial_cost
from orchestrator.search.checks import search_problems
from orchestrator.search.lines import opening_line
from orchestrator.search.loop import SearchRun
from orchestrator.search.nodes import NodeBaselines, planned_nodes
from orchestrator.search.study import TrialTicket
from tests.unit.composed import load
from tests.unit.fakes import sim_probes

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("outcome", "wall", "time_scale", "expected"),
    [
        # a trial pruned at its screen after 90 s, in a batch that ran 360 s: 8 GPUs x 90 s
        (TrialOutcome(state="pruned", launches=1, gpus=8, seconds=90.0), 360.0, 1.0, Cost(1, 0.2)),
        (TrialOutcome(state="complete", launches=1, gpus=8, seconds=360.0), 360.0, 1.0, Cost(1, 0.8)),
        # a job that did not time itself pays the batch's wall time
        (TrialOutcome(state="failed", launches=1, gpus=8), 360.0, 1.0, Cost(1, 0.8)),
        # wall seconds scaled to host time (a simulator 20x faster than real time)
        (TrialOutcome(state="pruned", launches=1, gpus=4, seconds=9.0), 18.0, 20.0, Cost(1, 0.2)),
        # the node's baseline measured first for the trial: its launch and GPU-seconds, charged with it
        (
            TrialOutcome(
                state="pruned", launches=1, gpus=8, seconds=90.0, baseline_launches=1, baseline_gpu_s=720
            ),
            360.0,
            1.0,
            Cost(2, 0.4),
        ),
        # a point that never launched costs nothing
        (TrialOutcome(state="infeasible"), 0.0, 1.0, Cost(0, 0.0)),
    ],
)
def test_a_trial_pays_its_own_share(
    outcome: TrialOutcome, wall: float, time_scale: float, expected: Cost
) -> None:
    cost = trial_cost(outcome, wall, time_scale)
    assert (cost.launches, round(cost.gpu_hours, 6)) == (expected.launches, expected.gpu_hours)


def _search_run(
    cfg: GauntletConfig,
    folder: Path,
    batch: Callable[[list[tuple[list[str], TrialTicket]]], list[Any]],
    nodes: NodeBaselines | None,
) -> SearchRun:
    """A search whose trials are ``batch``'s fake jobs (one job: a batch of one), on a stopped clock."""
    return SearchRun(
        cfg,
        folder,
        baseline_option="baseline",
        space=parse_space(cfg.search),
        flag_check=None,
        launch_job=lambda o, t: batch([(o, t)])[0] if t is not None else None,
        say=lambda _: None,
        clock=lambda: 0.0,
        launch_batch=batch,
        nodes=nodes,
    )


def _name(overrides: list[str]) -> str:
    return next(o.split("=", 1)[1] for o in overrides if o.startswith("candidate.name="))


def _ticks(step: float) -> Iterator[float]:
    now = 0.0
    while True:
        yield now
        now += step


@pytest.mark.parametrize(
    ("pruned_s", "node_baselines", "trials", "launches"),
    [
        # each batch: one trial measured fully (100 s) beside one pruned at its screen (10 s); the budget
        # is three batches' own shares (8 GPUs x 110 s x 3). Each trial is paid before it starts, at the
        # costliest trial's 800 GPU-s so far: five trials (the sixth, which would have cost 80 GPU-s, is
        # not known to be cheap before it runs), not the three that charging each trial 800 GPU-s allows
        (10.0, False, 5, 5),
        # pruned after as long as the full one: three trials
        (100.0, False, 3, 3),
        # the first batch opened both nodes: two node baselines counted among the launches
        (10.0, True, 5, 7),
    ],
)
def test_cheap_screens_buy_more_points_and_node_baselines_count(
    tmp_path: Path, pruned_s: float, node_baselines: bool, trials: int, launches: int
) -> None:
    # three batches' own shares, plus the GPU-hours the trials keep for the two confirmations (the
    # costliest trial measured fully: 8 GPUs x 100 s each), which this test does not launch
    budget = 8 * 110 * 3 / 3600 + 2 * 8 * 100 / 3600
    fast = ["search.sampler=random", "search.pruner=none", "search.storage=sqlite:///:memory:"]
    cfg, _ = load(
        [
            "search=demo",
            *fast,
            "search.parallel=2",
            "search.max_launches=99",
            "search.stall_trials=99",
            f"search.max_gpu_hours={budget}",
            "host.time_scale=1",
        ]
    )
    assert cfg.search is not None
    batches = 0

    def batch(jobs: list[tuple[list[str], TrialTicket]]) -> list[Any]:
        nonlocal batches
        batches += 1
        out = []
        for k, (overrides, _) in enumerate(jobs):
            number = float(int(_name(overrides).rsplit("_t", 1)[1]))
            outcome = (
                TrialOutcome(
                    state="complete", fidelity="full", values=[number], launches=1, gpus=8, seconds=100
                )
                if k == 0
                else TrialOutcome(state="pruned", fidelity="screen", launches=1, gpus=8, seconds=pruned_s)
            )
            if node_baselines and batches == 1:
                outcome.baseline_launches, outcome.baseline_gpu_s = 1, 0.0
            out.append(outcome)
        return out

    ticks = _ticks(50.0)  # each clock read 100 s on: a batch (its start and end) ran 100 s
    run = SearchRun(
        cfg,
        tmp_path,
        baseline_option="baseline",
        space=parse_space(cfg.search),
        flag_check=None,
        launch_job=lambda o, t: batch([(o, t)] if t is not None else [])[0],  # a batch of one
        say=lambda _: None,
        clock=lambda: next(ticks) * 2,
        launch_batch=batch,
    )
    run.run()
    record = read_search(tmp_path)
    assert record is not None
    launched = [t for t in record.trials if t.launches]
    assert len(launched) == trials and record.launches == launches
    assert record.stopped.startswith("budget spent: ") and "GPU-hours" in record.stopped
    assert sum(t.baseline_launches for t in record.trials) == (2 if node_baselines else 0)


@pytest.mark.parametrize(
    ("nodes", "budget", "expected"),
    [
        # gauntlet_local, 2 simulated nodes, search.max_launches 1: a trial and its node's baseline are 2
        # launches; nothing starts (before: one trial started, and "budget spent: 2 of 1 launches")
        (
            2,
            (1, None),
            (0, 0, "budget spent: 0 of 1 launches: the next trial with its node's baseline needs 2"),
        ),
        # 2 launches for the trials (2 kept for the confirmation and the node baseline it may need while
        # no node's is recent): one trial with its node's baseline (before: a batch of two, each with its
        # node's baseline, 4 of 3)
        (2, (4, None), (1, 2, "budget spent: 2 of 4 launches (2 kept for the confirmations)")),
        # 5 for the trials: two with their nodes' baselines, then one on a node whose baseline is recent
        (2, (6, None), (3, 5, "budget spent: 5 of 6 launches (1 kept for the confirmations)")),
        # a cluster whose nodes are not known here (SLURM): each trial reserves its node's baseline, and
        # the confirmation its own (2 kept)
        (None, (6, None), (2, 4, "budget spent: 4 of 6 launches (2 kept for the confirmations)")),
        # GPU-hours: each trial 8 GPUs x 100 s (0.222 h), 3 trials' worth and the confirmation's kept; a
        # trial starts only where the costliest so far still fits (before: a second batch of two, 0.889
        # spent of 0.889 with 0.222 kept)
        (0, (99, 4 * 800 / 3600), (3, 3, "budget spent: 0.667 of 0.888889 GPU-hours (0.222 kept for the")),
    ],
)
def test_a_trial_and_its_node_baseline_are_paid_before_they_start(
    tmp_path: Path, nodes: int | None, budget: tuple[int, float | None], expected: tuple[int, int, str]
) -> None:
    max_launches, max_gpu_hours = budget
    trials, launches, stopped = expected
    gpu = [f"search.max_gpu_hours={max_gpu_hours}"] if max_gpu_hours is not None else []
    cfg, _ = load(
        [
            "search=demo",
            "search.sampler=random",
            "search.pruner=none",
            "search.storage=sqlite:///:memory:",
            "search.parallel=2",
            "search.confirm_top=1",
            f"search.max_launches={max_launches}",
            "search.stall_trials=99",
            "host.time_scale=1",
            "run.interleave=false",  # no block after a confirmation (test_search_confirm_rounds)
            *gpu,
        ]
    )
    assert cfg.search is not None
    fresh: set[int] = set()  # the nodes whose baseline was measured (recent for the whole test)

    def batch(jobs: list[tuple[list[str], TrialTicket]]) -> list[Any]:
        out = []
        for k, _ in enumerate(jobs):  # the job's number picks its node, as gauntlet_local's slots do
            node = min(set(range(2)) - fresh, default=k % 2) if nodes != 0 else k
            outcome = TrialOutcome(
                state="complete", fidelity="full", values=[1.0], launches=1, gpus=8, seconds=100
            )
            if nodes != 0 and node not in fresh:
                outcome.baseline_launches = 1
                fresh.add(node)
            out.append(outcome)
        return out

    run = _search_run(cfg, tmp_path, batch, None if nodes == 0 else NodeBaselines(nodes, lambda: len(fresh)))
    run.run()
    record = read_search(tmp_path)
    assert record is not None
    assert [len([t for t in record.trials if t.launches]), record.launches] == [trials, launches]
    assert record.stopped.startswith(stopped), record.stopped
    assert record.launches <= cfg.search.max_launches
    assert max_gpu_hours is None or record.gpu_hours <= max_gpu_hours


def _kept(line: str) -> int:
    """The launches a line says are kept for the confirmations (0: it says none)."""
    found = re.search(r"(\d+)(?: of them)? kept for the confirmations", line)
    return int(found.group(1)) if found else 0


#: Where a search's trials run: in the sweep's process (the basic launcher), on a simulated cluster of two
#: nodes (gauntlet_local), on SLURM (nodes not known here); each with the overrides plan composes it from.
LAUNCHERS: dict[str, tuple[NodeBaselines | None, list[str]]] = {
    "serial": (None, []),
    "simulated nodes": (
        NodeBaselines(2, lambda: 0),
        ["hydra/launcher=gauntlet_local", "run.simulated_nodes=2", "search.parallel=2"],
    ),
    "slurm": (NodeBaselines(None, lambda: 0), ["hydra/launcher=gauntlet_slurm", "search.parallel=2"]),
}


@pytest.mark.parametrize(
    ("launcher", "interleave", "confirm_top", "kept"),
    [
        # each confirmation: its finalist's launch (1), the baseline's interleaved block after it (+1), its
        # node's baseline where trials run on nodes of their own and none is recent (+1)
        ("serial", False, 1, 1),
        ("serial", True, 1, 2),
        ("serial", True, 2, 4),
        ("serial", False, 2, 2),
        # before, the opening line said 2 here (no node baseline) while the run kept 3 (test_slurm's search)
        ("slurm", True, 1, 3),
        ("slurm", False, 1, 2),
        ("slurm", True, 2, 6),
        ("slurm", False, 2, 4),
        ("simulated nodes", True, 1, 3),
        ("simulated nodes", False, 2, 4),
    ],
)
def test_the_kept_launches_said_are_those_the_budget_charges(
    tmp_path: Path, launcher: str, interleave: bool, confirm_top: int, kept: int
) -> None:
    """The opening line, ``plan`` and the budget's stop line state one count: what the run loop keeps for
    the confirmations before the trials stop."""
    nodes, overrides = LAUNCHERS[launcher]
    fast = ["search.sampler=random", "search.pruner=none", "search.storage=sqlite:///:memory:"]
    budget = [f"search.max_launches={kept + 8}", f"search.confirm_top={confirm_top}"]
    budget.append("search.stall_trials=99")
    args = ["search=demo", "capacity.profile=decode_heavy", *fast, *budget, f"run.interleave={interleave}"]
    cfg, sources = load([*args, *overrides])
    assert cfg.search is not None

    def batch(jobs: list[tuple[list[str], TrialTicket]]) -> list[Any]:
        return [  # each trial measured fully, its node's baseline first where it has a node of its own
            TrialOutcome(
                state="complete",
                fidelity="full",
                values=[1.0],
                launches=1,
                gpus=8,
                seconds=1,
                baseline_launches=int(nodes is not None),
            )
            for _ in jobs
        ]

    run = _search_run(cfg, tmp_path, batch, nodes)
    run.run()
    record = read_search(tmp_path)
    assert record is not None and record.stopped.startswith("budget spent: "), record.stopped
    charged = _kept(record.stopped)
    opening = opening_line(cfg.search, parse_space(cfg.search), interleave=interleave, nodes=nodes)
    planning = copy.deepcopy(cfg)  # plan refuses SQLite written from SLURM's nodes: a server's URL
    assert planning.search is not None
    planning.search.storage = "postgresql+psycopg://team@db/gauntlet"
    planned = search_plan(args + overrides, composed=(planning, sources), probes=sim_probes())
    said = [_kept(opening), _kept(next(line for line in planned.splitlines() if "budget:" in line))]
    assert said == [charged, charged] == [kept, kept], (opening, planned, record.stopped)
    # and what the trials left is what was kept: the trials stopped where the next one would eat into it
    assert cfg.search.max_launches - record.launches >= kept


@pytest.mark.parametrize(
    ("launcher", "interleave", "confirm_top", "smallest"),
    [
        # in the sweep's own process the confirmations' reserve gives way to one trial: a budget of 1 runs
        ("serial", True, 2, 1),
        ("serial", False, 2, 1),
        # a node of its own: the trial and its node's baseline (2) beside confirm_top x (the finalist's
        # launch, the baseline's block after it, its node's baseline); before, 4 and 7 were let through
        # and launched nothing ("budget spent: 0 of 7 launches")
        ("slurm", True, 1, 2 + 3),
        ("slurm", False, 1, 2 + 2),
        ("slurm", True, 2, 2 + 2 * 3),
        ("slurm", False, 2, 2 + 2 * 2),
        ("simulated nodes", True, 2, 2 + 2 * 3),
        ("simulated nodes", False, 1, 2 + 2),
    ],
)
def test_a_budget_that_starts_no_trial_is_refused_naming_the_smallest_that_does(
    tmp_path: Path, launcher: str, interleave: bool, confirm_top: int, smallest: int
) -> None:
    """The search's checks (plan, doctor and the sweep's opening alike) refuse a budget just below the
    smallest one whose first trial starts, and accept that smallest; a SearchRun on fake jobs agrees:
    nothing launched just below, a trial at it."""
    _, overrides = LAUNCHERS[launcher]
    fast = ["search.sampler=random", "search.pruner=none", "search.storage=sqlite:///:memory:"]
    base = ["search=demo", "capacity.profile=decode_heavy", *fast, f"search.confirm_top={confirm_top}"]
    base += ["search.stall_trials=99", f"run.interleave={interleave}", *overrides]
    how = "one trial's launch" if launcher == "serial" else "the trial's launch and its node's baseline"
    for budget in (smallest - 1, smallest):
        cfg, sources = load([*base, f"search.max_launches={budget}"])
        elsewhere = jobs_run_elsewhere(sources.launcher, cfg)  # the launcher as the sweep reads it
        _space, problems = search_problems(cfg, sources, elsewhere=elsewhere)
        said = [str(p) for p in problems]
        if budget < smallest:
            assert len(said) == 1 and said[0].startswith(
                f"command-line override 'search.max_launches={budget}' (the search: conf/search/demo.yaml): "
                f"search.max_launches = {budget}: >= {smallest}: "
            ), said
            assert how in said[0] and f"search.confirm_top = {confirm_top}" in said[0], said
        else:
            assert said == []
        launched = _launched(tmp_path / str(budget), cfg, elsewhere)
        assert (launched > 0) == (budget >= smallest), (budget, launched)


def _launched(folder: Path, cfg: GauntletConfig, elsewhere: bool) -> int:
    """The launches a SearchRun on fake jobs makes before its trials stop (each trial measured fully, its
    node's baseline first where it has a node of its own, none recent)."""
    assert cfg.search is not None

    def batch(jobs: list[tuple[list[str], TrialTicket]]) -> list[Any]:
        return [
            TrialOutcome(
                state="complete",
                fidelity="full",
                values=[1.0],
                launches=1,
                gpus=8,
                seconds=1,
                baseline_launches=int(elsewhere),
            )
            for _ in jobs
        ]

    folder.mkdir()
    run = _search_run(cfg, folder, batch, planned_nodes(cfg, elsewhere=elsewhere))
    run.run()
    record = read_search(folder)
    assert record is not None
    return record.launches

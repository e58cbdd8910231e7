"""Parallel trials (search.parallel, issue 34 item 6): a batch asked, launched as one, each trial told.

The launcher is a fake that records what it was handed: how many trials went out together, that a batch
never spends more than the budget left, and that a point asked again while its twin is in flight waits for
the twin's result instead of launching twice. The real launcher: tests/integration/test_search_parallel.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contracts.errors import ConfigError
from contracts.trials import read_search
from orchestrator.app.controller import jobs_run_elsewhere
from orchestrator.app.sweeper import _check_parallel
from orchestrator.config.space import parse_space
from orchestrator.measure.trial import TrialOutcome
from orchestrator.search.checks import checked_space
from orchestrator.search.loop import SearchRun
from orchestrator.search.study import TrialTicket
from tests.unit.composed import load


def _name(overrides: list[str]) -> str:
    return next(o.split("=", 1)[1] for o in overrides if o.startswith("candidate.name="))


def _search(tmp_path: Path, *overrides: str) -> tuple[list[list[str]], Any]:
    """Run a demo-space search with fake launchers; returns the groups launched together and the record."""
    # Optuna's study in memory: the storage is not what these tests are about (test_search_storage's is)
    fast = ["search.sampler=random", "search.pruner=none", "search.storage=sqlite:///:memory:"]
    fast.append("run.interleave=false")  # no block after a confirmation (test_search_confirm_rounds)
    cfg, _ = load(["search=demo", *fast, *overrides])
    assert cfg.search is not None
    launched: list[list[str]] = []

    def outcome(overrides: list[str]) -> TrialOutcome:
        number = int(_name(overrides).rsplit("_t", 1)[1])
        return TrialOutcome(state="complete", fidelity="full", values=[float(number)], launches=1, gpus=8)

    def one(overrides: list[str], ticket: TrialTicket | None) -> TrialOutcome:
        launched.append([_name(overrides)])
        return outcome(overrides)

    def batch(jobs: list[tuple[list[str], TrialTicket]]) -> list[Any]:
        launched.append([_name(o) for o, _ in jobs])
        return [outcome(o) if k == 0 else RuntimeError("node lost") for k, (o, _) in enumerate(jobs)]

    run = SearchRun(
        cfg,
        tmp_path,
        baseline_option="baseline",
        space=parse_space(cfg.search),
        flag_check=None,
        launch_job=one,
        say=lambda _: None,
        launch_batch=batch,
    )
    run.run()
    return launched, read_search(tmp_path)


@pytest.mark.parametrize(
    ("parallel", "budget", "groups"),
    [
        (1, 3, [1, 1, 1]),  # one after the other: the batch launcher is never used
        (2, 5, [2, 2, 1]),  # the last trial alone: the budget has room for one more launch
        (3, 4, [3, 1]),
        (4, 2, [2]),  # a batch is never wider than the budget left
    ],
)
def test_trials_go_out_in_batches_of_search_parallel_within_the_budget(
    tmp_path: Path, parallel: int, budget: int, groups: list[int]
) -> None:
    kept = 2  # the launches the trials keep for the confirmations (search.confirm_top), not launched here
    launched, record = _search(
        tmp_path,
        f"search.parallel={parallel}",
        f"search.max_launches={budget + kept}",
        "search.stall_trials=99",
    )
    assert [len(g) for g in launched] == groups
    assert record is not None and record.launches == budget
    numbers = [t.number for t in record.trials]
    assert numbers == sorted(numbers)
    for group in launched:  # a batch's points are distinct: a point is never launched twice at once
        points = [next(t.params for t in record.trials if t.name == name) for name in group]
        assert len({str(sorted(p.items())) for p in points}) == len(points)
    failed = [t for t in record.trials if t.state == "failed"]  # the fake loses all but a batch's first job
    assert [t.name for t in failed] == [name for g in launched if len(g) > 1 for name in g[1:]]
    assert all(t.why == "RuntimeError: node lost" and t.launches == 1 for t in failed)


def test_a_point_asked_again_while_its_twin_is_in_flight_takes_the_twins_result(tmp_path: Path) -> None:
    one_point = ["search.space.layout=tp8_dp1", "search.space.max_num_seqs='choice(64)'"]
    fixed = [
        "search.space.max_num_batched_tokens=8192",
        "search.space.gpu_memory_utilization=0.9",
        "search.space.speculative.num_speculative_tokens=3",
    ]
    launched, record = _search(tmp_path, "search.parallel=2", "search.max_launches=4", *one_point, *fixed)
    assert launched == [["demo_t000"]]  # the space has one point: launched once, alone
    assert record is not None and record.launches == 1
    assert record.stopped.startswith("the space is exhausted")
    echoes = record.trials[1:]
    assert echoes and all(t.same_as == 0 and t.launches == 0 and t.values == [0.0] for t in echoes)


@pytest.mark.parametrize(
    ("launcher", "parallel", "nodes", "refused"),
    [
        ("hydra._internal.core_plugins.basic_launcher.BasicLauncher", 1, 0, None),
        ("hydra._internal.core_plugins.basic_launcher.BasicLauncher", 2, 0, "search.parallel"),
        ("hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher", 2, 2, None),
        ("hydra_plugins.gauntlet_submitit_slurm.GauntletSlurmLauncher", 4, 0, None),
        ("hydra._internal.core_plugins.basic_launcher.BasicLauncher", 0, 0, "search.parallel"),
    ],
)
def test_search_parallel_needs_a_launcher_that_runs_jobs_side_by_side(
    launcher: str, parallel: int, nodes: int, refused: str | None
) -> None:
    cfg, sources = load(
        ["search=demo", "capacity.profile=decode_heavy", f"search.parallel={parallel}",
         f"run.simulated_nodes={nodes}"]
    )  # fmt: skip

    def opening() -> None:  # what the sweep's opening checks, in its order
        checked_space(cfg, sources, elsewhere=jobs_run_elsewhere(launcher, cfg))
        _check_parallel(cfg, launcher)

    if refused is None:
        opening()
        return
    with pytest.raises(ConfigError, match=refused):
        opening()

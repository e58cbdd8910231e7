"""Parallel trials (search.parallel) through Hydra's real submitit launcher on a simulated 2-node cluster.

A batch of two trials goes out as one launch: each job takes a simulated node of its own, measures that
node's baseline first (``candidates/baseline@<node>/``, as a parallel sweep's candidate does) and records
the pairing in its trial's ``run.json``; the winner's confirmation is an ordinary candidate, paired too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.files import read_model
from contracts.layout import SweepPaths
from contracts.results import CandidateRun
from contracts.trials import read_search
from orchestrator.servers.scheduler import launcher_executor
from tests.integration.sweep_helpers import assert_finished_capacity_open, kill_servers, run_sweep
from tests.integration.test_search_storage import FAST
from tests.ports import free_port

pytest.importorskip(
    "hydra_plugins.hydra_submitit_launcher", reason="the .[slurm] extra (make setup installs it)"
)

pytestmark = pytest.mark.slow

NODES = ("sim-node-0", "sim-node-1")


@pytest.fixture
def cluster_port() -> Iterator[int]:
    """A port with the next two free as well (the serving host, then one per simulated node), from this
    worker's own slice below the kernel's ephemeral range (:func:`tests.ports.free_port`). A fixed block
    at 41000 lay inside that range (32768-60999 here): with four workers a client connection's source port
    took a simulated node's before it bound, and a trial's launch was interrupted."""
    base = free_port(span=3)
    yield base
    for k in range(3):
        kill_servers(base + k)


def test_two_trials_run_side_by_side_each_paired_with_its_nodes_baseline(
    tmp_path: Path, cluster_port: int
) -> None:
    parallel = ["search.parallel=2", "hydra/launcher=gauntlet_local", "run.simulated_nodes=2"]
    code, out, sweep = run_sweep(
        [*FAST, *parallel, "search.max_launches=7", "search.confirm_top=1"],
        sweeps=tmp_path / "sweeps",
        port=cluster_port,
    )
    assert_finished_capacity_open(code, out, sweep)
    record = read_search(sweep)
    assert record is not None, out[-3000:]
    # A trial is measured fully, or its screen broke a requirement against its node's baseline (on a
    # loaded machine small_t001's decode_heavy tokens/s once read 2.9% beyond its limit): either is a
    # ruling; only a fully measured one is confirmed.
    complete = [t for t in record.trials if t.state == "complete"]
    # The first batch: two trials side by side and the two nodes' baselines measured for them (charged with
    # them), with 3 launches kept for the confirmation (its own, the baseline's block after it, its node's
    # baseline should it need one); once both nodes' baselines are measured the confirmation needs 2, and
    # the launch that frees may go to one more trial. The confirmation is charged as launched.
    spent = sum(t.launches + t.baseline_launches for t in record.trials)
    assert record.launches == spent + record.confirm_launches <= 7, out[-3000:]
    assert (record.confirm_launches > 0) == bool(complete) and record.confirm_launches <= 3, out[-3000:]
    assert sum(t.baseline_launches for t in record.trials) == 2
    # Hydra's record names the submitit launcher: how `stop` and `rollback` find the trials' jobs.
    assert launcher_executor(sweep) == "local"
    paths = SweepPaths(sweep)
    nodes = []
    for trial in record.trials:
        assert trial.state in ("complete", "infeasible"), (trial.name, trial.state, trial.why)
        if trial.same_as is not None:  # a point asked again: the earlier trial's result, nothing launched
            assert trial.launches == 0 and trial.why.startswith(f"same point as trial {trial.same_as}")
            continue
        run = read_model(paths.trial(trial.name).run_file, CandidateRun)
        assert run.node in NODES and run.paired_baseline == f"baseline@{run.node}", run
        assert f"on {run.node}, paired with baseline@{run.node}" in trial.why
        nodes.append(run.node)
    assert sorted(nodes[:2]) == list(NODES)  # the first batch: one trial per node
    for node in NODES:  # each node's baseline measured there, as a parallel sweep's jobs do
        assert paths.candidate(f"baseline@{node}").run_file.is_file()
    if not complete:
        return
    assert record.winner is not None and record.confirmation is not None
    confirmed = read_model(paths.candidate(record.winner.name).run_file, CandidateRun)
    assert confirmed.paired_baseline == f"baseline@{confirmed.node}"

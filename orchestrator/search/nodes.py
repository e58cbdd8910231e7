"""The node baselines a search's trials may have to measure before they start (pure, with one reader).

Pipeline position: asked by the run loop (:mod:`.loop`) before it adds a trial to a batch, so that
:mod:`.budget` charges a trial and the node baseline it needs before either starts. Where a launcher runs
each trial on a node of its own (``gauntlet_local``'s simulated nodes, SLURM), the trial's job measures its
node's baseline first unless a recent one is there (:func:`orchestrator.app.jobs.node_baseline`); which
node a trial gets is the launcher's choice, so the reservation is the most a batch can need: one per
trial, less the nodes of a known cluster that hold a recent baseline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from contracts.layout import SweepPaths
from contracts.schema import GauntletConfig
from orchestrator.ledger.nodes import sim_node_name


def baselines_due(trials: int, nodes: int | None, fresh: int) -> int:
    """The node baselines a batch of ``trials`` may have to measure first, at the most: on a cluster of
    ``nodes`` (None: not known here, as on SLURM) of which ``fresh`` hold a recent baseline, a batch's
    trials run on distinct nodes, each at worst one without a recent baseline (a trial that waits for a
    node runs after the one that measured its baseline).

    >>> baselines_due(2, 2, 0), baselines_due(2, 2, 1), baselines_due(3, 2, 2), baselines_due(3, None, 5)
    (2, 1, 0, 3)
    """
    if nodes is None:
        return trials
    return max(0, min(trials, nodes - fresh))


@dataclass(frozen=True)
class NodeBaselines:
    """Where a search's trials are paired with their node's baseline: the cluster's nodes when known, and
    how many of them hold a recent baseline now (read again before each trial)."""

    nodes: int | None
    fresh: Callable[[], int]

    def due(self, trials: int) -> int:
        """Node baselines a batch of ``trials`` may measure first (:func:`baselines_due`)."""
        return baselines_due(trials, self.nodes, self.fresh() if self.nodes is not None else 0)


def node_baselines(
    cfg: GauntletConfig, sweep_dir: Path, *, elsewhere: bool, now: Callable[[], float] = time.time
) -> NodeBaselines | None:
    """The node baselines of a sweep whose jobs run elsewhere (``elsewhere``: the launcher runs them on
    nodes of their own); None where trials are measured in the sweeping process, against its opening. On
    a simulated cluster (``run.simulated_nodes``) a node's baseline is recent while its ``run.json`` is
    younger than ``run.node_baseline_max_age_s`` (a drifted one is measured again all the same: that
    charge is said where the budget line shows it)."""
    if not elsewhere:
        return None
    count = cfg.run.simulated_nodes
    if count < 1:
        return NodeBaselines(None, lambda: 0)
    paths = SweepPaths(sweep_dir)
    names = [f"{cfg.baseline.name}@{sim_node_name(k)}" for k in range(count)]

    def fresh() -> int:
        files = [paths.candidate(name).run_file for name in names]
        return sum(
            1 for f in files if f.exists() and now() - f.stat().st_mtime <= cfg.run.node_baseline_max_age_s
        )

    return NodeBaselines(count, fresh)


def planned_nodes(cfg: GauntletConfig, *, elsewhere: bool) -> NodeBaselines | None:
    """The node baselines as a new sweep opens (``plan``'s view of :func:`node_baselines`): none recent yet
    on any node; None where trials are measured in the sweeping process (``elsewhere`` False)."""
    if not elsewhere:
        return None
    return NodeBaselines(cfg.run.simulated_nodes if cfg.run.simulated_nodes >= 1 else None, lambda: 0)


def confirmation_launched(sweep_dir: Path, baseline: str, name: str, since: float) -> int:
    """The launches a confirmation of ``name`` made (read back after its job, to charge what it launched):
    its own; the baseline's interleaved block after it (``candidates/<baseline>[@<node>]/blocks/
    after-<name>/run.json``); and each node baseline (``<baseline>@<node>``) whose ``run.json`` was
    written at or after ``since`` (wall clock: the job's start), measured for it."""
    paths = SweepPaths(sweep_dir)
    here = paths.candidates
    nodes = sorted(d.name for d in here.glob(f"{baseline}@*") if d.is_dir()) if here.is_dir() else []
    names = [baseline, *nodes]
    blocks = sum(1 for n in names if paths.candidate(n).block(name).run_file.exists())
    fresh = 0
    for n in names[1:]:
        run_file = paths.candidate(n).run_file
        if run_file.exists() and run_file.stat().st_mtime >= since:
            fresh += 1
    return 1 + blocks + fresh

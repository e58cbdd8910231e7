"""One sweep directory and what acting on it needs: the typed configuration, the journal, the seams.

Pipeline position: shared by the orchestrator's steps (:mod:`orchestrator.measure.begin` opens the
directory, :mod:`orchestrator.measure.candidate` measures candidates, :mod:`orchestrator.recovery.restore`
restores the retained configuration, :mod:`orchestrator.recovery.rollback` acts on it afterwards). It holds
no logic of its own beyond where things live in the directory and how a candidate renders.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from contracts.layout import SweepPaths, candidate_dir, retained_spec_file
from contracts.schema import CandidateConfig, GauntletConfig
from launch.spec import LaunchSpec, render_spec
from orchestrator.ledger.journal import Journal
from orchestrator.ledger.nodes import Place, launching_place
from orchestrator.servers.seams import Say, Seams
from orchestrator.servers.session import Servers


@dataclass(frozen=True)
class SweepContext:
    """A sweep directory, its typed configuration and the servers it starts (``replace(cfg=...)`` per job)."""

    cfg: GauntletConfig
    dir: Path
    servers: Servers
    #: The node a job measures on, and the baseline measured there (None: the launching process's sweep).
    node: str | None = None
    paired_baseline: str | None = None
    #: Called before each launch and each profile; raises to stop there (a job: the sweep was stopped).
    checkpoint: Callable[[], None] | None = None

    @classmethod
    def open(
        cls, cfg: GauntletConfig, sweep_dir: Path, seams: Seams, *, place: Place | None = None
    ) -> SweepContext:
        """The sweep as seen from ``place`` (default: this process, the launching one)."""
        where = place if place is not None else launching_place()
        return cls(cfg, sweep_dir, Servers(Journal.of_sweep(sweep_dir, where), seams))

    def check_stop(self) -> None:
        """Stop here when the sweep was stopped (jobs only: :func:`orchestrator.app.jobs.stop_checkpoint`)."""
        if self.checkpoint is not None:
            self.checkpoint()

    @property
    def journal(self) -> Journal:
        return self.servers.journal

    @property
    def seams(self) -> Seams:
        return self.servers.seams

    @property
    def say(self) -> Say:
        return self.servers.seams.say

    @property
    def touched(self) -> bool:
        """This process started or stopped a server (only then does an early exit need a restore)."""
        return self.servers.touched

    def candidate_dir(self, name: str) -> Path:
        return candidate_dir(self.dir, name)

    @property
    def paths(self) -> SweepPaths:
        """The sweep directory's files and launches, as attributes (:class:`contracts.layout.SweepPaths`)."""
        return SweepPaths(self.dir)

    @property
    def retained_spec_path(self) -> Path:
        return retained_spec_file(self.dir)

    def render(self, candidate: CandidateConfig) -> LaunchSpec:
        return render_spec(self.cfg.service, candidate, self.cfg.host)

    def repeats_of(self, profile: str, most: int | None = None) -> int:
        """How many times ``profile`` runs (its own ``repeats``, else ``most``, else ``run.repeats``)."""
        own = self.cfg.workloads[profile].repeats
        return own if own is not None else most if most is not None else self.cfg.run.repeats

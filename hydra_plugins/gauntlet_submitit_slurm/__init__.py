"""gauntlet's SLURM launcher for Hydra: the submitit plugin's ``SlurmLauncher``, which also sees a job end
on a cluster without accounting storage (``hydra/launcher=gauntlet_slurm``).

Hydra accepts launchers only from the ``hydra_plugins`` namespace package and imports every module in it at
start-up, so this module stays a thin shell: what it adds is :mod:`orchestrator.servers.submitit_slurm`,
imported when a launch begins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher


class SubmititSlurmLauncher(SlurmLauncher):  # type: ignore[misc]  # the plugin ships no type information
    """Hydra's submitit SLURM launcher; without accounting storage (no ``sacct``), job ends are read from
    ``squeue`` and the job completion log, so a job cancelled by ``stop`` does not leave the sweep waiting."""

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[Any]:
        from orchestrator.servers.submitit_slurm import watching_the_queue  # noqa: PLC0415  (the `.[slurm]` extra)

        with watching_the_queue():
            return super().launch(job_overrides, initial_job_idx)  # type: ignore[no-any-return]

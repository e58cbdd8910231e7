"""gauntlet's SLURM launcher for Hydra: the submitit plugin's ``SlurmLauncher``, which also sees a job end
on a cluster without accounting storage (``hydra/launcher=gauntlet_slurm``).

Hydra accepts launchers only from the ``hydra_plugins`` namespace package and imports every module in it at
start-up, with or without the ``.[slurm]`` extra, so this module imports nothing optional: the plugin's
launcher is built when Hydra instantiates this one (``hydra/launcher=gauntlet_slurm``), and without the extra
that is one error naming ``pip install 'gauntlet[slurm]'``. What it adds is
:mod:`orchestrator.servers.submitit_slurm`, imported when a launch begins.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from contracts.errors import ConfigError
from orchestrator.config.extras import SLURM, missing_extra


def first_task_only(launcher: type[Launcher]) -> type[Launcher]:
    """``launcher`` whose job runs gauntlet in the job's first task only.

    A job of several nodes (``hydra.launcher.nodes``, one task per node) owns the nodes of its multi-node
    candidates: gauntlet runs on the first, and each other node's task returns at once, leaving the node
    to the candidate's followers, started there as job steps (:mod:`launch.nodes`). submitit pickles
    the class by value (cloudpickle), so the job needs nothing of this module."""

    class FirstTaskOnly(launcher):  # type: ignore[misc,valid-type]
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            if os.environ.get("SLURM_PROCID", "0") != "0":
                return None  # submitit's result of the job is the first task's
            return super().__call__(*args, **kwargs)

    return FirstTaskOnly


class SubmititSlurmLauncher(Launcher):
    """Hydra's submitit SLURM launcher; without accounting storage (no ``sacct``), job ends are read from
    ``squeue`` and the job completion log, so a job cancelled by ``stop`` does not leave the sweep waiting."""

    def __init__(self, **params: Any) -> None:
        try:
            from hydra_plugins.hydra_submitit_launcher.submitit_launcher import (  # noqa: PLC0415  (the extra)
                SlurmLauncher,
            )
        except ImportError as exc:
            raise ConfigError([missing_extra(SLURM, "gauntlet_slurm", "hydra/launcher")]) from exc
        #: The plugin's launcher: submitit pickles it for the jobs, so they run without this class.
        self.slurm: Launcher = first_task_only(SlurmLauncher)(**params)

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.slurm.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from orchestrator.servers.submitit_slurm import watching_the_queue  # noqa: PLC0415  (the `.[slurm]` extra)

        with watching_the_queue():
            return self.slurm.launch(job_overrides, initial_job_idx)

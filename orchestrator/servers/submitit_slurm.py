"""How the launching process of a SLURM sweep learns that a job ended without a result, with or without
accounting storage.

Pipeline position: the launching side of a parallel sweep (docs/scale-out.md), used by the launcher of
``hydra/launcher=gauntlet_slurm`` (``hydra_plugins/gauntlet_submitit_slurm``) while it waits for its jobs.
submitit asks ``sacct``, which answers only where the cluster keeps accounting (slurmdbd); elsewhere (a
small cluster, the local one of ``scripts/slurm-local.sh``) every answer is "unknown", and a job cancelled
by ``stop`` (or killed at its time limit) before it wrote a result is waited for forever. Without
accounting, the jobs' states come from ``squeue`` and the job completion log instead
(:func:`orchestrator.servers.scheduler.slurm_states`), so such a job ends the wait as it would with
accounting:
submitit reports the job failed, and the sweep restores and says so.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import submitit
from submitit.slurm.slurm import SlurmInfoWatcher

from orchestrator.servers.scheduler import has_accounting, slurm_config, slurm_states

#: States in which submitit still waits for a job (submitit's own list, ``InfoWatcher.is_done``).
WAITING = frozenset({"READY", "PENDING", "RUNNING", "UNKNOWN", "REQUEUED", "COMPLETING", "PREEMPTED"})


class QueueWatcher(SlurmInfoWatcher):
    """submitit's job watcher reading ``squeue`` and the job completion log instead of ``sacct``."""

    def update(self) -> None:
        to_check = self._registered - self._finished
        if not to_check:
            return
        self._num_calls += 1
        for job, state in slurm_states(to_check).items():
            # Still queued in a state submitit does not list (CONFIGURING, SUSPENDED...): it waits.
            shown = "RUNNING" if state.queued and state.state not in WAITING else state.state
            # No source: squeue failed (the controller is down) or nothing knows the job: ask again later.
            self._info_dict[job] = {
                "JobID": job,
                "State": shown if state.source else "UNKNOWN",
                "NodeList": state.node,
            }
        self._last_status_check = time.time()
        for job in to_check:
            if self.is_done(job, mode="cache"):
                self._finished.add(job)


@contextmanager
def watching_the_queue(*, delay_s: int = 60) -> Iterator[None]:
    """While a launch waits: submitit's SLURM jobs watched through the queue where there is no accounting
    (``delay_s``: the longest time between two looks, as submitit's own watcher)."""
    if has_accounting(slurm_config()):
        yield
        return
    previous = submitit.SlurmJob.watcher
    submitit.SlurmJob.watcher = QueueWatcher(delay_s=delay_s)
    try:
        yield
    finally:
        submitit.SlurmJob.watcher = previous

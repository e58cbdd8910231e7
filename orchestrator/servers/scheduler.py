"""Cancelling a sweep's jobs on other nodes through their scheduler, never by signalling a remote pid.

Pipeline position: used by ``rollback`` and ``stop`` (:mod:`orchestrator.recovery.rollback`) for the jobs that
:meth:`orchestrator.ledger.journal.Journal.remote_jobs` lists. A job run by ``hydra/launcher=submitit_slurm``
is
cancelled with submitit's ``SlurmJob.cancel`` (``scancel``); SLURM then signals the job, whose own handler
tears its server down (:class:`orchestrator.app.sweeper.GauntletJob`). A job of ``submitit_local`` runs on
this
machine
under submitit's controller process; it is cancelled the way submitit itself stops it, SIGTERM to that
controller (which forwards it to the job), and only after the controller's command line proves it is one.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml

from contracts.layout import MULTIRUN_FILE, SUBMITIT_DIR, submitit_folder
from orchestrator.ledger.journal import RemoteJob

#: What the submitit local controller's command line contains (``python -m submitit.local._local DIR``).
LOCAL_CONTROLLER = "submitit.local._local"


def launcher_executor(sweep_dir: Path) -> str | None:
    """``slurm`` or ``local`` when the sweep ran under the submitit plugin (from Hydra's multirun.yaml)."""
    try:
        data = yaml.safe_load((sweep_dir / MULTIRUN_FILE).read_text())
        target = str(data["hydra"]["launcher"]["_target_"])
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return None
    if "submitit" not in target:
        return None
    return "slurm" if "Slurm" in target else "local" if "Local" in target else None


def submitted_jobs(sweep_dir: Path) -> list[RemoteJob]:
    """The sweep's scheduler jobs that have not returned a result (queued, running, or killed).

    A job that has not written its journal yet (still queued, or starting) is only known here, so
    ``rollback`` and ``stop`` cancel these too: none may start a server after the sweep was stopped.
    """
    executor = launcher_executor(sweep_dir)
    root = sweep_dir / SUBMITIT_DIR
    if executor is None or not root.is_dir():
        return []
    out: list[RemoteJob] = []
    for folder in sorted(root.iterdir()):
        job = folder.name
        if not folder.is_dir() or not (folder / f"{job}_submitted.pkl").exists():
            continue
        if any(folder.glob("*_result.pkl")):
            continue
        out.append(RemoteJob(node="?", job=job, executor=executor, journal=folder, live=[], finished=False))
    return out


def cancel_job(
    job: RemoteJob,
    sweep_dir: Path,
    *,
    run: Callable[[Sequence[str]], subprocess.CompletedProcess[str]] | None = None,
    cmdline_of: Callable[[int], Sequence[str] | None] | None = None,
    kill: Callable[[int, int], None] = os.kill,
) -> str:
    """Cancel ``job`` through its executor; returns what was done, in words (never raises)."""
    if job.executor == "slurm":
        return _cancel_slurm(job, sweep_dir, run)
    if job.executor == "local":
        return _cancel_local(job, cmdline_of or _cmdline, kill)
    return f"job {job.job} on {job.node}: executor {job.executor or 'unknown'} cannot be cancelled from here"


def _cancel_slurm(
    job: RemoteJob, sweep_dir: Path, run: Callable[[Sequence[str]], subprocess.CompletedProcess[str]] | None
) -> str:
    if run is None:
        try:
            import submitit  # noqa: PLC0415  (the optional `.[slurm]` extra)
        except ImportError:
            return (
                f"job {job.job} on {job.node}: submitit is not installed here; cancel it with "
                f"`scancel {job.job}` (or pip install '.[slurm]')"
            )
        submitit.SlurmJob(folder=submitit_folder(sweep_dir), job_id=job.job).cancel(check=False)
        return f"job {job.job} on {job.node}: cancelled (scancel)"
    done = run(["scancel", job.job])
    if done.returncode != 0:
        return f"job {job.job} on {job.node}: scancel failed ({done.stderr.strip() or done.returncode})"
    return f"job {job.job} on {job.node}: cancelled (scancel)"


def _cancel_local(
    job: RemoteJob, cmdline_of: Callable[[int], Sequence[str] | None], kill: Callable[[int, int], None]
) -> str:
    try:
        pid = int(job.job)
    except ValueError:
        return f"job {job.job} on {job.node}: not a local submitit job id"
    cmdline = cmdline_of(pid)
    if cmdline is None:
        return f"job {job.job} on {job.node}: already ended"
    if not any(LOCAL_CONTROLLER in part for part in cmdline):
        return f"job {job.job} on {job.node}: pid {pid} is not a submitit controller now; left alone"
    try:
        kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return f"job {job.job} on {job.node}: already ended"
    return f"job {job.job} on {job.node}: cancelled (SIGTERM to its submitit controller)"


def _cmdline(pid: int) -> Sequence[str] | None:
    import psutil  # noqa: PLC0415

    try:
        return psutil.Process(pid).cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except psutil.AccessDenied:
        return ()

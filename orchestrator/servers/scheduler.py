"""Cancelling a sweep's jobs on other nodes through their scheduler, never by signalling a remote pid.

Pipeline position: used by ``rollback`` and ``stop`` (:mod:`orchestrator.recovery.handover`) for the jobs that
:meth:`orchestrator.ledger.journal.Journal.remote_jobs` lists. A job run by ``hydra/launcher=submitit_slurm``
is
cancelled with submitit's ``SlurmJob.cancel`` (``scancel``); SLURM then signals the job, whose own handler
tears its server down (:class:`orchestrator.app.sweeper.GauntletJob`). A job of ``submitit_local`` runs on
this
machine
under submitit's controller process; it is cancelled the way submitit itself stops it, SIGTERM to that
controller (which forwards it to the job), and only after the controller's command line proves it is one.

A SLURM job's state is read as SLURM reports it (:func:`slurm_states`): ``squeue`` while the job is queued or
running, then the job completion log (``JobCompType=jobcomp/filetxt``) or ``scontrol show job``; a cluster
without accounting storage has no ``sacct``. :func:`job_lines` names each job of a sweep, its candidate and
node, and its final state, for the sweep's last lines.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from contracts.layout import SweepPaths, submitit_folder
from orchestrator.ledger.events import JobStarted, Started
from orchestrator.ledger.journal import Journal, RemoteJob

#: What the submitit local controller's command line contains (``python -m submitit.local._local DIR``).
LOCAL_CONTROLLER = "submitit.local._local"


def launcher_executor(sweep_dir: Path) -> str | None:
    """``slurm`` or ``local`` when the sweep ran under the submitit plugin (from Hydra's multirun.yaml)."""
    try:
        data = yaml.safe_load(SweepPaths(sweep_dir).multirun.read_text())
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
    root = SweepPaths(sweep_dir).submitit
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
    state = slurm_states([job.job], run=run or run_command)[job.job]
    if state.source and not state.queued:  # SLURM knows it ended: say how, cancel nothing
        return f"job {job.job} on {job.node}: already ended ({state.state}, per {state.source})"
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


# ---------------------------------------------------------------- SLURM job states

#: Runs a SLURM command (``squeue``, ``scontrol``, ``scancel``) and returns what it printed.
RunCommand = Callable[[Sequence[str]], subprocess.CompletedProcess[str]]


def run_command(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """The real :data:`RunCommand`: a missing program or a hung daemon reads as a failed command."""
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(list(argv), 127, "", f"{type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class SlurmState:
    """A SLURM job's state as SLURM reports it, and where it was read."""

    job: str  # the job id; an array task is ARRAYID_TASK, as submitit names it
    state: str  # PENDING, RUNNING, COMPLETING, COMPLETED, CANCELLED, FAILED, TIMEOUT, NODE_FAIL, ...; UNKNOWN
    node: str = ""  # the node list SLURM gave it ("" while pending or when not recorded)
    source: str = ""  # "squeue", "job completion log PATH", "scontrol", or "" (SLURM does not know it)

    @property
    def queued(self) -> bool:
        """Still in the queue (pending, running or completing): the job holds or waits for its node."""
        return self.source == "squeue"


def parse_squeue(text: str) -> dict[str, SlurmState]:
    """``squeue -h -r -o '%i|%T|%N'`` lines → states by job id (pure)."""
    out: dict[str, SlurmState] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[0]:
            out[parts[0]] = SlurmState(parts[0], parts[1], parts[2], "squeue")
    return out


def _key_values(line: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in line.split() if "=" in part)


def parse_jobcomp(text: str, source: str = "job completion log") -> dict[str, SlurmState]:
    """Lines of ``jobcomp/filetxt`` (``JobId=11 ... JobState=CANCELLED ... ArrayJobId=10 ArrayTaskId=1``)
    → states by job id, an array task under ARRAYID_TASK (pure). A requeued job has several lines: the
    last one is its final state."""
    out: dict[str, SlurmState] = {}
    for line in text.splitlines():
        fields = _key_values(line)
        if "JobId" not in fields or "JobState" not in fields:
            continue
        job = fields["JobId"]
        if fields.get("ArrayJobId") and fields.get("ArrayTaskId"):
            job = f"{fields['ArrayJobId']}_{fields['ArrayTaskId']}"
        out[job] = SlurmState(job, fields["JobState"], fields.get("NodeList", ""), source)
    return out


def parse_config(text: str) -> dict[str, str]:
    """``scontrol show config`` (``Key = Value`` lines) → a mapping (pure)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()
    return out


def slurm_config(run: RunCommand = run_command) -> dict[str, str]:
    """The running cluster's configuration (empty when ``scontrol`` cannot reach it)."""
    done = run(["scontrol", "show", "config"])
    return parse_config(done.stdout) if done.returncode == 0 else {}


def has_accounting(config: Mapping[str, str]) -> bool:
    """Whether ``sacct`` can answer: the cluster keeps accounting storage (slurmdbd)."""
    kind = config.get("AccountingStorageType", "")
    return bool(kind) and not kind.endswith("/none")


def slurm_states(
    job_ids: Iterable[str],
    *,
    run: RunCommand = run_command,
    config: Mapping[str, str] | None = None,
    read_text: Callable[[Path], str] = Path.read_text,
) -> dict[str, SlurmState]:
    """The state of each job as SLURM reports it: ``squeue`` while queued, then the job completion log,
    then ``scontrol show job`` (kept ``MinJobAge`` seconds); UNKNOWN with no source when none knows it, or
    when ``squeue`` itself failed (the controller is down: nothing can be said about a job then)."""
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    arrays = sorted({job.split("_")[0] for job in ids})
    listed = run(["squeue", "-h", "-r", "-o", "%i|%T|%N", "-j", ",".join(arrays)])
    if listed.returncode != 0 and "Invalid job id" not in listed.stderr:
        return {job: SlurmState(job, "UNKNOWN") for job in ids}
    found = {k: v for k, v in parse_squeue(listed.stdout).items() if k in ids}
    missing = [job for job in ids if job not in found]
    if missing:
        conf = slurm_config(run) if config is None else config
        location = conf.get("JobCompLoc", "")
        if conf.get("JobCompType", "").endswith("/filetxt") and location:
            try:
                text = read_text(Path(location))
            except OSError:
                text = ""
            done = parse_jobcomp(text, f"job completion log {location}")
            found.update({job: done[job] for job in missing if job in done})
    for job in (job for job in ids if job not in found):
        shown = run(["scontrol", "show", "job", "-o", job])
        fields = _key_values(shown.stdout) if shown.returncode == 0 else {}
        if "JobState" in fields:
            found[job] = SlurmState(job, fields["JobState"], fields.get("NodeList", ""), "scontrol")
        else:
            found[job] = SlurmState(job, "UNKNOWN")
    return found


def sweep_job_ids(sweep_dir: Path) -> list[str]:
    """Every scheduler job the submitit plugin submitted for the sweep (finished ones included)."""
    root = SweepPaths(sweep_dir).submitit
    if not root.is_dir():
        return []
    return sorted(
        (f.name for f in root.iterdir() if f.is_dir() and (f / f"{f.name}_submitted.pkl").exists()),
        key=lambda job: [int(p) if p.isdigit() else 0 for p in job.split("_")],
    )


def _job_owners(sweep_dir: Path) -> dict[str, tuple[str, str]]:
    """Job id → (candidate, node), from the jobs' own journals (a job never started has none); a job that
    ran a multi-node server names all its nodes (``nodes: n1,n2``)."""
    out: dict[str, tuple[str, str]] = {}
    nodes: dict[str, list[str]] = {}
    for path in sorted(SweepPaths(sweep_dir).journals.glob("*.jsonl")):
        for event in Journal(path).events():
            if isinstance(event, JobStarted) and event.job:
                out.setdefault(event.job, (event.candidate, event.node or "?"))
            if isinstance(event, Started) and event.job and event.followers:
                seen = nodes.setdefault(event.job, [event.node or "?"])
                seen.extend(f.name for f in event.followers if f.name not in seen)
    return {
        job: (candidate, f"nodes: {','.join(nodes[job])}" if job in nodes else node)
        for job, (candidate, node) in out.items()
    }


def job_lines(
    sweep_dir: Path,
    *,
    run: RunCommand = run_command,
    wait_s: float = 60.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """The sweep's SLURM jobs with their final state as SLURM reports it, one line each ([] when the sweep
    did not run under SLURM). Waits up to ``wait_s`` for jobs still in the queue (a job whose result is in
    stays COMPLETING a moment), then says the state it sees."""
    if launcher_executor(sweep_dir) != "slurm":
        return []
    ids = sweep_job_ids(sweep_dir)
    if not ids:
        return []
    config = slurm_config(run)
    deadline = clock() + wait_s
    states = slurm_states(ids, run=run, config=config)
    while any(s.queued for s in states.values()) and clock() < deadline:
        sleep(1.0)
        states = slurm_states(ids, run=run, config=config)
    owners = _job_owners(sweep_dir)
    lines = [f"SLURM jobs of this sweep ({len(ids)}; state as SLURM reports it):"]
    for job in ids:
        candidate, node = owners.get(job, ("(never started)", "-"))
        state = states[job]
        where = state.source or "not known to squeue, the job completion log or scontrol"
        lines.append(f"  job {job:<10} {candidate:<20} {node:<12} {state.state:<11} ({where})")
    still = [s.job for s in states.values() if s.queued]
    if still:
        lines.append(f"  still in the queue after {wait_s:.0f} s: {', '.join(still)} (scancel them to stop)")
    return lines

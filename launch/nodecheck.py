"""Teardown's proof across nodes: every node's agent (:mod:`launch.node_agent`) and SLURM's step list
decide whether a multi-node server is gone, and name what is left on each node.

Pipeline position: under :mod:`launch.supervisor`, whose teardown of a multi-node server (launched, or
adopted by ``rollback``, ``stop`` and ``status``) ends with :meth:`NodesTeardown.verify`. Where the nodes
are SLURM nodes the agent runs on each as a job step (``srun --overlap``); elsewhere every node is this
machine and the agent's core runs here. :func:`decide` is pure: one node's failed check never hides
another's leftovers, and is itself named as what is left there.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from contracts.errors import TeardownError
from launch.node_agent import AgentGpu, AgentProcess, Host, NodeReport, PsutilHost, check, parse_report
from launch.nodes import step_name

#: How long teardown waits for SLURM's steps to go and every node to report nothing left.
NODES_WAIT_S = 30.0
NODES_POLL_S = 0.5
#: How long one node's check may take (an ``srun`` step: the scheduler's round trip plus the agent).
CHECK_TIMEOUT_S = 60.0
#: A GPU whose memory in use is above its pre-launch level by more than this has not got it back.
GPU_TOLERANCE_GIB = 0.5

#: A command's exit code, stdout and stderr (the seam for srun, squeue and scontrol).
Runner = Callable[[Sequence[str], float], tuple[int, str, str]]


def run_command(argv: Sequence[str], timeout_s: float) -> tuple[int, str, str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)
    return done.returncode, done.stdout, done.stderr


@dataclass(frozen=True)
class NodeResult:
    """One node's check: its report, or why there is none (``error``: the check failed; ``note``: there was
    nothing to check, e.g. the job ended and SLURM ended its steps there)."""

    node: int | None  # 0: the head's node; None where the server's record does not say
    name: str
    report: NodeReport | None = None
    error: str = ""
    note: str = ""

    @property
    def label(self) -> str:
        return f"node {self.node} ({self.name})" if self.node is not None else f"node {self.name}"


@dataclass(frozen=True)
class NodesVerdict:
    """Whether every node is clean and SLURM lists none of the server's steps; what is left, per node."""

    done: bool
    left: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def decide(
    results: Sequence[NodeResult],
    steps_left: Sequence[str],
    *,
    steps_error: str = "",
    gpus_before: Mapping[str, list[AgentGpu]] | None = None,
    tolerance_gib: float = GPU_TOLERANCE_GIB,
) -> NodesVerdict:
    """Done only when no step is listed and every node reports no process, no port held and its GPU memory
    back (pure). A node whose check failed is left undecided and named."""
    left = [f"SLURM: step {step} still listed by squeue" for step in steps_left]
    if steps_error:
        left.append(f"SLURM: the step list could not be read ({steps_error})")
    notes = []
    for r in results:
        if r.error:
            left.append(f"{r.label}: not checked: {r.error}")
            continue
        if r.report is None:
            notes.append(f"{r.label}: {r.note or 'not checked'}")
            continue
        left.extend(f"{r.label}: {p.describe()} still runs" for p in r.report.processes)
        for held in r.report.ports:
            pids = ", ".join(f"pid {p}" if p else "a process the agent cannot see" for p in held.pids)
            left.append(f"{r.label}: port {held.port} still taken by {pids}")
        before = {g.index: g for g in (gpus_before or {}).get(r.name, [])}
        for gpu in r.report.gpus or []:
            was = before.get(gpu.index)
            if was is not None and gpu.used_gib - was.used_gib > tolerance_gib:
                left.append(
                    f"{r.label}: GPU {gpu.index} holds {gpu.used_gib:.2f} GiB, {was.used_gib:.2f} GiB before "
                    "the launch (its memory is not back)"
                )
        if r.report.killed:
            notes.append(f"{r.label}: SIGKILL to pid(s) {', '.join(map(str, r.report.killed))} (left behind)")
    return NodesVerdict(done=not left, left=left, notes=notes)


def first_processes(results: Sequence[NodeResult]) -> dict[str, AgentProcess]:
    """Each node's first process of the server, by node name: the earliest started (the step's task, which
    started the rest: vLLM's engines); a node whose check failed or found none is absent (pure)."""
    out: dict[str, AgentProcess] = {}
    for r in results:
        if r.report is not None and r.report.processes:
            out[r.name] = min(r.report.processes, key=lambda p: (p.create_time, p.pid))
    return out


class NodeChecker(Protocol):
    """Runs the agent on every node of one server and lists the server's SLURM steps."""

    def check(self, port: int, other_ports: Sequence[int], *, kill: bool = False) -> list[NodeResult]: ...

    def steps_left(self, port: int, nodes: int) -> list[str]:
        """The server's steps still listed (``JOB.STEP name``); raises OSError when SLURM cannot say."""
        ...

    def cancel_steps(self, port: int, nodes: int) -> list[str]:
        """``scancel`` the server's follower steps still listed (their remote tasks outlived the local
        ``srun``); the step ids cancelled. Raises OSError when SLURM cannot say."""
        ...


@dataclass
class LocalChecker:
    """Every node is this machine (a sim or cpu host outside SLURM): one report, the agent's core here."""

    host: Host = field(default_factory=PsutilHost)

    def check(self, port: int, other_ports: Sequence[int], *, kill: bool = False) -> list[NodeResult]:
        try:
            report = check(self.host, port=port, other_ports=other_ports, kill=kill)
        except OSError as exc:
            return [NodeResult(None, "this machine", error=f"{type(exc).__name__}: {exc}")]
        return [NodeResult(None, "this machine (every node)", report=report)]

    def steps_left(self, port: int, nodes: int) -> list[str]:
        return []

    def cancel_steps(self, port: int, nodes: int) -> list[str]:
        return []


@dataclass
class SlurmChecker:
    """The agent as a step of job ``job_id`` on each of its nodes (``names``: known node indexes by name)."""

    job_id: str
    names: Mapping[str, int] = field(default_factory=dict)
    project_root: Path = Path(".")
    python: str = sys.executable
    run: Runner = run_command
    #: Only the nodes of ``names`` are looked at (a watch of one follower), not every node of the job.
    only_named: bool = False

    def job_nodes(self) -> list[str] | None:
        """The job's nodes while it runs (squeue, scontrol); None once it ended."""
        code, out, err = self.run(["squeue", "-h", "-j", self.job_id, "-o", "%T %N"], CHECK_TIMEOUT_S)
        if code != 0 and "Invalid job id" in err:
            return None
        if code != 0:
            raise OSError(f"squeue -j {self.job_id}: exit {code}: {err.strip()[-200:]}")
        fields = out.split()
        if len(fields) < 2 or fields[0] in ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "COMPLETING"):
            return None
        code, out, err = self.run(["scontrol", "show", "hostnames", fields[1]], CHECK_TIMEOUT_S)
        if code != 0:
            raise OSError(f"scontrol show hostnames {fields[1]}: exit {code}: {err.strip()[-200:]}")
        return out.split()

    def check(self, port: int, other_ports: Sequence[int], *, kill: bool = False) -> list[NodeResult]:
        try:
            hostnames = self.job_nodes()
        except (OSError, subprocess.SubprocessError) as exc:
            return [NodeResult(k, n, error=str(exc)) for n, k in self.names.items()]
        if hostnames is None:
            note = f"job {self.job_id} ended: SLURM ended its steps there"
            return [NodeResult(k, n, note=note) for n, k in self.names.items()]
        if self.only_named:
            hostnames = [name for name in hostnames if name in self.names]
        return [self._one(name, port, other_ports, kill) for name in hostnames]

    def _one(self, name: str, port: int, other_ports: Sequence[int], kill: bool) -> NodeResult:
        node = self.names.get(name)
        argv = [
            "srun", f"--jobid={self.job_id}", "--nodes=1", "--ntasks=1", f"--nodelist={name}", "--overlap",
            "--quiet", f"--job-name=gauntlet-check-{port}", f"--chdir={self.project_root}",
            "--export=ALL,PYTHONPATH=" + str(self.project_root), self.python, "-m", "launch.node_agent",
            f"--port={port}", f"--node={name}", *(f"--rpc-port={p}" for p in other_ports),
            *(["--kill"] if kill else []),
        ]  # fmt: skip
        try:
            code, out, err = self.run(argv, CHECK_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as exc:
            return NodeResult(node, name, error=f"{type(exc).__name__}: {exc}")
        if code != 0:
            return NodeResult(node, name, error=f"srun exited {code}: {err.strip()[-300:] or '<no stderr>'}")
        try:
            return NodeResult(node, name, report=parse_report(out, node=name))
        except TeardownError as exc:
            return NodeResult(node, name, error=exc.message)

    def steps_left(self, port: int, nodes: int) -> list[str]:
        wanted = {step_name(k, port) for k in range(1, nodes)}
        argv = ["squeue", "--steps", "--noheader", "--jobs", self.job_id, "--format=%i %j"]
        code, out, err = self.run(argv, CHECK_TIMEOUT_S)
        if code != 0 and "Invalid job id" in err:
            return []
        if code != 0:
            raise OSError(f"squeue --steps: exit {code}: {err.strip()[-200:]}")
        return [line.strip() for line in out.splitlines() if line.split()[1:2] and line.split()[1] in wanted]

    def cancel_steps(self, port: int, nodes: int) -> list[str]:
        steps = [line.split()[0] for line in self.steps_left(port, nodes)]
        for step in steps:
            self.run(["scancel", step], CHECK_TIMEOUT_S)
        return steps


@dataclass
class NodesTeardown:
    """After the local teardown: wait (bounded) until SLURM lists no step and every node is clean; SIGKILL
    through the agent what a node still holds of the server; what stays is named per node."""

    clock: Callable[[], float]
    sleep: Callable[[float], None]
    wait_s: float = NODES_WAIT_S

    def look(
        self,
        checker: NodeChecker,
        port: int,
        other_ports: Sequence[int],
        nodes: int,
        *,
        kill: bool = False,
        gpus_before: Mapping[str, list[AgentGpu]] | None = None,
    ) -> NodesVerdict:
        """One look at every node and the step list (no wait)."""
        steps_error = ""
        try:
            steps = checker.steps_left(port, nodes)
        except (OSError, subprocess.SubprocessError) as exc:
            steps, steps_error = [], str(exc)
        results = checker.check(port, other_ports, kill=kill)
        return decide(results, steps, steps_error=steps_error, gpus_before=gpus_before)

    def verify(
        self,
        checker: NodeChecker,
        port: int,
        other_ports: Sequence[int],
        nodes: int,
        *,
        gpus_before: Mapping[str, list[AgentGpu]] | None = None,
    ) -> NodesVerdict:
        """Look until done or ``wait_s``; a process still there after the first look is killed through the
        agent. The verdict's notes say what was killed where."""
        deadline = self.clock() + self.wait_s
        verdict = self.look(checker, port, other_ports, nodes, gpus_before=gpus_before)
        notes: list[str] = [*verdict.notes]
        killed = False
        while not verdict.done and self.clock() < deadline:
            kill = not killed and any("still runs" in line for line in verdict.left)
            killed = killed or kill
            if not kill:
                self.sleep(NODES_POLL_S)
            verdict = self.look(checker, port, other_ports, nodes, kill=kill, gpus_before=gpus_before)
            notes.extend(n for n in verdict.notes if n not in notes)
        return NodesVerdict(verdict.done, verdict.left, notes)


def checker_for(
    nodes: Sequence[tuple[int, str, str]], project_root: Path, *, only_named: bool = False
) -> NodeChecker:
    """The checker of a server whose processes are ``nodes`` (node index, node name, SLURM job): its job's
    steps where a follower is one, else this machine. ``only_named``: on SLURM, only ``nodes``' own."""
    job = next((slurm_job for _, _, slurm_job in nodes if slurm_job), "")
    if not job:
        return LocalChecker()
    return SlurmChecker(job, {name: k for k, name, _ in nodes if name}, project_root, only_named=only_named)

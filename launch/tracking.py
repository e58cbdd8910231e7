"""The servers a supervisor knows: the :class:`Server` record, its bookkeeping, and whether it is still the
process that was started.

Pipeline position: under :mod:`launch.supervisor` (and its watcher and teardown). A server is known by pid
and create time, so a reused pid is never mistaken for it; an adopted server (rollback, from the journal)
is matched by the start time the journal recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from contracts.results import GpuMemory
from launch.follower import NodeProcess
from launch.process import Child, Processes, ProcInfo
from launch.spec import LaunchSpec

__all__ = ["NodeProcess", "Server", "Tracked", "Tracker", "WatchState", "same_process", "same_start"]

#: How long a server that is seen gone may take to hand over its exit code (see Tracker.await_exit_code).
EXIT_CODE_WAIT_S = 5.0
#: A recorded start time above this is an epoch (journals before start times were counted from boot).
EPOCH_RECORD = 1e9

WatchStateName = Literal["healthy", "unhealthy", "dead", "hung"]


@dataclass(frozen=True)
class Server:
    """A server this program started or adopted: enough to find, watch and stop it again."""

    spec: LaunchSpec
    pid: int
    pgid: int
    create_time: float  # seconds after boot it started (ProcInfo.create_time): guards against pid reuse
    log_path: Path
    started_at: float  # time.time() at spawn
    #: The other nodes' processes of a multi-node server (each a follower, ``node`` 1..); none on one node.
    followers: tuple[Server, ...] = ()
    #: Which node of the server this process is (0: the head) and the machine it runs on.
    node: int = 0
    node_name: str = ""
    #: The SLURM job whose step this follower is ("" when it runs on this machine).
    slurm_job: str = ""
    #: A SLURM follower's process on its node (the agent's report; ``pid`` is the local ``srun``).
    node_pid: int | None = None

    @property
    def base_url(self) -> str:
        return self.spec.base_url

    def node_processes(self) -> list[NodeProcess]:
        """The followers as a journal records them."""
        return [
            NodeProcess(node=f.node, name=f.node_name, pid=f.pid, pgid=f.pgid, create_time=f.create_time,
                        log_path=str(f.log_path), slurm_job=f.slurm_job, node_pid=f.node_pid)
            for f in self.followers
        ]  # fmt: skip

    @property
    def processes(self) -> tuple[Server, ...]:
        """The head, then its followers."""
        return (self, *self.followers)


@dataclass
class WatchState:
    """What the watcher (:meth:`launch.watch.Watcher.check`) last reported about one server."""

    state: WatchStateName = "healthy"
    #: Monotonic time the first of the current run of unanswered /health probes began (None: answered).
    silent_since: float | None = None


@dataclass
class Tracked:
    """Per-server bookkeeping the frozen :class:`Server` does not carry."""

    child: Child | None  # None for an adopted server: not our child, no exit code
    started_mono: float | None
    gpu_before: list[GpuMemory] | None
    tree: dict[tuple[int, float], ProcInfo] = field(default_factory=dict)
    watch: WatchState = field(default_factory=WatchState)
    exit_code: int | None = None


class Tracker:
    """The supervisor's known servers by (pid, create time), and their liveness through the process table."""

    def __init__(self, processes: Processes, *, clock: Callable[[], float], sleep: Callable[[float], None]):
        self._procs = processes
        self._clock = clock
        self._sleep = sleep
        self._tracked: dict[tuple[int, float], Tracked] = {}

    def add(self, server: Server, tracked: Tracked) -> None:
        self._tracked[(server.pid, server.create_time)] = tracked

    def track(self, server: Server) -> Tracked:
        key = (server.pid, server.create_time)
        if key not in self._tracked:
            self._tracked[key] = Tracked(None, None, None)
        return self._tracked[key]

    def pids(self) -> set[int]:
        """The pids of every server (and follower) it knows; each leads its own process group (started with
        ``start_new_session``), so they are the groups of the servers' processes too."""
        return {pid for pid, _ in self._tracked}

    def gone(self, server: Server) -> bool:
        """The server's own process is gone: exited (reaped or zombie) or its pid was reused."""
        tracked = self.track(server)
        if tracked.child is not None and tracked.exit_code is None:
            tracked.exit_code = tracked.child.poll()
            if tracked.exit_code is not None:
                return True
        info = self._procs.info(server.pid)
        return info is None or info.zombie or not same_start(info.create_time, server.create_time)

    def await_exit_code(self, server: Server, within_s: float = EXIT_CODE_WAIT_S) -> int | None:
        """The exit code of a server seen gone before it could be reaped, waiting up to ``within_s``.

        psutil reports a process whose main thread has exited as a zombie while its other threads still
        shut down (vLLM's API server does this after an engine failure); ``waitpid`` has no code for it
        until the last thread is gone. Classifying without the code would lose it from the record.
        """
        deadline = self._clock() + within_s
        code = self.exit_code(server)
        while code is None and self.track(server).child is not None and self._clock() < deadline:
            self._sleep(min(0.1, within_s))
            code = self.exit_code(server)
        return code

    def exit_code(self, server: Server) -> int | None:
        tracked = self.track(server)
        if tracked.child is not None and tracked.exit_code is None:
            tracked.exit_code = tracked.child.poll()
        return tracked.exit_code


def same_start(a: float, b: float) -> bool:
    return abs(a - b) < 0.01


def same_process(info: ProcInfo, recorded: float) -> bool:
    """``info`` is the process a journal recorded as started at ``recorded``."""
    if recorded > EPOCH_RECORD:  # an older journal: match on the wall-clock start, to the second
        return abs(info.wall_start - recorded) < 1.0
    return same_start(info.create_time, recorded)

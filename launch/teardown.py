"""A server's teardown: SIGTERM to the group, the grace period, SIGKILL to every survivor, then the proof
that nothing is left (no process of the tree, the port free, GPU memory back, the IPC sockets gone).

Pipeline position: under :mod:`launch.supervisor`, whose :meth:`~launch.supervisor.Supervisor.teardown`
runs it after a launch's profiles, after a failed start and for rollback and stop. The tree is every
descendant and process-group member ever seen, tracked by pid and create time (a member that left the
group with ``setsid`` still gets the signals; a reused pid is never signalled).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from contracts.errors import TeardownError
from contracts.results import TeardownRecord
from launch.command import clear_rpc_dir
from launch.gpu_release import GpuRelease
from launch.process import Processes, ProcInfo
from launch.spec import LaunchSpec
from launch.tracking import Server, Tracked, Tracker, same_start

TEARDOWN_POLL_S = 0.2
#: After SIGKILL, how long the kernel may take to remove the tree. A killed process disappears only once its
#: memory is freed: a vLLM worker's KV cache on a loaded host, or a GPU process's device memory through the
#: driver, can take tens of seconds (CI saw a CPU worker outlive 10 s). Past this it is stuck (a process in
#: uninterruptible sleep on a wedged driver or file system): the teardown refuses with its state.
KILL_WAIT_S = 60.0
KILL_SLOW_S = 5.0  # a tree that took longer than this to go after SIGKILL is noted in the record
PORT_WAIT_S = 5.0  # after the tree is gone, how long to wait for the port to be released


@dataclass(frozen=True)
class Ended:
    """One teardown's record and what it left behind."""

    record: TeardownRecord
    alive: list[ProcInfo]
    port_free: bool


class Teardown:
    """Stops a server's whole tree and proves it stopped; every side effect through the injected seams."""

    def __init__(
        self,
        tracker: Tracker,
        processes: Processes,
        gpu: GpuRelease,
        *,
        own_rpc_dir: Callable[[LaunchSpec], Path | None],
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> None:
        self._tracker = tracker
        self._procs = processes
        self._gpu = gpu
        self._own_rpc_dir = own_rpc_dir
        self._clock = clock
        self._sleep = sleep

    def run(self, server: Server) -> Ended:
        """SIGTERM the group, wait the grace period, SIGKILL every survivor, then look at what is left.

        A server the watcher found hung gets SIGKILL at once: a stopped (SIGSTOP) or wedged process cannot
        act on SIGTERM, and waiting its grace period would only keep the sweep waiting.
        """
        tracked = self._tracker.track(server)
        start = self._clock()
        signals: list[str] = []
        notes: list[str] = []
        self.collect(server, tracked)
        alive = self.survivors(server, tracked)
        hung = tracked.watch.state == "hung"
        if alive and hung:
            notes.append(f"hung: SIGKILL at once (no grace period) to {len(alive)} process(es)")
        elif alive:
            self._procs.signal_group(server.pgid, signal.SIGTERM)
            for info in alive:  # members that left the group (setsid) still get the signal
                self._procs.signal(info.pid, signal.SIGTERM)
            signals.append("SIGTERM")
            alive = self._wait_gone(server, tracked, server.spec.shutdown_grace_s)
            if alive:
                notes.append(
                    f"{len(alive)} process(es) outlived SIGTERM and {server.spec.shutdown_grace_s:g} s of "
                    "grace: " + ", ".join(info.describe() for info in alive)
                )
        if alive:
            self._procs.signal_group(server.pgid, signal.SIGKILL)
            for info in alive:
                self._procs.signal(info.pid, signal.SIGKILL)
            signals.append("SIGKILL")
            killed_at = self._clock()
            alive = self._wait_gone(server, tracked, KILL_WAIT_S)
            took = self._clock() - killed_at
            if not alive and took > KILL_SLOW_S:
                notes.append(f"the tree took {took:.1f} s to go after SIGKILL (its memory being freed)")
        self._tracker.exit_code(server)  # reap our own child if it died between two looks (a zombie is gone)
        if not alive:
            self._clear_rpc(server, notes)
        port_free = self._wait_port_free(server.spec, PORT_WAIT_S)
        gpu_released, gpu_after = self._gpu.wait_released(
            tracked.gpu_before, server.spec.gpu_release_timeout_s, notes
        )
        record = TeardownRecord(
            signal_sequence=signals,
            duration_s=round(self._clock() - start, 3),
            survivors=[info.pid for info in alive],
            port_free=port_free,
            gpu_released=gpu_released,
            gpu_after=gpu_after or [],
            notes=notes,
        )
        return Ended(record, alive, port_free)

    def refusal(self, server: Server, ended: Ended) -> TeardownError | None:
        """The error a teardown that left a survivor or a taken port raises (None: nothing left)."""
        if not ended.alive and ended.port_free:
            return None
        after = f" {KILL_WAIT_S:g} s after SIGKILL"
        problems = [
            f"survivor: {info.describe()}" + (f", {info.state}{after}" if info.state else "")
            for info in ended.alive
        ]
        if not ended.port_free:
            holders = self._procs.port_holders(server.spec.port)
            problems.append(
                f"port {server.spec.port} still taken by "
                + (", ".join(h.describe() for h in holders) or "an unknown process")
            )
        signals = ended.record.signal_sequence
        return TeardownError(
            f"teardown of {server.spec.candidate} (pid {server.pid}) left {len(problems)} thing(s) "
            f"behind after {' then '.join(signals) or 'no signal'}",
            record=ended.record,
            evidence=problems,
            hint="stop them by hand (kill -9 PID) and check the host before the next launch",
        )

    def collect(self, server: Server, tracked: Tracked) -> None:
        """Add every current member of the server's tree to the tracked set (by pid and create time)."""
        members: list[ProcInfo] = []
        if not self._tracker.gone(server):
            root = self._procs.info(server.pid)
            if root is not None:
                members.append(root)
            members.extend(self._procs.descendants(server.pid))
        members.extend(self._procs.group_members(server.pgid))
        for info in members:
            tracked.tree.setdefault(info.key, info)

    def survivors(self, server: Server, tracked: Tracked) -> list[ProcInfo]:
        """The members of the tracked tree still alive (not zombies, not a reused pid), each with the state it
        is in now."""
        self._tracker.exit_code(server)  # reap our own child so it does not linger as a zombie
        self.collect(server, tracked)
        alive = []
        for key, info in tracked.tree.items():
            now = self._procs.info(key[0])
            if now is not None and not now.zombie and same_start(now.create_time, key[1]):
                alive.append(replace(info, state=now.state))
        return alive

    def _wait_gone(self, server: Server, tracked: Tracked, budget_s: float) -> list[ProcInfo]:
        deadline = self._clock() + budget_s
        while True:
            alive = self.survivors(server, tracked)
            if not alive or self._clock() >= deadline:
                return alive
            self._sleep(TEARDOWN_POLL_S)

    def _clear_rpc(self, server: Server, notes: list[str]) -> None:
        """Empty the server's IPC socket directory once its processes are gone (one it chose, never the
        user's); what was removed or left goes into the teardown's notes."""
        path = self._own_rpc_dir(server.spec)
        if path is None:
            return
        removed, left = clear_rpc_dir(path)
        if removed:
            notes.append(f"removed {removed} IPC socket(s) the server left in {path}")
        if left:
            notes.append(left)

    def _wait_port_free(self, spec: LaunchSpec, budget_s: float) -> bool:
        deadline = self._clock() + budget_s
        while self._procs.port_in_use(spec.bind_host, spec.port):
            if self._clock() >= deadline:
                return False
            self._sleep(TEARDOWN_POLL_S)
        return True

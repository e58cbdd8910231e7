"""The launcher: start a server from a launch spec, wait until it is ready, watch it, tear it down completely.

Pipeline position: between the launch spec (:mod:`launch.spec`) and the load runner. The sweep calls
:meth:`Supervisor.launch` per candidate, :meth:`Supervisor.check` while load runs and
:meth:`Supervisor.teardown` after; rollback calls :meth:`Supervisor.adopt` on the pids the journal recorded.
Processes go through :mod:`launch.process`, HTTP through an injectable httpx transport, GPUs through
:mod:`launch.nvml` (the release wait: :mod:`launch.gpu_release`), time through injected ``clock`` /
``sleep``; the program, environment and API key a spec runs with are :mod:`launch.command`, a failed
start's class and record :mod:`launch.failures`. The concerns it puts together have a module each:
which servers it knows and whether each still lives (:mod:`launch.tracking`), the server's API
(:mod:`launch.readiness`), the watcher's rules (:mod:`launch.watch`) and the teardown
(:mod:`launch.teardown`)::

    sup = Supervisor()
    server, record = sup.launch(spec, Path("sweeps/x/candidates/baseline/server.log"))
    if server is None:
        print(record.kind, record.matched_line)   # 'bad-args', "error: unrecognized arguments: --x"
    ...
    sup.check(server)                             # [] while healthy; [WatchEvent(kind='died', ...)]
    sup.teardown(server)                          # TeardownRecord(signal_sequence=['SIGTERM'], survivors=[])

Ready = the process is alive (and every follower of a multi-node server) AND ``GET /health`` is 200 AND
``GET /v1/models`` lists the served model.
Dead = the process is gone, is a zombie, or its pid now belongs to a process with another create time.
Torn down = no process of the tree (descendants and process-group members, tracked by pid and create time)
is left, the port is free and, on NVIDIA hosts, GPU memory is back to its pre-launch level.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import httpx
from tenacity import RetryError, Retrying, retry_if_exception_type

from contracts.errors import LaunchError, PortInUseError, StartupFailure, TeardownError
from contracts.paths import PROJECT_ROOT
from contracts.results import StartupRecord, TeardownRecord, WatchEvent
from launch.command import RPC_BASE_ENV, child_env, clear_rpc_dir, resolve_argv, rpc_dir, sets_rpc_dir
from launch.failures import (
    DEFAULT_PATTERNS,
    FailurePattern,
    classify,
    read_log_tail,
    startup_failure,
    startup_record,
)
from launch.gpu_release import GPU_TOLERANCE_GIB, GpuRelease
from launch.netif import head_address
from launch.node_agent import NODE_ENV, TAG_ENV, AgentGpu
from launch.nodecheck import NodeChecker, NodesTeardown, checker_for, first_processes
from launch.nodes import NodeLauncher, SlurmNodes, node_launcher
from launch.nvml import GpuProbe, NvmlProbe
from launch.process import PopenSpawner, Processes, PsutilProcesses, Spawner
from launch.ray_cluster import is_ray, launch_argv, stop_ray
from launch.ray_head import NODE_NAMES_ENV
from launch.readiness import HTTP_TIMEOUT_S, Exited, NotReady, ServerApi, poll_wait_s, ready_once
from launch.spec import LaunchSpec, resolve_head
from launch.stopped import StoppedLook
from launch.teardown import PORT_WAIT_S, TEARDOWN_POLL_S, Ended, Teardown
from launch.tracking import NodeProcess, Server, Tracked, Tracker, same_process
from launch.watch import HUNG_AFTER_S, Watcher, utc

#: What callers import from here: the supervisor, the server record, the timeouts they pass or wait on.
__all__ = ["DEFAULT_RPC_ROOT", "HTTP_TIMEOUT_S", "HUNG_AFTER_S", "POLL_INTERVAL_S", "Server", "Supervisor"]

POLL_INTERVAL_S = 0.5  # the longest wait between readiness polls (launch.readiness.poll_wait_s)
#: The temp dir each server's IPC socket directory goes under (launch.command.rpc_dir).
DEFAULT_RPC_ROOT = Path(tempfile.gettempdir())


class Supervisor:
    """Starts, watches and stops vLLM-like servers; every side effect goes through an injected seam."""

    def __init__(
        self,
        *,
        spawner: Spawner | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
        gpu: GpuProbe | None = None,
        project_root: Path = PROJECT_ROOT,
        patterns: Sequence[FailurePattern] = DEFAULT_PATTERNS,
        processes: Processes | None = None,
        wall_clock: Callable[[], float] = time.time,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        environ: Mapping[str, str] | None = None,
        poll_interval_s: float = POLL_INTERVAL_S,
        gpu_tolerance_gib: float = GPU_TOLERANCE_GIB,
        hung_after_s: float = HUNG_AFTER_S,
        rpc_root: Path | None = DEFAULT_RPC_ROOT,
        nodes: NodeLauncher | None = None,
        node_checker: Callable[[Sequence[tuple[int, str, str]]], NodeChecker] | None = None,
        ray_stop: Callable[[LaunchSpec, Sequence[tuple[int, str, str]]], list[str]] = stop_ray,
    ) -> None:
        self._spawn = spawner if spawner is not None else PopenSpawner()
        self._clock = clock
        self._sleep = sleep
        self._root = project_root
        self._patterns = tuple(patterns)
        self._procs = processes if processes is not None else PsutilProcesses()
        self._wall = wall_clock
        self._now = now
        self._environ = environ
        self._poll_s = poll_interval_s
        #: Where each server's IPC socket directory goes (launch.command.rpc_dir); None: vLLM's default.
        self._rpc_root = rpc_root
        #: Where a multi-node spec's followers run (None: decided from the environment at launch).
        self._nodes = nodes
        #: The per-node check of a multi-node server (None: its SLURM job's nodes, or this machine).
        self._node_checker = node_checker
        #: Teardown's `ray stop` on each node of a Ray candidate (launch.ray_cluster.stop_ray).
        self._stop_ray = ray_stop
        #: Each node's GPUs before a multi-node server on a GPU host started, by the head's (pid, start).
        self._nodes_gpus_before: dict[tuple[int, float], dict[str, list[AgentGpu]]] = {}
        self._nodes_teardown = NodesTeardown(clock=clock, sleep=sleep)
        #: Things said once per supervisor (e.g. "no NVIDIA driver (...)"), for the run record.
        self.notes: list[str] = []
        self._gpu = GpuRelease(
            gpu if gpu is not None else NvmlProbe(),
            clock=clock,
            sleep=sleep,
            tolerance_gib=gpu_tolerance_gib,
            min_poll_s=TEARDOWN_POLL_S,
            once_notes=self.notes,
        )
        self._tracker = Tracker(self._procs, clock=clock, sleep=sleep)
        self._api = ServerApi(transport, self._env)
        # a follower alive but stopped is hung; on SLURM its own node's agent is asked, not every node's
        stopped = StoppedLook(self._procs, lambda nodes: self._checker(nodes, only_named=True), clock)
        self._watcher = Watcher(
            self._tracker, self._procs, self.health, clock=clock, now=now, hung_after_s=hung_after_s,
            stopped=stopped,
        )  # fmt: skip
        self._teardown = Teardown(
            self._tracker, self._procs, self._gpu, own_rpc_dir=self._own_rpc_dir, clock=clock, sleep=sleep
        )
        #: The record of the latest teardown, including the one wait_ready does after a failed startup.
        self.last_teardown: TeardownRecord | None = None

    def server_groups(self) -> set[int]:
        """The process groups of the servers this supervisor started or adopted (the GPU meter's own)."""
        return self._tracker.pids()

    def start(self, spec: LaunchSpec, log_path: Path) -> Server:
        """Spawn the server in its own session; refuses when the port is taken (naming the holder).

        A multi-node spec's head starts here and each follower on its node (:mod:`launch.nodes`), with the
        head's address in place of the spec's placeholder; a follower logs beside the head
        (:func:`follower_log`)."""
        self._refuse_taken_port(spec)
        nodes = self._node_launcher(spec)
        head = head_address(spec.interface, nodes.head_address) if nodes is not None else ""
        launched = launch_argv(spec)  # a Ray spec's head starts Ray's head first (launch.ray_head)
        argv = resolve_argv(resolve_head(launched, head) if nodes is not None else launched, self._root)
        env = child_env(spec, self._env)
        env[TAG_ENV] = str(spec.port)  # each node's check finds the server's processes by it (node_agent)
        names = nodes.names(spec.nodes) if nodes is not None else []
        if names:
            # and the node they run on: the head's, also for a follower's local srun (the SLURM task on the
            # follower's node gets its own: `env` in front of its command, launch.nodes.SlurmNodes.command)
            env[NODE_ENV] = names[0]
            env[NODE_NAMES_ENV] = ",".join(names)  # a Ray head names a node that never joined (ray_head)
        rpc = self._prepare_rpc_dir(spec)
        if rpc is not None:
            env[RPC_BASE_ENV] = str(rpc)
        gpu_before = self._gpu.snapshot()
        nodes_before = self._nodes_gpus(spec, names, nodes)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("a") as log:
            log.write(f"# gauntlet: {utc(self._now())} starting {spec.candidate}: {spec.command_line()}\n")
            if rpc is not None:
                log.write(f"# gauntlet: {RPC_BASE_ENV}={rpc} (vLLM's IPC sockets; emptied at teardown)\n")
        started_at = self._wall()
        started_mono = self._clock()
        try:
            child = self._spawn(
                argv, env=env, cwd=self._root, log_path=log_path, autogroup_nice=spec.autogroup_nice
            )
        except OSError as exc:
            if rpc is not None:  # no server, so no socket: the directory made for it goes too
                clear_rpc_dir(rpc)
            raise LaunchError(
                f"could not start {argv[0]}: {exc}", hint="check host.entrypoint and the file's permissions"
            ) from exc
        server = self._server_of(child.pid, spec, log_path, started_at)
        self._tracker.add(server, Tracked(child, started_mono, gpu_before))
        if nodes_before:
            self._nodes_gpus_before[(server.pid, server.create_time)] = nodes_before
        if nodes is None:
            return server
        followers: list[Server] = []
        try:
            for node in range(1, spec.nodes):
                followers.append(
                    self._start_follower(server, nodes, node, names[node], address=head, env=env)
                )
        except BaseException:
            self.teardown(replace(server, followers=tuple(followers)))
            raise
        return replace(server, followers=tuple(followers), node_name=names[0])

    def _node_launcher(self, spec: LaunchSpec) -> NodeLauncher | None:
        if spec.nodes == 1:
            return None
        return self._nodes if self._nodes is not None else node_launcher(spec.host_kind, self._env)

    def _start_follower(
        self, head: Server, nodes: NodeLauncher, node: int, name: str, *, address: str, env: dict[str, str]
    ) -> Server:
        spec = head.spec
        argv = resolve_argv(resolve_head(spec.node_argv(node), address), self._root)
        command = nodes.command(argv, node, spec.port)
        log_path = follower_log(head.log_path, node)
        with log_path.open("a") as log:
            log.write(f"# gauntlet: {utc(self._now())} starting node {node} ({name}) of {spec.candidate}: "
                      f"{' '.join(command)}\n")  # fmt: skip
        started_at, started_mono = self._wall(), self._clock()
        try:
            child = self._spawn(
                command, env=env, cwd=self._root, log_path=log_path, autogroup_nice=spec.autogroup_nice
            )
        except OSError as exc:
            what = f"could not start node {node} of {spec.candidate} ({command[0]}): {exc}"
            raise LaunchError(what) from exc
        follower = replace(
            self._server_of(child.pid, spec, log_path, started_at),
            node=node,
            node_name=name,
            slurm_job=nodes.job_id if isinstance(nodes, SlurmNodes) else "",
        )
        self._tracker.add(follower, Tracked(child, started_mono, None))
        return follower

    def _server_of(self, pid: int, spec: LaunchSpec, log_path: Path, started_at: float) -> Server:
        """The process just spawned as a :class:`Server`: its group and start time as the process table
        has them (the spawn's own pid and clock when it cannot say)."""
        info, pgid = self._procs.info(pid), self._procs.pgid(pid)
        return Server(
            spec=spec,
            pid=pid,
            pgid=pgid if pgid is not None else pid,
            create_time=info.create_time if info is not None else started_at,
            log_path=log_path,
            started_at=started_at,
        )

    @property
    def _env(self) -> Mapping[str, str]:
        """gauntlet's environment the servers' environments are made from (injected in tests)."""
        return self._environ if self._environ is not None else os.environ

    def _own_rpc_dir(self, spec: LaunchSpec) -> Path | None:
        """The IPC socket directory the supervisor manages for a server of ``spec``; None where it manages
        none or the spec or host chose one (the user's, never emptied)."""
        if self._rpc_root is None or sets_rpc_dir(spec, self._env):
            return None
        return rpc_dir(self._rpc_root, spec.port)

    def _prepare_rpc_dir(self, spec: LaunchSpec) -> Path | None:
        """The server's own IPC socket directory, created (mode 0700); None as :meth:`_own_rpc_dir`, or
        where it cannot be created (vLLM's default then, said once).

        Sockets already there were left by an earlier server on this port that something else stopped (a
        ``kill``, a reboot): the port is free, so that server no longer serves; they are removed first, so
        a port's directory never holds more than its live server's sockets."""
        path = self._own_rpc_dir(spec)
        if path is None:
            return None
        stale, left = clear_rpc_dir(path)
        if stale:
            self.notes.append(
                f"removed {stale} IPC socket(s) an earlier server on port {spec.port} left in {path}"
            )
        if left is not None:  # a socket that could not go, or files that are not sockets
            self._say_once(f"before starting on port {spec.port}: {left}")
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            self._say_once(f"{RPC_BASE_ENV} left to vLLM: could not create {path} ({exc.strerror or exc})")
            return None
        return path

    def _say_once(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)

    def _refuse_taken_port(self, spec: LaunchSpec) -> None:
        if not self._procs.port_in_use(spec.bind_host, spec.port):
            return
        holders = self._procs.port_holders(spec.port)
        named = ", ".join(h.describe() for h in holders) if holders else "a process gauntlet cannot see"
        raise PortInUseError(
            f"port {spec.port} on {spec.bind_host} is already taken by {named}; "
            f"{spec.candidate} was not started",
            evidence=[h.describe() for h in holders],
            hint=(
                "stop that process, or set service.port to a free port; if gauntlet started it, "
                "`python -m orchestrator status` names the sweep that answers for it"
            ),
        )

    # ---------------------------------------------------------------- ready

    def wait_ready(self, server: Server, timeout_s: float | None = None) -> float:
        """Seconds from spawn to ready; raises a classified StartupFailure (after tearing the server down)."""
        tracked = self._tracker.track(server)
        start = tracked.started_mono if tracked.started_mono is not None else self._clock()
        budget = server.spec.startup_timeout_s if timeout_s is None else timeout_s
        deadline = start + budget
        with self._api.client(server, HTTP_TIMEOUT_S) as client:
            retrying = Retrying(
                stop=lambda _state: self._clock() >= deadline,
                wait=lambda _state: poll_wait_s(self._clock() - start, self._poll_s),
                sleep=self._sleep,
                retry=retry_if_exception_type(NotReady),
                reraise=False,
            )
            try:
                retrying(self._ready_once, server, client)
            except FollowerExited as gone:
                code = self._tracker.await_exit_code(gone.follower)
                self._fail(server, code, timed_out=False, start=start, quoting=gone.follower)
            except Exited as exited:
                code = (
                    exited.exit_code
                    if exited.exit_code is not None
                    else self._tracker.await_exit_code(server)
                )
                self._fail(server, code, timed_out=False, start=start)
            except RetryError:
                exit_code = self._tracker.exit_code(server)
                self._fail(server, exit_code, timed_out=not self._tracker.gone(server), start=start)
        return self._clock() - start

    def _ready_once(self, server: Server, client: httpx.Client) -> None:
        """One readiness poll: every follower still runs (else :class:`FollowerExited`), then the head's."""
        for follower in server.followers:
            if self._tracker.gone(follower):
                raise FollowerExited(follower)
        ready_once(server, client, self._tracker)

    def _fail(
        self,
        server: Server,
        exit_code: int | None,
        *,
        timed_out: bool,
        start: float,
        quoting: Server | None = None,
    ) -> None:
        """Tear the server down and raise its classified failure, quoting ``quoting``'s log (a follower
        that died) or the head's."""
        elapsed = self._clock() - start
        log_path = (quoting or server).log_path
        verdict = classify(exit_code, read_log_tail(log_path), self._patterns, timed_out=timed_out)
        self.teardown(server)
        candidate = server.spec.candidate
        if quoting is not None:
            candidate = f"{candidate}'s node {quoting.node} ({quoting.node_name or 'follower'})"
        raise startup_failure(candidate, log_path, verdict, exit_code, elapsed)

    def launch(self, spec: LaunchSpec, log_path: Path) -> tuple[Server | None, StartupRecord]:
        """start + wait_ready; a startup failure becomes a record (PortInUseError still raises)."""
        server = self.start(spec, log_path)
        try:
            ready_s = self.wait_ready(server)
        except StartupFailure as failure:
            return None, startup_record(failure)
        return server, startup_record(ready_s)

    # ---------------------------------------------------------------- watch

    def check(self, server: Server, *, timeout_s: float = HTTP_TIMEOUT_S) -> list[WatchEvent]:
        """New events since the last check: died, restarted, unhealthy (/health not 200), recovered, hung
        (alive, /health unanswered for ``hung_after_s``: nothing more is asked of it, teardown kills it).
        The rules are :class:`launch.watch.Watcher`'s."""
        return self._watcher.check(server, timeout_s=timeout_s)

    def is_hung(self, server: Server) -> bool:
        """The watcher declared the server hung (its teardown skips the grace period)."""
        return self._watcher.is_hung(server)

    def health(self, server: Server, timeout_s: float = HTTP_TIMEOUT_S) -> int | str:
        """``GET /health``: its status code, or why it could not be asked (the one /health probe)."""
        return self._api.health(server, timeout_s)

    def is_alive(self, server: Server) -> bool:
        return not self._tracker.gone(server)

    # ---------------------------------------------------------------- teardown

    def teardown(self, server: Server) -> TeardownRecord:
        """SIGTERM the group, wait the grace period, SIGKILL every survivor, then prove nothing is left
        (:class:`launch.teardown.Teardown`); raises TeardownError, with the record, when something is.

        A server the watcher found hung gets SIGKILL at once: a stopped (SIGSTOP) or wedged process cannot
        act on SIGTERM, and waiting its grace period would only keep the sweep waiting.
        """
        ended = self._teardown.run(server)
        self._watcher.set_state(self._tracker.track(server), "dead")
        refusal = self._teardown.refusal(server, ended)
        record = ended.record
        for follower in server.followers:  # after the head, as vLLM's followers outlive a lost head
            try:
                after = self._stop_follower(server, follower)
            except Exception as exc:  # one node's error never stops the others' teardown
                what = f"node {follower.node} ({follower.node_name}): its teardown failed: "
                what += f"{type(exc).__name__}: {exc}"
                record = record.model_copy(update={"notes": [*record.notes, what]})
                refusal = refusal or TeardownError(
                    f"teardown of {server.spec.candidate}: {what}", record=record
                )
                continue
            record = record.model_copy(
                update={
                    "survivors": [*record.survivors, *after.record.survivors],
                    "notes": [*record.notes, *(f"node {follower.node}: {n}" for n in after.record.notes)],
                }
            )
            refusal = refusal or self._teardown.refusal(follower, after)
        if is_ray(server.spec):  # every node's `ray stop`, as SLURM steps (launch.ray_cluster)
            job = next((f.slurm_job for f in server.followers if f.slurm_job), "")
            ray_nodes = [(p.node, p.node_name, job) for p in server.processes]
            record = record.model_copy(
                update={"notes": [*record.notes, *self._stop_ray(server.spec, ray_nodes)]}
            )
        rpc = server.spec.rpc_port
        if server.followers and rpc is not None and not self._rpc_port_free(rpc):
            holders = ", ".join(h.describe() for h in self._procs.port_holders(rpc)) or "an unknown process"
            record = record.model_copy(update={"port_free": False})
            refusal = refusal or TeardownError(
                f"teardown of {server.spec.candidate} left its ranks' port {rpc} taken by {holders}",
                record=record,
                evidence=[f"port {rpc} still taken by {holders}"],
                hint="stop that process by hand (kill -9 PID) before the next launch",
            )
        if server.followers:
            record, refusal = self._verify_nodes(server, record, refusal)
        self.last_teardown = record
        if refusal is not None:
            raise refusal
        return record

    def _stop_follower(self, server: Server, follower: Server) -> Ended:
        after = self._teardown.run(follower)
        if follower.slurm_job:  # a step whose remote tasks outlived the local srun
            cancelled = self.node_checker(server).cancel_steps(server.spec.port, server.spec.nodes)
            after.record.notes.extend(f"scancel {step}" for step in cancelled)
        return after

    def locate(self, server: Server) -> Server:
        """``server`` with each SLURM follower's process on its node (``node_pid``: the first of the
        server's processes its node's agent reports, :func:`launch.nodecheck.first_processes`); the local
        ``srun`` stays the follower's ``pid``, the handle teardown signals. Unchanged where no follower is
        a SLURM step (on this machine ``pid`` is the process) or a node cannot say (noted once)."""
        if not any(f.slurm_job for f in server.followers):
            return server
        results = self.node_checker(server).check(server.spec.port, [])
        for r in results:
            if r.error:
                self._say_once(f"{r.label}: its process not located: {r.error}")
        found = first_processes(results)
        return replace(server, followers=tuple(
            replace(f, node_pid=found[f.node_name].pid) if f.slurm_job and f.node_name in found else f
            for f in server.followers
        ))  # fmt: skip

    def node_checker(self, server: Server) -> NodeChecker:
        """The per-node check of ``server``'s nodes (:mod:`launch.nodecheck`)."""
        return self._checker([(p.node, p.node_name, p.slurm_job) for p in server.processes])

    def _checker(self, nodes: Sequence[tuple[int, str, str]], *, only_named: bool = False) -> NodeChecker:
        if self._node_checker is not None:
            return self._node_checker(nodes)
        return checker_for(nodes, self._root, only_named=only_named)

    def _nodes_gpus(
        self, spec: LaunchSpec, names: Sequence[str], nodes: NodeLauncher | None
    ) -> dict[str, list[AgentGpu]]:
        """Each node's GPUs before a multi-node server starts on a GPU host (what its teardown compares
        every node's GPU memory with); empty elsewhere, or where a node cannot say."""
        if nodes is None or spec.host_kind != "gpu":
            return {}
        job = nodes.job_id if isinstance(nodes, SlurmNodes) else ""
        results = self._checker([(k, name, job) for k, name in enumerate(names)]).check(spec.port, [])
        return {r.name: r.report.gpus for r in results if r.report is not None and r.report.gpus is not None}

    def _verify_nodes(
        self, server: Server, record: TeardownRecord, refusal: TeardownError | None
    ) -> tuple[TeardownRecord, TeardownError | None]:
        """Done only when SLURM lists none of the server's steps and every node's agent reports nothing
        of it left (:class:`launch.nodecheck.NodesTeardown`); what is left is named per node."""
        spec = server.spec
        others = [spec.rpc_port] if spec.rpc_port is not None else []
        before = self._nodes_gpus_before.get((server.pid, server.create_time))
        verdict = self._nodes_teardown.verify(
            self.node_checker(server), spec.port, others, spec.nodes, gpus_before=before
        )
        notes = [*record.notes, *verdict.notes]
        if verdict.done:
            notes.append(f"every node checked: nothing of {spec.candidate} left, no step listed")
            return record.model_copy(update={"notes": notes}), refusal
        record = record.model_copy(update={"notes": [*notes, *verdict.left]})
        return record, refusal or TeardownError(
            f"teardown of {spec.candidate} left {len(verdict.left)} thing(s) on its nodes",
            record=record,
            evidence=verdict.left,
            hint="stop them on that node by hand (kill -9 PID, scancel STEP) before the next launch",
        )

    def _rpc_port_free(self, port: int) -> bool:
        deadline = self._clock() + PORT_WAIT_S
        while self._procs.port_in_use("0.0.0.0", port):
            if self._clock() >= deadline:
                return False
            self._sleep(TEARDOWN_POLL_S)
        return True

    # ---------------------------------------------------------------- adopt

    def adopt(
        self,
        pid: int,
        pgid: int,
        create_time: float,
        spec: LaunchSpec,
        log_path: Path,
        *,
        followers: Sequence[NodeProcess] = (),
    ) -> Server | None:
        """A server an earlier run started (from the journal); None if it is gone or its pid was reused.

        A multi-node server's followers come along: each that still runs, and each SLURM step (whose
        remote tasks a teardown cancels even when the local ``srun`` is gone)."""
        info = self._procs.info(pid)
        if info is None or info.zombie or not same_process(info, create_time):
            return None
        nodes: list[Server] = []
        for follower in followers:
            alive = self._procs.info(follower.pid)
            if (alive is None or alive.zombie or not same_process(alive, follower.create_time)) and (
                not follower.slurm_job
            ):
                continue
            f = follower
            node = Server(spec=spec, pid=f.pid, pgid=f.pgid, create_time=f.create_time,
                          log_path=Path(f.log_path), started_at=f.create_time, node=f.node,
                          node_name=f.name, slurm_job=f.slurm_job, node_pid=f.node_pid)  # fmt: skip
            self._tracker.track(node)
            nodes.append(node)
        server = Server(spec=spec, pid=pid, pgid=pgid, create_time=info.create_time, log_path=log_path,
                        started_at=create_time, followers=tuple(nodes))  # fmt: skip
        self._tracker.track(server)
        return server

    def pids_of(self, server: Server) -> list[int]:
        """The pids of the server's trees now, every node's (for journals and tests)."""
        pids: list[int] = []
        for process in server.processes:
            tracked = self._tracker.track(process)
            self._teardown.collect(process, tracked)
            pids.extend(info.pid for info in self._teardown.survivors(process, tracked))
        return sorted(pids)


class FollowerExited(Exception):
    """Readiness poll: a follower node's process is gone (the start failed on that node)."""

    def __init__(self, follower: Server) -> None:
        super().__init__(follower.node)
        self.follower = follower


def follower_log(head_log: Path, node: int) -> Path:
    """Node ``node``'s log beside the head's: ``server.log`` -> ``server.node1.log``."""
    return head_log.with_name(f"{head_log.stem}.node{node}{head_log.suffix}")

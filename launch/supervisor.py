"""The launcher: start a server from a launch spec, wait until it is ready, watch it, tear it down completely.

Pipeline position: between the launch spec (:mod:`launch.spec`) and the load runner. The sweep calls
:meth:`Supervisor.launch` per candidate, :meth:`Supervisor.check` while load runs and
:meth:`Supervisor.teardown` after; rollback calls :meth:`Supervisor.adopt` on the pids the journal recorded.
Processes go through :mod:`launch.process`, HTTP through an injectable httpx transport, GPUs through
:mod:`launch.nvml` (the release wait: :mod:`launch.gpu_release`), time through injected ``clock`` /
``sleep``; the program, environment and API key a spec runs with are :mod:`launch.command`, a failed
start's class and record :mod:`launch.failures`::

    sup = Supervisor()
    server, record = sup.launch(spec, Path("sweeps/x/candidates/baseline/server.log"))
    if server is None:
        print(record.kind, record.matched_line)   # 'bad-args', "error: unrecognized arguments: --x"
    ...
    sup.check(server)                             # [] while healthy; [WatchEvent(kind='died', ...)]
    sup.teardown(server)                          # TeardownRecord(signal_sequence=['SIGTERM'], survivors=[])

Ready = the process is alive AND ``GET /health`` is 200 AND ``GET /v1/models`` lists the served model.
Dead = the process is gone, is a zombie, or its pid now belongs to a process with another create time.
Torn down = no process of the tree (descendants and process-group members, tracked by pid and create time)
is left, the port is free and, on NVIDIA hosts, GPU memory is back to its pre-launch level.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import httpx
from tenacity import RetryError, Retrying, retry_if_exception_type, wait_fixed

from contracts.errors import LaunchError, PortInUseError, StartupFailure, TeardownError
from contracts.paths import PROJECT_ROOT
from contracts.results import GpuMemory, StartupRecord, TeardownRecord, WatchEvent
from launch.command import (
    RPC_BASE_ENV,
    auth_headers,
    child_env,
    clear_rpc_dir,
    resolve_argv,
    rpc_dir,
    sets_rpc_dir,
)
from launch.failures import (
    DEFAULT_PATTERNS,
    FailurePattern,
    classify,
    death_cause,
    read_log_tail,
    startup_failure,
    startup_record,
)
from launch.gpu_release import GPU_TOLERANCE_GIB, GpuRelease
from launch.nvml import GpuProbe, NvmlProbe
from launch.process import Child, PopenSpawner, Processes, ProcInfo, PsutilProcesses, Spawner
from launch.spec import LaunchSpec

#: How long a server that is seen gone may take to hand over its exit code (see _await_exit_code).
EXIT_CODE_WAIT_S = 5.0

POLL_INTERVAL_S = 0.5  # readiness polls; process liveness is checked before every one
TEARDOWN_POLL_S = 0.2
KILL_WAIT_S = 10.0  # after SIGKILL, how long to wait for the tree to disappear
#: A live process whose /health has not answered (no status at all: a timeout, a refused or reset
#: connection) for this long is ``hung``. With the watcher's 1 s interval and the 5 s probe timeout a
#: hang is declared at most 12 s after it began (two unanswered probes, the second ending 11 s after
#: the first began); a 503 is an answer (``unhealthy``), never a hang.
HUNG_AFTER_S = 10.0
PORT_WAIT_S = 5.0  # after the tree is gone, how long to wait for the port to be released
HTTP_TIMEOUT_S = 5.0
#: The temp dir each server's IPC socket directory goes under (launch.command.rpc_dir).
DEFAULT_RPC_ROOT = Path(tempfile.gettempdir())


@dataclass(frozen=True)
class Server:
    """A server this program started or adopted: enough to find, watch and stop it again."""

    spec: LaunchSpec
    pid: int
    pgid: int
    create_time: float  # seconds after boot it started (ProcInfo.create_time): guards against pid reuse
    log_path: Path
    started_at: float  # time.time() at spawn

    @property
    def base_url(self) -> str:
        return self.spec.base_url


@dataclass
class _Watch:
    """What :meth:`Supervisor.check` last reported about one server."""

    state: Literal["healthy", "unhealthy", "dead", "hung"] = "healthy"
    #: Monotonic time the first of the current run of unanswered /health probes began (None: answered).
    silent_since: float | None = None


@dataclass
class _Tracked:
    """Per-server bookkeeping the frozen :class:`Server` does not carry."""

    child: Child | None  # None for an adopted server: not our child, no exit code
    started_mono: float | None
    gpu_before: list[GpuMemory] | None
    tree: dict[tuple[int, float], ProcInfo] = field(default_factory=dict)
    watch: _Watch = field(default_factory=_Watch)
    exit_code: int | None = None


class _NotReady(Exception):
    """Readiness poll: not yet (retried until the deadline)."""


class _Exited(Exception):
    """Readiness poll: the process is gone (not retried)."""

    def __init__(self, exit_code: int | None) -> None:
        super().__init__(exit_code)
        self.exit_code = exit_code


def _utc(now: datetime) -> str:
    return now.astimezone(UTC).isoformat(timespec="milliseconds")


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
    ) -> None:
        self._spawn = spawner if spawner is not None else PopenSpawner()
        self._clock = clock
        self._sleep = sleep
        self._transport = transport
        self._root = project_root
        self._patterns = tuple(patterns)
        self._procs = processes if processes is not None else PsutilProcesses()
        self._wall = wall_clock
        self._now = now
        self._environ = environ
        self._poll_s = poll_interval_s
        self._hung_after_s = hung_after_s
        #: Where each server's IPC socket directory goes (launch.command.rpc_dir); None: vLLM's default.
        self._rpc_root = rpc_root
        self._tracked: dict[tuple[int, float], _Tracked] = {}
        self._lock = threading.Lock()
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
        #: The record of the latest teardown, including the one wait_ready does after a failed startup.
        self.last_teardown: TeardownRecord | None = None

    # ---------------------------------------------------------------- start

    def start(self, spec: LaunchSpec, log_path: Path) -> Server:
        """Spawn the server in its own session; refuses when the port is taken (naming the holder)."""
        self._refuse_taken_port(spec)
        argv = resolve_argv(spec.argv, self._root)
        env = child_env(spec, self._env)
        rpc = self._prepare_rpc_dir(spec)
        if rpc is not None:
            env[RPC_BASE_ENV] = str(rpc)
        gpu_before = self._gpu.snapshot()
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("a") as log:
            log.write(f"# gauntlet: {_utc(self._now())} starting {spec.candidate}: {spec.command_line()}\n")
            if rpc is not None:
                log.write(f"# gauntlet: {RPC_BASE_ENV}={rpc} (vLLM's IPC sockets; emptied at teardown)\n")
        started_at = self._wall()
        started_mono = self._clock()
        try:
            child = self._spawn(argv, env=env, cwd=self._root, log_path=log_path)
        except OSError as exc:
            if rpc is not None:  # no server, so no socket: the directory made for it goes too
                clear_rpc_dir(rpc)
            raise LaunchError(
                f"could not start {argv[0]}: {exc}", hint="check host.entrypoint and the file's permissions"
            ) from exc
        info = self._procs.info(child.pid)
        pgid = self._procs.pgid(child.pid)
        server = Server(
            spec=spec,
            pid=child.pid,
            pgid=pgid if pgid is not None else child.pid,
            create_time=info.create_time if info is not None else started_at,
            log_path=log_path,
            started_at=started_at,
        )
        self._tracked[(server.pid, server.create_time)] = _Tracked(child, started_mono, gpu_before)
        return server

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
                "stop that process (if gauntlet started it: python -m orchestrator rollback), "
                "or set service.port to a free port"
            ),
        )

    # ---------------------------------------------------------------- ready

    def wait_ready(self, server: Server, timeout_s: float | None = None) -> float:
        """Seconds from spawn to ready; raises a classified StartupFailure (after tearing the server down)."""
        tracked = self._track(server)
        start = tracked.started_mono if tracked.started_mono is not None else self._clock()
        budget = server.spec.startup_timeout_s if timeout_s is None else timeout_s
        deadline = start + budget
        with self._client(server, HTTP_TIMEOUT_S) as client:
            retrying = Retrying(
                stop=lambda _state: self._clock() >= deadline,
                wait=wait_fixed(self._poll_s),
                sleep=self._sleep,
                retry=retry_if_exception_type(_NotReady),
                reraise=False,
            )
            try:
                retrying(self._ready_once, server, client)
            except _Exited as exited:
                code = exited.exit_code if exited.exit_code is not None else self._await_exit_code(server)
                self._fail(server, code, timed_out=False, start=start)
            except RetryError:
                exit_code = self._exit_code(server)
                self._fail(server, exit_code, timed_out=not self._gone(server), start=start)
        return self._clock() - start

    def _ready_once(self, server: Server, client: httpx.Client) -> None:
        if self._gone(server):
            raise _Exited(self._exit_code(server))
        try:
            health = client.get("/health")
            if health.status_code != 200:
                raise _NotReady(f"/health {health.status_code}")
            models = client.get("/v1/models")
            if models.status_code != 200:
                raise _NotReady(f"/v1/models {models.status_code}")
            ids = [item.get("id") for item in models.json().get("data", [])]
        except (httpx.TransportError, ValueError, AttributeError) as exc:
            raise _NotReady(str(exc)) from exc
        if server.spec.served_model_name not in ids:
            raise _NotReady(f"/v1/models lists {ids}, not {server.spec.served_model_name!r}")

    def _fail(self, server: Server, exit_code: int | None, *, timed_out: bool, start: float) -> None:
        elapsed = self._clock() - start
        verdict = classify(exit_code, read_log_tail(server.log_path), self._patterns, timed_out=timed_out)
        self.teardown(server)
        raise startup_failure(server.spec.candidate, server.log_path, verdict, exit_code, elapsed)

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
        (alive, /health unanswered for ``hung_after_s``: nothing more is asked of it, teardown kills it)."""
        tracked = self._track(server)
        with self._lock:
            state = tracked.watch.state
        if state in ("dead", "hung"):
            return []
        if self._gone(server):
            code = self._exit_code(server)
            detail = f"server pid {server.pid} exited" + (f" with code {code}" if code is not None else "")
            cause = death_cause(code, read_log_tail(server.log_path))
            if cause is not None:
                detail += f"; {cause}"
            events = [self._event("died", detail)]
            status = self.health(server, timeout_s)
            if status == 200:
                holders = ", ".join(h.describe() for h in self._procs.port_holders(server.spec.port))
                events.append(
                    self._event("restarted", f"port {server.spec.port} answers /health again: {holders}")
                )
            self._set_state(tracked, "dead")
            return events
        asked = self._clock()
        status = self.health(server, timeout_s)
        if isinstance(status, str):  # no answer at all: a hang when it lasts
            silent = tracked.watch.silent_since = tracked.watch.silent_since or asked
            if self._clock() - silent >= self._hung_after_s and not self._gone(server):
                self._set_state(tracked, "hung")
                events = [] if state == "unhealthy" else [self._unhealthy(server, status)]
                return [*events, self._hung(server, self._clock() - silent, status)]
        else:
            tracked.watch.silent_since = None
        if status == 200:
            if state == "unhealthy":
                self._set_state(tracked, "healthy")
                return [self._event("recovered", "/health is 200 again")]
            return []
        if state == "healthy":
            self._set_state(tracked, "unhealthy")
            return [self._unhealthy(server, status)]
        return []

    def _unhealthy(self, server: Server, status: int | str) -> WatchEvent:
        said = f"returned {status}" if isinstance(status, int) else f"failed: {status}"
        return self._event("unhealthy", f"/health {said} while pid {server.pid} is alive")

    def _hung(self, server: Server, silent_s: float, status: str) -> WatchEvent:
        info = self._procs.info(server.pid)
        state = info.state if info is not None else ""
        return self._event(
            "hung",
            f"pid {server.pid} is alive{f' ({state})' if state else ''} but /health has not answered "
            f"for {silent_s:.1f} s (last: {status}); the server is killed",
        )

    def is_hung(self, server: Server) -> bool:
        """The watcher declared the server hung (its teardown skips the grace period)."""
        with self._lock:
            return self._track(server).watch.state == "hung"

    def _set_state(self, tracked: _Tracked, state: Literal["healthy", "unhealthy", "dead", "hung"]) -> None:
        with self._lock:
            tracked.watch.state = state

    def _event(
        self, kind: Literal["died", "hung", "restarted", "unhealthy", "recovered"], detail: str
    ) -> WatchEvent:
        return WatchEvent(at=_utc(self._now()), kind=kind, detail=detail)

    def _client(self, server: Server, timeout_s: float) -> httpx.Client:
        """A client of the server's API: the injected transport, its API key, no proxy from the env."""
        return httpx.Client(
            base_url=server.base_url,
            transport=self._transport,
            timeout=timeout_s,
            trust_env=False,
            headers=auth_headers(server.spec, self._env),
        )

    def health(self, server: Server, timeout_s: float = HTTP_TIMEOUT_S) -> int | str:
        """``GET /health``: its status code, or why it could not be asked (the one /health probe)."""
        try:
            with self._client(server, timeout_s) as client:
                return client.get("/health").status_code
        except httpx.TransportError as exc:
            return f"{type(exc).__name__}: {exc}"

    # ---------------------------------------------------------------- liveness

    def _track(self, server: Server) -> _Tracked:
        key = (server.pid, server.create_time)
        if key not in self._tracked:
            self._tracked[key] = _Tracked(None, None, None)
        return self._tracked[key]

    def _gone(self, server: Server) -> bool:
        """The server's own process is gone: exited (reaped or zombie) or its pid was reused."""
        tracked = self._track(server)
        if tracked.child is not None and tracked.exit_code is None:
            tracked.exit_code = tracked.child.poll()
            if tracked.exit_code is not None:
                return True
        info = self._procs.info(server.pid)
        return info is None or info.zombie or not _same_start(info.create_time, server.create_time)

    def _await_exit_code(self, server: Server, within_s: float = EXIT_CODE_WAIT_S) -> int | None:
        """The exit code of a server seen gone before it could be reaped, waiting up to ``within_s``.

        psutil reports a process whose main thread has exited as a zombie while its other threads still
        shut down (vLLM's API server does this after an engine failure); ``waitpid`` has no code for it
        until the last thread is gone. Classifying without the code would lose it from the record.
        """
        deadline = self._clock() + within_s
        code = self._exit_code(server)
        while code is None and self._track(server).child is not None and self._clock() < deadline:
            self._sleep(min(0.1, within_s))
            code = self._exit_code(server)
        return code

    def _exit_code(self, server: Server) -> int | None:
        tracked = self._track(server)
        if tracked.child is not None and tracked.exit_code is None:
            tracked.exit_code = tracked.child.poll()
        return tracked.exit_code

    def is_alive(self, server: Server) -> bool:
        return not self._gone(server)

    # ---------------------------------------------------------------- teardown

    def _collect(self, server: Server, tracked: _Tracked) -> None:
        """Add every current member of the server's tree to the tracked set (by pid and create time)."""
        members: list[ProcInfo] = []
        if not self._gone(server):
            root = self._procs.info(server.pid)
            if root is not None:
                members.append(root)
            members.extend(self._procs.descendants(server.pid))
        members.extend(self._procs.group_members(server.pgid))
        for info in members:
            tracked.tree.setdefault(info.key, info)

    def _survivors(self, server: Server, tracked: _Tracked) -> list[ProcInfo]:
        self._exit_code(server)  # reap our own child so it does not linger as a zombie
        self._collect(server, tracked)
        alive = []
        for key, info in tracked.tree.items():
            now = self._procs.info(key[0])
            if now is not None and not now.zombie and _same_start(now.create_time, key[1]):
                alive.append(info)
        return alive

    def _wait_gone(self, server: Server, tracked: _Tracked, budget_s: float) -> list[ProcInfo]:
        deadline = self._clock() + budget_s
        while True:
            alive = self._survivors(server, tracked)
            if not alive or self._clock() >= deadline:
                return alive
            self._sleep(TEARDOWN_POLL_S)

    def teardown(self, server: Server) -> TeardownRecord:
        """SIGTERM the group, wait the grace period, SIGKILL every survivor, then prove nothing is left.

        A server the watcher found hung gets SIGKILL at once: a stopped (SIGSTOP) or wedged process cannot
        act on SIGTERM, and waiting its grace period would only keep the sweep waiting.
        """
        tracked = self._track(server)
        start = self._clock()
        signals: list[str] = []
        notes: list[str] = []
        self._collect(server, tracked)
        alive = self._survivors(server, tracked)
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
            alive = self._wait_gone(server, tracked, KILL_WAIT_S)
        self._exit_code(server)  # reap our own child if it died between two looks (a zombie counts as gone)
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
        with self._lock:
            tracked.watch.state = "dead"
        self.last_teardown = record
        if alive or not port_free:
            problems = [f"survivor: {info.describe()}" for info in alive]
            if not port_free:
                holders = self._procs.port_holders(server.spec.port)
                problems.append(
                    f"port {server.spec.port} still taken by "
                    + (", ".join(h.describe() for h in holders) or "an unknown process")
                )
            raise TeardownError(
                f"teardown of {server.spec.candidate} (pid {server.pid}) left {len(problems)} thing(s) "
                f"behind after {' then '.join(signals) or 'no signal'}",
                record=record,
                evidence=problems,
                hint="stop them by hand (kill -9 PID) and check the host before the next launch",
            )
        return record

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

    # ---------------------------------------------------------------- adopt

    def adopt(
        self, pid: int, pgid: int, create_time: float, spec: LaunchSpec, log_path: Path
    ) -> Server | None:
        """A server an earlier run started (from the journal); None if it is gone or its pid was reused."""
        info = self._procs.info(pid)
        if info is None or info.zombie or not _same_process(info, create_time):
            return None
        server = Server(spec=spec, pid=pid, pgid=pgid, create_time=info.create_time, log_path=log_path,
                        started_at=create_time)  # fmt: skip
        self._track(server)
        return server

    def pids_of(self, server: Server) -> list[int]:
        """The pids of the server's tree now (for journals and tests)."""
        tracked = self._track(server)
        self._collect(server, tracked)
        return sorted(info.pid for info in self._survivors(server, tracked))


def _same_start(a: float, b: float) -> bool:
    return abs(a - b) < 0.01


#: A recorded start time above this is an epoch (journals before start times were counted from boot).
_EPOCH_RECORD = 1e9


def _same_process(info: ProcInfo, recorded: float) -> bool:
    """``info`` is the process a journal recorded as started at ``recorded``."""
    if recorded > _EPOCH_RECORD:  # an older journal: match on the wall-clock start, to the second
        return abs(info.wall_start - recorded) < 1.0
    return _same_start(info.create_time, recorded)

"""The one module that touches OS processes: spawning servers, reading the process table, signalling.

Pipeline position: under :mod:`launch.supervisor`, which decides *when* to start, signal and verify; this
module only does it. Both seams are small protocols with real defaults (:class:`PopenSpawner`,
:class:`PsutilProcesses`) so the supervisor's tests pass fakes and never start, signal or sleep.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import psutil


@dataclass(frozen=True)
class ProcInfo:
    """One process as the process table shows it."""

    pid: int
    #: Seconds after boot the process started (see :func:`started_since_boot`): (pid, create_time)
    #: identifies a process across pid reuse, and a wall-clock step does not move it.
    create_time: float
    cmdline: tuple[str, ...]
    zombie: bool = False  # exited but not reaped: holds no memory, counts as gone
    wall_start: float = 0.0  # psutil's create_time (epoch seconds): only to match records made before
    state: str = ""  # psutil's status ("running", "sleeping", "stopped", ...): what a hung server was doing

    @property
    def key(self) -> tuple[int, float]:
        return (self.pid, self.create_time)

    def describe(self) -> str:
        command = " ".join(" ".join(self.cmdline).split()) or "<no command line>"  # setproctitle pads
        return f"pid {self.pid} ({command[:200]})"


class Child(Protocol):
    """A process this program spawned: it alone can read the exit code (and reap the zombie)."""

    pid: int

    def poll(self) -> int | None: ...


class Spawner(Protocol):
    """Starts a server in a new session with stdin closed and stdout+stderr appended to ``log_path``; with
    ``autogroup_nice``, gives that session's scheduling group this nice value (:func:`set_autogroup_nice`)
    and says so in the log."""

    def __call__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        log_path: Path,
        autogroup_nice: int | None = None,
    ) -> Child: ...


class Processes(Protocol):
    """Reads the process table and the port table, and sends signals."""

    def info(self, pid: int) -> ProcInfo | None:
        """The process with this pid now, or None if there is none."""

    def pgid(self, pid: int) -> int | None: ...

    def descendants(self, pid: int) -> list[ProcInfo]: ...

    def group_members(self, pgid: int) -> list[ProcInfo]: ...

    def signal_group(self, pgid: int, sig: signal.Signals) -> bool:
        """True if the group had a member to signal."""

    def signal(self, pid: int, sig: signal.Signals) -> bool:
        """True if the process existed."""

    def port_in_use(self, host: str, port: int) -> bool: ...

    def port_holders(self, port: int) -> list[ProcInfo]:
        """Processes listening on ``port`` (may be empty when the table cannot be read)."""


class _DetachedPopen(subprocess.Popen[bytes]):
    """A server handle that may be dropped while the server runs on purpose (the retained live service)."""

    def __del__(self) -> None:
        # Popen warns "subprocess N is still running"; for a server that is the design, not a leak.
        if self.returncode is None:
            with contextlib.suppress(OSError):
                self.poll()


class PopenSpawner:
    """The real spawner: ``subprocess.Popen`` with ``start_new_session=True``; no shell.

    The server is not tied to this process: it has its own session, so it survives the orchestrator's exit
    (the retained server is the live service) and a later run adopts it from the journal.
    """

    def __call__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        log_path: Path,
        autogroup_nice: int | None = None,
    ) -> Child:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            child = _DetachedPopen(  # the child keeps its own copy of the log descriptor
                list(argv),
                env=dict(env),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
            if autogroup_nice is not None:  # the session's group: its processes share it, forked ones too
                log.write(f"# gauntlet: {set_autogroup_nice(child.pid, autogroup_nice)}\n".encode())
        return child


def set_autogroup_nice(pid: int, nice: int, *, proc: Path = Path("/proc")) -> str:
    """Give the scheduling group of ``pid``'s session (Linux's autogroup) the nice value ``nice``; what
    happened, as one line for the server's log. Never raises: a kernel without autogroups, or a refusal
    (a negative value needs CAP_SYS_NICE), leaves the server as it is, and the line says why.

    Linux shares a CPU between sessions before it shares it between their threads, and a server started
    by gauntlet is a session of its own; the nice value weighs that whole session against the others.
    """
    where = proc / str(pid) / "autogroup"
    try:
        where.write_text(f"{nice}\n")
        now = where.read_text().strip()  # "/autogroup-123 nice 10"
    except OSError as exc:
        return f"host.server_autogroup_nice {nice} not applied to pid {pid}: {exc.strerror or exc} ({where})"
    try:
        enabled = (proc / "sys" / "kernel" / "sched_autogroup_enabled").read_text().strip()
    except OSError:
        enabled = ""
    if enabled == "0":
        return (
            f"host.server_autogroup_nice {nice} set ({now}) but without effect: the kernel's autogroups are "
            "off (kernel.sched_autogroup_enabled = 0)"
        )
    return f"scheduling group of pid {pid}'s session: {now} (host.server_autogroup_nice)"


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def started_since_boot(proc: psutil.Process) -> float:
    """When ``proc`` started, in seconds after boot.

    psutil's ``create_time`` is this plus the boot time, and the boot time is *derived from the wall
    clock* (``btime`` in /proc/stat), so an NTP step or a resumed VM moves every process's create_time
    at once: a server still running would then look like a different process (a CI run lost its
    retained server that way). The kernel's start tick count (field 22 of /proc/PID/stat) never moves.
    """
    try:
        with open(f"/proc/{proc.pid}/stat", "rb") as stat:
            raw = stat.read()
        return int(raw[raw.rindex(b")") + 2 :].split()[19]) / _CLOCK_TICKS
    except (OSError, ValueError, IndexError):  # not Linux (or the process is gone: psutil says which)
        return proc.create_time() - psutil.boot_time()


def _info(proc: psutil.Process) -> ProcInfo | None:
    try:
        with proc.oneshot():
            status = proc.status()
            zombie = status == psutil.STATUS_ZOMBIE
            try:
                cmdline = tuple(proc.cmdline())
            except (psutil.ZombieProcess, psutil.AccessDenied):
                cmdline = ()
            return ProcInfo(proc.pid, started_since_boot(proc), cmdline, zombie, proc.create_time(), status)
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None


class PsutilProcesses:
    """The real process table (psutil) and signals (``os.kill`` / ``os.killpg``)."""

    def info(self, pid: int) -> ProcInfo | None:
        try:
            return _info(psutil.Process(pid))
        except psutil.NoSuchProcess:
            return None

    def pgid(self, pid: int) -> int | None:
        try:
            return os.getpgid(pid)
        except ProcessLookupError:
            return None

    def descendants(self, pid: int) -> list[ProcInfo]:
        try:
            children = psutil.Process(pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        return [info for child in children if (info := _info(child)) is not None]

    def group_members(self, pgid: int) -> list[ProcInfo]:
        out: list[ProcInfo] = []
        for proc in psutil.process_iter():
            try:
                if os.getpgid(proc.pid) != pgid:
                    continue
            except ProcessLookupError:
                continue
            if (info := _info(proc)) is not None:
                out.append(info)
        return out

    def signal_group(self, pgid: int, sig: signal.Signals) -> bool:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return False
        return True

    def signal(self, pid: int, sig: signal.Signals) -> bool:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return False
        return True

    def port_in_use(self, host: str, port: int) -> bool:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            # SO_REUSEADDR as servers set it: a TIME_WAIT leftover does not count as taken.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError as exc:
                if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                    return True
                raise
        return False

    def port_holders(self, port: int) -> list[ProcInfo]:
        pids: set[int] = set()
        with contextlib.suppress(psutil.AccessDenied, PermissionError):
            for conn in psutil.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                    pids.add(conn.pid)
        return [info for pid in sorted(pids) if (info := self.info(pid)) is not None]


def capture(argv: Sequence[str], *, cwd: Path, timeout_s: float) -> tuple[int | None, str]:
    """Run a short command (a program's ``--help``) and return its exit code and output (stdout, then
    stderr); the code is None when it ran past ``timeout_s`` (it is killed)."""
    try:
        done = subprocess.run(
            list(argv), cwd=cwd, capture_output=True, text=True, timeout=timeout_s, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        return None, out
    return done.returncode, done.stdout + done.stderr

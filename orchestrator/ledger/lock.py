"""One sweep per service port on a host: an advisory lock the kernel releases when its holder dies.

Pipeline position: the orchestrator box; :class:`~orchestrator.app.controller.SweepController` takes the lock
before it opens a sweep and releases it when the process ends. Two sweeps on one port would stop each
other's retained server and measure each other's load, so the second refuses at once, naming the first's
sweep directory and pid. The lock is ``flock`` on ``<lock dir>/port-<port>.lock`` (``GAUNTLET_LOCK_DIR``,
else ``<tmp>/gauntlet-<uid>``): a crashed or SIGKILLed sweep holds nothing, and no pid is ever trusted
(the file's text only names the holder: its sweep directory, pid and role, for the message and for
``stop``/``rollback``, which reach a running sweep through it: :mod:`orchestrator.ledger.requests`).
``stop`` and ``rollback`` take the same lock (role ``stop``/``rollback``) while they act, waiting for a
running sweep of their directory to unwind first (:meth:`SweepLock.wait_acquire`). Example::

    with SweepLock.for_port(8000).held(sweep_dir):
        ...  # open, measure, restore
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from contracts.errors import SweepLockedError

LOCK_DIR_ENV = "GAUNTLET_LOCK_DIR"


def lock_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """Where the locks live: ``$GAUNTLET_LOCK_DIR``, else a per-user folder under the system's tmp."""
    configured = environ.get(LOCK_DIR_ENV)
    if configured:
        return Path(configured)
    return Path(tempfile.gettempdir()) / f"gauntlet-{os.getuid()}"


@dataclass(frozen=True)
class Holder:
    """Who holds a port's lock, as its file says: a sweep (``role`` "sweep") or ``stop``/``rollback``."""

    sweep_dir: str
    pid: int | None
    role: str = "sweep"

    def owns(self, sweep_dir: Path) -> bool:
        """The holder acts for ``sweep_dir`` (compared resolved; a deleted directory by its name)."""
        return self.sweep_dir == str(sweep_dir.resolve())


class SweepLock:
    """The lock of one service port (one open file description; held until released or the process ends)."""

    def __init__(self, path: Path, port: int) -> None:
        self.path = path
        self.port = port
        self._fd: int | None = None

    @classmethod
    def for_port(cls, port: int, directory: Path | None = None) -> SweepLock:
        base = directory if directory is not None else lock_dir()
        return cls(base / f"port-{port}.lock", port)

    @property
    def held_here(self) -> bool:
        return self._fd is not None

    def acquire(self, sweep_dir: Path, *, role: str = "sweep") -> None:
        """Take the lock for ``sweep_dir``; raise SweepLockedError naming the holder when another has it."""
        if self._fd is not None:
            return
        holder = self.try_acquire(sweep_dir, role=role)
        if holder is not None:
            where, pid = holder.sweep_dir or "an unknown sweep", holder.pid or "?"
            what = "another sweep is running" if holder.role == "sweep" else f"`{holder.role}` is acting"
            raise SweepLockedError(
                f"{what} on service port {self.port}: {where} (pid {pid})",
                holder=str(where),
                hint=f"wait for it to finish, or stop it with `python -m orchestrator stop {where}`; "
                f"one sweep per port at a time (lock {self.path})",
            )

    def try_acquire(self, sweep_dir: Path, *, role: str = "sweep") -> Holder | None:
        """Take the lock if it is free (None), else say who holds it (nothing is taken)."""
        if self._fd is not None:
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            return holder
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        record = {"sweep_dir": str(sweep_dir.resolve()), "pid": os.getpid(), "role": role}
        os.write(fd, json.dumps(record).encode())
        self._fd = fd
        return None

    def wait_acquire(
        self,
        sweep_dir: Path,
        *,
        role: str,
        timeout_s: float,
        poll_s: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Holder | None:
        """Take the lock once its holder lets go, within ``timeout_s``; the holder still there, if not."""
        deadline = clock() + timeout_s
        while True:
            holder = self.try_acquire(sweep_dir, role=role)
            if holder is None or clock() >= deadline:
                return holder
            sleep(poll_s)

    def release(self) -> None:
        """Let go (the file stays: removing it would race with a sweep that just opened it)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the only descriptor releases the flock

    @contextlib.contextmanager
    def held(self, sweep_dir: Path) -> Iterator[SweepLock]:
        self.acquire(sweep_dir)
        try:
            yield self
        finally:
            self.release()


def running_sweep(
    sweep_dir: Path, port: int, *, role: str = "status", directory: Path | None = None
) -> Holder | None:
    """The sweep of ``sweep_dir`` that runs now: it holds the port's lock as a sweep and its pid is alive
    (None: none runs, or the port is another's). ``status``, ``judge``, ``report`` and ``compare`` ask this
    before they read a sweep as finished.

    Asking takes the lock for an instant when it is free (``flock`` has no query); a sweep that starts in
    that instant is refused naming ``role``, and can simply be started again.
    """
    lock = SweepLock.for_port(port, directory)
    holder = lock.try_acquire(sweep_dir, role=role)
    if holder is None:
        lock.release()
        return None
    if not holder.owns(sweep_dir) or holder.role != "sweep" or holder.pid is None:
        return None
    return holder if _alive(holder.pid) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: it exists
    return True


def _read_holder(fd: int) -> Holder:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    pid = data.get("pid")
    return Holder(
        sweep_dir=str(data.get("sweep_dir") or ""),
        pid=pid if isinstance(pid, int) else None,
        role=str(data.get("role") or "sweep"),
    )

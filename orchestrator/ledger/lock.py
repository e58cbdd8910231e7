"""One sweep per service port on a host: an advisory lock the kernel releases when its holder dies.

Pipeline position: the orchestrator box; :class:`~orchestrator.app.controller.SweepController` takes the lock
before it opens a sweep and releases it when the process ends. Two sweeps on one port would stop each
other's retained server and measure each other's load, so the second refuses at once, naming the first's
sweep directory and pid. The lock is ``flock`` on ``<lock dir>/port-<port>.lock`` (``GAUNTLET_LOCK_DIR``,
else ``<tmp>/gauntlet-<uid>``): a crashed or SIGKILLed sweep holds nothing, and no pid is ever trusted
(the file's text only names the holder for the message). Example::

    with SweepLock.for_port(8000).held(sweep_dir):
        ...  # open, measure, restore
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from contracts.errors import SweepLockedError

LOCK_DIR_ENV = "GAUNTLET_LOCK_DIR"


def lock_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """Where the locks live: ``$GAUNTLET_LOCK_DIR``, else a per-user folder under the system's tmp."""
    configured = environ.get(LOCK_DIR_ENV)
    if configured:
        return Path(configured)
    return Path(tempfile.gettempdir()) / f"gauntlet-{os.getuid()}"


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

    def acquire(self, sweep_dir: Path) -> None:
        """Take the lock for ``sweep_dir``; raise SweepLockedError naming the holder when another has it."""
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            where, pid = holder.get("sweep_dir", "an unknown sweep"), holder.get("pid", "?")
            raise SweepLockedError(
                f"another sweep is running on service port {self.port}: {where} (pid {pid})",
                holder=str(where),
                hint=f"wait for it to finish, or stop it with `python -m orchestrator stop {where}`; "
                f"one sweep per port at a time (lock {self.path})",
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"sweep_dir": str(sweep_dir.resolve()), "pid": os.getpid()}).encode())
        self._fd = fd

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


def _read_holder(fd: int) -> dict[str, object]:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}

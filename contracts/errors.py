"""The one exception tree of gauntlet, and the exit code each kind maps to.

Pipeline position: a shared contract; every stage raises from this tree and foreign exceptions are
translated at the boundary (``raise LaunchError(...) from exc``). A message says what was observed, what
is allowed and what to do next, and carries its evidence. The exit code of the command line is the
class attribute ``exit_code`` (the one table; :func:`exit_code_for` reads it)::

    GauntletError                                                                       exit 1
    ├── ConfigError            a composed config is invalid (file, field, value, allowed)      2
    ├── SpecError              a launch spec cannot be rendered or read                        3
    │   └── SpecTamperedError  a recorded spec no longer matches its fingerprint               3
    ├── LaunchError            starting, watching or stopping a server failed                  4
    │   ├── PortInUseError     the port is held by another process (pid, command line)         4
    │   │   └── SweepLockedError  another sweep holds the service port's lock (its directory)  4
    │   ├── StartupFailure     the server never became ready (classified: bad-args, ...)       4
    │   ├── PreflightError     doctor found a problem that fails every candidate (the sweep     4
    │   │                      does not start; the live service is untouched)
    │   └── TeardownError      something of the server's tree or its port survived teardown    4
    ├── LoadError              the load runner could not run a profile                         5
    │   └── HarnessError       the load harness failed (bad workload data, a runner bug), not   5
    │       │                  the server: the candidate is INCOMPLETE, never blamed
    │       └── ClientPaused   the load client stood still mid-run (SIGSTOP, a VM pause): the   5
    │                          run is discarded and measured again
    ├── ResultFileError        a result file on disk fails validation                          6
    │   └── SweepDirError      the sweep directory cannot be written (full, read-only, EACCES,  6
    │                          EPERM, deleted): the sweep stops, the retained server restored
    ├── GateError              gates cannot be evaluated from the stored results               6
    ├── JournalError           the journal is unreadable or inconsistent                       7
    ├── RollbackError          the retained configuration could not be restored and validated  7
    │   └── PromotionError     the promoted candidate did not start or failed its validation   7
    │                          (the previous retained configuration was restored)
    ├── PromotionRefused       ``promote`` of a candidate that is not KEEP, or not the sweep's  2
    └── IncompleteSweep        judged, but some verdict is INCOMPLETE on evidence a resume      8
                               measures (an interrupted run, missing repeats, a dead baseline, a
                               harness fault); the report prints the resume command
    KeyboardInterrupt (Ctrl-C)                                                               130
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from contracts.secrets import redacted

if TYPE_CHECKING:  # results.py imports this module (ResultFileError); the record is only a type here
    from contracts.results import TeardownRecord

#: Exit code of a run stopped by Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130


class GauntletError(Exception):
    """Base of every error gauntlet raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None, evidence: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.evidence = list(evidence)

    def __str__(self) -> str:
        parts = [self.message]
        if self.evidence:
            parts.append("evidence:")
            parts.extend(f"  | {line}" for line in self.evidence)
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)


class ConfigError(GauntletError):
    """A composed configuration is invalid; nothing is started."""

    exit_code = 2

    def __init__(self, problems: Sequence[ConfigProblem], *, hint: str | None = None) -> None:
        self.problems = list(problems)
        lines = [f"invalid configuration ({len(self.problems)} problem{'s' if len(problems) != 1 else ''}):"]
        lines.extend(f"  - {p}" for p in self.problems)
        super().__init__("\n".join(lines), hint=hint or _config_hint(self.problems))


#: How a problem set on the command line names its place (``command-line override 'a.b=1'``).
COMMAND_LINE = "command-line override"


def _config_hint(problems: Sequence[ConfigProblem]) -> str:
    """What to fix: the command line, the files, or both (a value from the command line is not the file's)."""
    cli = sum(p.file.startswith(COMMAND_LINE) for p in problems)
    if problems and cli == len(problems):
        return "fix the command-line override named above; nothing was started"
    if cli:
        return "fix the files and command-line overrides named above; nothing was started"
    return "fix the file named above; nothing was started"


#: Field names whose values are secrets: shown masked in every message (``api_key_env`` names a variable).
_SECRET_FIELD = re.compile(r"(^|[._-])(api[_-]?key|token|secret|password|passwd)$", re.IGNORECASE)


def masked(value: str) -> str:
    """A secret as a message may show it: its length only."""
    return f"<secret, {len(value)} characters, not shown>"


class ConfigProblem:
    """One invalid value: where it is, what it is, what is allowed."""

    def __init__(self, file: str, field: str, value: object, allowed: str) -> None:
        if _SECRET_FIELD.search(field) and isinstance(value, str) and value and not value.startswith("<"):
            file = file.replace(value, masked(value))  # ``command-line override 'service.api_key=…'``
            value = masked(value)
            allowed += (
                "; a secret is never given literally: put it in an environment variable and name the "
                "variable (service.api_key_env, pass_env)"
            )
        self.file = redacted(file)  # a URL's password is never shown (contracts.secrets)
        self.field = field
        self.value = redacted(value) if isinstance(value, str) else value
        self.allowed = allowed

    def __str__(self) -> str:
        return f"{self.file}: {self.field} = {self.value!r}: {self.allowed}"

    def __repr__(self) -> str:
        return f"ConfigProblem({self})"


class SpecError(GauntletError):
    """A launch spec cannot be rendered or read."""

    exit_code = 3


class SpecTamperedError(SpecError):
    """A recorded launch spec does not match the fingerprint it was recorded with."""


class LaunchError(GauntletError):
    """Starting, watching or stopping a server failed."""

    exit_code = 4


class PortInUseError(LaunchError):
    """The server's port is already taken."""


class SweepLockedError(PortInUseError):
    """Another sweep on this host holds the lock of the service port; ``holder`` is its sweep directory."""

    def __init__(self, message: str, *, holder: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.holder = holder


class PreflightError(LaunchError):
    """The pre-flight checks (doctor) found a problem of the host or the baseline: nothing can start."""


class StartupFailure(LaunchError):
    """The server exited or timed out before it became ready; ``kind`` classifies why."""

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        exit_code: int | None = None,
        matched_line: str | None = None,
        evidence: Sequence[str] = (),
        hint: str | None = None,
        elapsed_s: float | None = None,
    ) -> None:
        super().__init__(message, hint=hint, evidence=evidence)
        self.kind = kind
        self.process_exit_code = exit_code
        self.matched_line = matched_line
        self.elapsed_s = elapsed_s


class TeardownError(LaunchError):
    """A process of the server's tree, or its port, survived teardown; ``record`` says what."""

    def __init__(
        self,
        message: str,
        *,
        record: TeardownRecord | None = None,
        evidence: Sequence[str] = (),
        hint: str | None = None,
    ) -> None:
        super().__init__(message, evidence=evidence, hint=hint)
        self.record = record


class LoadError(GauntletError):
    """A load profile could not be run."""

    exit_code = 5


class HarnessError(LoadError):
    """The load harness itself failed (bad workload data, an exception in the runner): not the server.

    The sweep records it as a ``harness`` watch event; the candidate's verdict is ``incomplete`` with
    this message, never a stability failure of the candidate."""


class ClientPaused(HarnessError):
    """The load client stood still while streams were in flight (SIGSTOP, a VM pause, swap): the run says
    nothing about the server; the sweep discards it and measures it again (:mod:`load.harness`)."""


class ResultFileError(GauntletError):
    """A result file on disk fails validation."""

    exit_code = 6


#: errno values that say the disk, not the candidate, failed: no space, read-only, quota, file too large.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EFBIG})
#: errno values that are a disk failure when they name a file of the sweep directory: permission refused
#: (EACCES, EPERM; a signal to a foreign process raises EPERM too, with no file name), a folder deleted
#: under the sweep (ENOENT, ENOTDIR).
PATH_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.ENOENT, errno.ENOTDIR})

#: What to do about each kind of disk failure (the hint's first words).
_DISK_REMEDY = {
    errno.EACCES: "make it writable for this user (chmod/chown)",
    errno.EPERM: "make it writable for this user (chmod/chown, chattr -i)",
    errno.ENOENT: "recreate it or point run.sweeps_dir at a directory that stays",
    errno.ENOTDIR: "recreate it or point run.sweeps_dir at a directory that stays",
    errno.EROFS: "remount it read-write or point run.sweeps_dir elsewhere",
}


class SweepDirError(ResultFileError):
    """The sweep directory cannot be written (disk full, read-only, no permission, deleted): the sweep
    stops. ``cause`` is what failed without what the sweep does about it, for a ``rollback`` to say its
    own."""

    def __init__(
        self, message: str, *, cause: str | None = None, hint: str | None = None, evidence: Sequence[str] = ()
    ) -> None:
        super().__init__(message, hint=hint, evidence=evidence)
        self.cause = cause if cause is not None else message.partition("; the sweep stops here")[0]


def sweep_dir_error(exc: BaseException, sweep_dir: object) -> SweepDirError | None:
    """``exc`` as a SweepDirError when it is a disk failure (None otherwise): what failed, what to do.

    ENOSPC, EROFS, EDQUOT and EFBIG always are; EACCES, EPERM, ENOENT and ENOTDIR only when the error
    names a path inside ``sweep_dir``, so that a refused signal or a
    missing program is not blamed on the disk, and ENOENT/ENOTDIR only when the sweep directory or the
    file's folder is gone (deleted under the sweep).
    """
    if not isinstance(exc, OSError) or exc.errno is None:
        return None
    if exc.errno not in DISK_ERRNOS and not (exc.errno in PATH_ERRNOS and _inside(exc.filename, sweep_dir)):
        return None
    root = str(sweep_dir)
    gone = bool(root) and not os.path.isdir(root)
    if exc.errno in (errno.ENOENT, errno.ENOTDIR) and not (gone or _folder_gone(exc.filename)):
        return None  # a file that is not there yet, in a folder that is: not the disk's doing
    where = f" ({exc.filename})" if exc.filename else ""
    deleted = gone and exc.errno in (errno.ENOENT, errno.ENOTDIR)
    what = "it was deleted" if deleted else exc.strerror or errno.errorcode.get(exc.errno, str(exc.errno))
    remedy = _DISK_REMEDY.get(exc.errno, "free space or make it writable")
    cause = f"cannot write the sweep directory {sweep_dir}: {what}{where}"
    return SweepDirError(
        f"{cause}; the sweep stops here",
        cause=cause,
        hint=f"{remedy}, then `python -m orchestrator rollback {sweep_dir}` "
        "(the journal and the finished records are intact)",
    )


def _folder_gone(filename: object) -> bool:
    if not isinstance(filename, str | bytes | os.PathLike):
        return False
    return not os.path.isdir(os.path.dirname(os.path.abspath(os.fsdecode(filename))))


def _inside(filename: object, sweep_dir: object) -> bool:
    if not isinstance(filename, str | bytes | os.PathLike):
        return False
    root = str(sweep_dir)
    if not root:
        return False  # no sweep directory yet: a refused path is not known to be the sweep's
    path = os.path.abspath(os.fsdecode(filename))
    base = os.path.abspath(root)
    return path == base or path.startswith(base + os.sep)


class GateError(GauntletError):
    """Gates cannot be evaluated from the stored results."""

    exit_code = 6


class JournalError(GauntletError):
    """The journal is unreadable or inconsistent."""

    exit_code = 7


class RollbackError(GauntletError):
    """The retained configuration could not be restored and validated."""

    exit_code = 7


class PromotionError(RollbackError):
    """``promote``: the kept candidate did not start or failed its validation under load; the previous
    retained configuration was restored (the message says whether that one validated)."""


class PromotionRefused(GauntletError):
    """``promote`` of a candidate the sweep did not keep (its verdict named), or did not measure: nothing
    was stopped or started."""

    exit_code = 2


class IncompleteSweep(GauntletError):
    """The sweep was judged, but some verdict rests on partial evidence (an interrupted run, missing
    repeats, a lost baseline, a harness fault, a gate that could not run, a comparison within the load
    client's lag): its exit code tells a script that the sweep is not finished."""

    exit_code = 8


#: Exit code of a sweep (or ``judge``) whose verdicts include an ``incomplete`` one.
EXIT_INCOMPLETE = IncompleteSweep.exit_code


def exit_code_for(exc: BaseException) -> int:
    """The process exit code for an exception: its kind's ``exit_code``, 130 for Ctrl-C, else 1."""
    if isinstance(exc, GauntletError):
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return 1

"""Run ``python -m orchestrator`` with a folder that refuses new entries with EACCES, as ``chmod a-w`` does
for a user who is not root (root ignores mode bits, and CI may run as root; a read-only bind mount needs
root too). Only creating, renaming and removing entries under the folder is refused, as the kernel does for
a folder without write permission: a file that exists can still be written (the journal is appended).

    GAUNTLET_TEST_DENY_UNDER=/abs/folder          refuse under it (and the folder itself, if it is new)
    GAUNTLET_TEST_DENY_AFTER=/abs/trigger-file    only once this file exists (default: from the start)
    python tests/faults/deny_writes.py -m candidate=tp4_dp2 ...

Used by ``tests/faults/test_disk_permissions.py``; it is a test injector, never imported by gauntlet.
"""

from __future__ import annotations

import builtins
import errno
import io
import os
import runpy
import sys
from typing import Any

DENY = os.path.abspath(os.environ["GAUNTLET_TEST_DENY_UNDER"])
AFTER = os.environ.get("GAUNTLET_TEST_DENY_AFTER", "")


def _refused(path: Any) -> bool:
    if not isinstance(path, str | bytes | os.PathLike) or (AFTER and not os.path.exists(AFTER)):
        return False
    where = os.path.abspath(os.fsdecode(path))
    return where == DENY or where.startswith(DENY + os.sep)


def _deny(path: Any) -> None:
    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fsdecode(path))


_open, _os_open, _mkdir = io.open, os.open, os.mkdir
_rename, _replace, _unlink, _rmdir, _symlink = os.rename, os.replace, os.unlink, os.rmdir, os.symlink


def guarded_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
    if any(c in mode for c in "wax+") and _refused(file) and not os.path.exists(file):
        _deny(file)
    return _open(file, mode, *args, **kwargs)


def guarded_os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
    if flags & os.O_CREAT and _refused(path) and not os.path.exists(path):
        _deny(path)
    return _os_open(path, flags, *args, **kwargs)


def guarded_mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
    if _refused(path) and not os.path.exists(path):
        _deny(path)
    _mkdir(path, *args, **kwargs)


def two(real: Any) -> Any:
    def guarded(src: Any, dst: Any, *args: Any, **kwargs: Any) -> Any:
        for path in (src, dst):
            if _refused(path):
                _deny(path)
        return real(src, dst, *args, **kwargs)

    return guarded


def one(real: Any) -> Any:
    def guarded(path: Any, *args: Any, **kwargs: Any) -> Any:
        if _refused(path) and "dir_fd" not in kwargs:
            _deny(path)
        return real(path, *args, **kwargs)

    return guarded


builtins.open = io.open = guarded_open
os.open = guarded_os_open
os.mkdir = guarded_mkdir
os.rename, os.replace, os.symlink = two(_rename), two(_replace), two(_symlink)
os.unlink = os.remove = one(_unlink)
os.rmdir = one(_rmdir)

if __name__ == "__main__":
    sys.argv = ["orchestrator", *sys.argv[1:]]
    runpy.run_module("orchestrator", run_name="__main__", alter_sys=True)

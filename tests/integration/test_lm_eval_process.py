"""The lm-eval seam's real process: its output kept, and at the time limit its whole group killed."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from load.lm_eval import run_process

#: A stand-in for lm-eval that starts a child (as lm-eval's dataset workers do) and outlives any limit.
STUCK = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(60)\n"
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize(
    ("code", "timeout_s", "returncode", "output"),
    [
        ("print('ok')", 60.0, 0, "ok"),
        ("import sys; print('boom', file=sys.stderr); sys.exit(3)", 60.0, 3, "boom"),
        (STUCK, 2.0, None, ""),
    ],
    ids=["ok", "failed", "past-the-limit"],
)
def test_the_process_ends_with_its_output_and_leaves_nothing(
    tmp_path: Path, code: str, timeout_s: float, returncode: int | None, output: str
) -> None:
    log = tmp_path / "lm_eval.log"
    finished = run_process([sys.executable, "-c", code], cwd=tmp_path, env=dict(os.environ),
                           timeout_s=timeout_s, log=log)  # fmt: skip
    assert finished.returncode == returncode and output in finished.output
    assert finished.output == log.read_text()
    if returncode is None:  # the stuck one's child is gone too: the group was killed
        child = int(finished.output.split()[0])
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child)


def test_a_missing_interpreter_is_said(tmp_path: Path) -> None:
    finished = run_process(["/no/such/python", "-m", "lm_eval"], cwd=tmp_path, env={}, timeout_s=5,
                           log=tmp_path / "log")  # fmt: skip
    assert finished.returncode == 127 and finished.output.startswith("cannot start the interpreter /no/such")

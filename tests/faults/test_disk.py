"""Fault matrix, disk: the sweep directory stops taking writes mid-profile (a file size limit, as a full
disk does: the same OSError path); the sweep stops cleanly with the cause named, the journal and the
finished records stay valid, and one healthy retained server is left (rollback still works). Row of
``docs/reliability.md``.

The injector is ``RLIMIT_FSIZE`` on the sweep's process: unprivileged and portable (a tmpfs that fills up
needs root to mount). Writes past the limit fail with EFBIG, which gauntlet treats like ENOSPC and EROFS.
"""

from __future__ import annotations

import compileall
import os
import resource
import subprocess
from pathlib import Path

import pytest

from contracts.errors import SweepDirError
from contracts.files import read_jsonl
from contracts.layout import profile_dir
from contracts.results import RequestRecord
from orchestrator.ledger.events import LoadStarted, Restoring
from orchestrator.ledger.journal import Journal
from tests.integration.sweep_helpers import (
    ROOT,
    assert_one_healthy_retained,
    orchestrator_cmd,
    run_cli,
    sweep_dir,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FILE_LIMIT = 30_000  # bytes: the serial profile's records fit, decode_heavy's (512 tokens each) do not


def limited(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def compile_sources() -> None:
    """Write every bytecode file before the limit applies: CPython writes a .pyc with one unchecked
    write(), so under RLIMIT_FSIZE a module compiled for the first time (a fresh clone, as in CI) leaves a
    truncated .pyc behind ("marshal data too short") that breaks every later import of it, in every test.
    """
    for package in ("contracts", "launch", "load", "gates", "report", "orchestrator", "tests"):
        assert compileall.compile_dir(ROOT / package, quiet=1, force=False), f"cannot compile {package}"


def test_a_disk_that_stops_taking_writes_mid_profile_stops_the_sweep_cleanly(
    tmp_path: Path, port: int
) -> None:
    sweeps = tmp_path / "sweeps"
    compile_sources()
    args = [
        "-m",
        "candidate=tp4_dp2",
        "workloads.decode_heavy.output_tokens.mean=512",
        "run.recovery_profiles=[serial]",
        "run.repeats=1",
    ]
    proc = subprocess.run(
        orchestrator_cmd(args, sweeps=sweeps, port=port),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        preexec_fn=lambda: limited(FILE_LIMIT),
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},  # and write none under it
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == SweepDirError.exit_code, out[-3000:]
    sweep = sweep_dir(sweeps)
    assert f"cannot write the sweep directory {sweep}: File too large; the sweep stops here" in out
    events = Journal(sweep / "journal.jsonl").events()  # still readable
    before_restore = events[: next(i for i, e in enumerate(events) if isinstance(e, Restoring))]
    loads = [e for e in before_restore if isinstance(e, LoadStarted)]
    kept = [(profile_dir(sweep, e.candidate, e.profile, e.repeat) / "records.jsonl").exists() for e in loads]
    assert kept == [True] * (len(loads) - 1) + [False], "nothing more is measured once the disk failed"
    finished = [read_jsonl(p, RequestRecord) for p in sweep.rglob("records.jsonl")]
    assert finished and all(finished), "every records file that was written is whole"
    assert_one_healthy_retained(sweep, port)  # the restore's own files fit: the retained server serves
    rollback = run_cli(["rollback", str(sweep)])  # and, once there is room, rollback works as ever
    assert rollback.returncode == 0, rollback.stdout + rollback.stderr
    assert_one_healthy_retained(sweep, port)

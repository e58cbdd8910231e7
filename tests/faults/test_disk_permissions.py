"""Fault matrix, disk: a sweep directory that refuses writes with EACCES (``chmod a-w`` for a user who is
not root), at the opening and between candidates. The sweep stops with exit 6 and the cause, and leaves
exactly one healthy retained server: the live service is never left down because gauntlet could not write.
Row of ``docs/reliability.md``. The injector is ``tests/faults/deny_writes.py`` (root ignores mode bits).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from contracts.errors import SweepDirError
from orchestrator.ledger.events import Launching
from orchestrator.ledger.journal import Journal
from tests.integration.sweep_helpers import (
    ROOT,
    assert_one_healthy_retained,
    journal_has,
    orchestrator_cmd,
    run_cli,
    run_sweep,
    sim_servers,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

QUICK = ["run.repeats=1", "run.recovery_profiles=[serial]"]


def start_cmd(cmd: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def denied_sweep(
    args: list[str], *, sweeps: Path, port: int, deny: Path, after: Path | None = None
) -> subprocess.Popen[str]:
    cmd = orchestrator_cmd(args, sweeps=sweeps, port=port)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GAUNTLET_TEST_DENY_UNDER": str(deny)}
    if after is not None:
        env["GAUNTLET_TEST_DENY_AFTER"] = str(after)
    return start_cmd([sys.executable, "tests/faults/deny_writes.py", *cmd[3:]], env)


def test_eacces_between_candidates_stops_with_exit_6_and_one_healthy_retained(
    tmp_path: Path, port: int
) -> None:
    sweeps, sweep, trigger = tmp_path / "sweeps", tmp_path / "sweeps" / "s1", tmp_path / "trigger"
    args = ["-m", "candidate=twin,tp4_dp2", f"hydra.sweep.dir={sweep}", *QUICK]
    proc = denied_sweep(args, sweeps=sweeps, port=port, deny=sweep, after=trigger)
    try:
        wait_for(lambda: journal_has(sweep, "torn_down", candidate="twin"), timeout=240, what="twin measured")
        trigger.touch()  # from now on the whole sweep directory refuses new files and folders
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == SweepDirError.exit_code, out[-3000:]
    assert f"cannot write the sweep directory {sweep}: Permission denied" in out, out[-3000:]
    assert "Traceback" not in out
    assert_one_healthy_retained(sweep, port)
    trigger.unlink()
    rollback = run_cli(["rollback", str(sweep)])
    assert rollback.returncode == 0, rollback.stdout + rollback.stderr
    assert_one_healthy_retained(sweep, port)


def test_eacces_at_the_opening_touches_nothing_and_the_live_service_keeps_serving(
    tmp_path: Path, port: int
) -> None:
    sweeps = tmp_path / "sweeps"
    code, out, first = run_sweep(["-m", "candidate=baseline", *QUICK], sweeps=sweeps, port=port)
    assert code == 0, out[-3000:]
    assert_one_healthy_retained(first, port)  # the live service, left by the first sweep
    second = sweeps / "s2"
    args = ["-m", "candidate=tp4_dp2", f"hydra.sweep.dir={second}", *QUICK]
    proc = denied_sweep(args, sweeps=sweeps, port=port, deny=second / "candidates")
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == SweepDirError.exit_code, out[-3000:]
    assert f"cannot write the sweep directory {second}: Permission denied" in out, out[-3000:]
    assert "Traceback" not in out
    assert not [e for e in Journal(second / "journal.jsonl").events() if isinstance(e, Launching)]
    assert_one_healthy_retained(first, port)  # never stopped: the second sweep refused before touching it


def test_a_sweep_directory_deleted_mid_sweep_stops_with_exit_6_and_restores_from_the_copy_beside_the_lock(
    tmp_path: Path, port: int
) -> None:
    """Deleted between candidates: the next journal append sees its file gone (the writers' mkdir would
    otherwise recreate the folder and measure on into an empty journal); a server spawned meanwhile is torn
    down rather than left running unrecorded; the restore reads the retained spec and the live set from the
    copy kept beside the port's lock (orchestrator/ledger/offsite.py), journals there, writes its evidence
    under the lock folder, and leaves exactly one healthy retained server: the live service is not down."""
    sweeps, sweep = tmp_path / "sweeps", tmp_path / "sweeps" / "s1"
    args = ["-m", "candidate=twin,tp4_dp2", f"hydra.sweep.dir={sweep}", *QUICK]
    proc = start_cmd(orchestrator_cmd(args, sweeps=sweeps, port=port))
    try:
        wait_for(lambda: journal_has(sweep, "torn_down", candidate="twin"), timeout=240, what="twin measured")
        for _ in range(3):  # the sweep may write meanwhile
            shutil.rmtree(sweep, ignore_errors=True)
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == SweepDirError.exit_code, out[-3000:]
    assert f"cannot write the sweep directory {sweep}: it was deleted" in out, out[-3000:]
    assert "Traceback" not in out
    assert "restoring from the copy in" in out and "recovery validation passed" in out, out[-3000:]
    servers = sim_servers(port)
    assert len(servers) == 1, f"simulator processes on port {port}: {[p.pid for p in servers]}"
    assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200


def test_a_sweeps_folder_that_refuses_the_new_sweep_directory_is_exit_6_and_writes_nothing(
    tmp_path: Path, port: int
) -> None:
    sweeps = tmp_path / "sweeps"
    sweep = sweeps / "s3"
    proc = denied_sweep(
        ["-m", "candidate=tp4_dp2", f"hydra.sweep.dir={sweep}"], sweeps=sweeps, port=port, deny=sweep
    )
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == SweepDirError.exit_code, out[-3000:]
    assert f"cannot write the sweep directory {sweep}: Permission denied ({sweep})" in out, out[-3000:]
    assert "Traceback" not in out and not sweep.exists() and sim_servers(port) == []

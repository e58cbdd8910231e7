"""Fault matrix, ports and processes: foreign processes are named and never touched, a reused pid is never
killed. Rows of ``docs/reliability.md`` (the sweep lock is in ``test_sweep_lock.py``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest

from contracts.errors import PortInUseError
from orchestrator.ledger.journal import Journal
from tests.faults.test_secrets import QUICK
from tests.integration.sweep_helpers import (
    assert_one_healthy_retained,
    run_cli,
    run_sweep,
    sim_servers,
    start,
    wait_for,
)

pytestmark = pytest.mark.integration


def answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_foreign_process_on_the_service_port_is_refused_by_name_and_left_alone(
    tmp_path: Path, port: int
) -> None:
    foreign = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: answers(port), timeout=30, what="the foreign server")
        sweep = start(["-m", "candidate=baseline", *QUICK], sweeps=tmp_path / "sweeps", port=port)
        out, _ = sweep.communicate(timeout=120)
        assert sweep.returncode == PortInUseError.exit_code, out[-2000:]
        assert f"port {port} on 127.0.0.1 is already taken by pid {foreign.pid}" in out
        assert "http.server" in out  # the holder's command line
        assert foreign.poll() is None and answers(port), "the foreign process is untouched"
        assert sim_servers(port) == []
    finally:
        foreign.terminate()
        foreign.communicate(timeout=10)


@pytest.mark.slow
def test_a_pid_reused_by_an_unrelated_process_after_a_crash_is_never_killed(
    tmp_path: Path, port: int
) -> None:
    sweeps = tmp_path / "sweeps"
    code, out, sweep = run_sweep(["-m", "candidate=baseline", *QUICK], sweeps=sweeps, port=port)
    assert code == 0, out[-2000:]
    journal = Journal(sweep / "journal.jsonl")
    (retained,) = journal.replay().retained_live
    os.killpg(retained.pgid, signal.SIGKILL)  # the server crashes ...
    wait_for(lambda: not psutil.pid_exists(retained.pid), timeout=30, what="the crashed server to go")
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)  # ... and its pid is reused
    try:
        lines = (sweep / "journal.jsonl").read_text().splitlines()
        rewritten = []
        for line in lines:
            entry = json.loads(line)
            if entry.get("pid") == retained.pid:
                entry["pid"], entry["pgid"] = stranger.pid, stranger.pid
            rewritten.append(json.dumps(entry, sort_keys=True, separators=(",", ":")))
        (sweep / "journal.jsonl").write_text("\n".join(rewritten) + "\n")
        stop = run_cli(["stop", str(sweep)])
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert "nothing to stop: no server gauntlet started" in stop.stdout
        assert stranger.poll() is None, "stop never kills a process that only shares the pid"
        rollback = run_cli(["rollback", str(sweep)])
        assert rollback.returncode == 0, rollback.stdout + rollback.stderr
        assert stranger.poll() is None, "nor does rollback"
        assert_one_healthy_retained(sweep, port)
    finally:
        stranger.kill()
        stranger.communicate(timeout=10)


@pytest.mark.slow
def test_a_server_left_by_a_sweep_elsewhere_is_refused_by_name_and_one_of_this_sweeps_is_taken_over(
    tmp_path: Path, port: int
) -> None:
    code, out, first = run_sweep(["-m", "candidate=baseline", *QUICK], sweeps=tmp_path / "a", port=port)
    assert code == 0, out[-2000:]
    (left,) = Journal(first / "journal.jsonl").replay().retained_live
    elsewhere = start(["-m", "candidate=baseline", *QUICK], sweeps=tmp_path / "b", port=port)
    out, _ = elsewhere.communicate(timeout=120)
    assert elsewhere.returncode == PortInUseError.exit_code, out[-2000:]
    assert f"is already taken by pid {left.pid} (" in out and "launch.sim" in out
    assert_one_healthy_retained(first, port)  # untouched
    code, out, second = run_sweep(["-m", "candidate=baseline", *QUICK], sweeps=tmp_path / "a", port=port)
    assert code == 0, out[-2000:]
    assert f"live service baseline (pid {left.pid}) recorded as the baseline; stopping it" in out
    assert second != first
    assert_one_healthy_retained(second, port)

"""Fault matrix, ports and processes: one sweep per service port, a lock the kernel releases on a crash."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from contracts.errors import SweepLockedError
from orchestrator.ledger.lock import SweepLock
from tests.faults.test_secrets import QUICK
from tests.integration.sweep_helpers import (
    assert_one_healthy_retained,
    run_cli,
    run_sweep,
    start,
    start_until,
)


def test_a_second_holder_is_refused_naming_the_first_sweep(tmp_path: Path) -> None:
    first, second = SweepLock.for_port(8123, tmp_path), SweepLock.for_port(8123, tmp_path)
    first.acquire(tmp_path / "sweep-a")
    with pytest.raises(SweepLockedError) as info:
        second.acquire(tmp_path / "sweep-b")
    assert info.value.holder == str((tmp_path / "sweep-a").resolve())
    assert "another sweep is running on service port 8123" in str(info.value)
    assert SweepLock.for_port(8124, tmp_path).held(tmp_path / "c")  # another port is another lock
    first.release()
    with second.held(tmp_path / "sweep-b"):
        assert second.held_here


def test_the_lock_of_a_killed_sweep_is_free_at_once(tmp_path: Path) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from orchestrator.ledger.lock import SweepLock
        SweepLock.for_port(8125, Path({str(tmp_path)!r})).acquire(Path("crashed"))
        print("held", flush=True)
        sys.stdin.read()
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    with pytest.raises(SweepLockedError, match="crashed"):
        SweepLock.for_port(8125, tmp_path).acquire(tmp_path / "next")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    with SweepLock.for_port(8125, tmp_path).held(tmp_path / "next") as lock:
        assert lock.held_here


@pytest.mark.integration
@pytest.mark.slow
def test_two_sweeps_on_one_port_the_second_refuses_and_the_first_is_untouched(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GAUNTLET_LOCK_DIR", str(tmp_path / "locks"))
    first, sweep = start_until(
        ["-m", "candidate=tp4_dp2"],
        sweeps=tmp_path / "a",
        port=port,
        event="load_started",
        candidate="baseline",
        timeout=180,
    )
    try:
        second = start(["-m", "candidate=tp4_dp2"], sweeps=tmp_path / "b", port=port)
        out, _ = second.communicate(timeout=120)
        assert second.returncode == SweepLockedError.exit_code, out[-2000:]
        assert f"another sweep is running on service port {port}: {sweep}" in out
        assert not (tmp_path / "b" / "latest").exists(), "the second sweep opened nothing"
        assert first.poll() is None, "the first sweep goes on"
        first.send_signal(signal.SIGKILL)  # a crash: the kernel frees the lock
        first.communicate(timeout=30)
        rollback = run_cli(["rollback", str(sweep)])
        assert rollback.returncode == 0, rollback.stdout + rollback.stderr
        assert_one_healthy_retained(sweep, port)
        code, out, _ = run_sweep(["-m", "candidate=baseline", *QUICK], sweeps=tmp_path / "a", port=port)
        assert code == 0, out[-2000:]
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate(timeout=30)


@pytest.mark.integration
def test_a_sweep_refused_by_the_lock_writes_nothing(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GAUNTLET_LOCK_DIR", str(tmp_path / "locks"))
    with SweepLock.for_port(port, tmp_path / "locks").held(tmp_path / "a" / "running"):
        refused = start(["-m", "candidate=tp4_dp2"], sweeps=tmp_path / "b", port=port)
        out, _ = refused.communicate(timeout=120)
    assert refused.returncode == SweepLockedError.exit_code, out[-2000:]
    assert f"another sweep is running on service port {port}: {tmp_path / 'a' / 'running'}" in out
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if "locks" not in p.parts)
    assert written == [], f"a refused sweep wrote {written} (no config.yaml, multirun.yaml, opening.json)"

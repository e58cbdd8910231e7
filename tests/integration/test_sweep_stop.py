"""A clean exit on the simulator: `retained_after_sweep: stop`, `orchestrator stop`, then rollback."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.ledger.events import SweepFinished
from orchestrator.ledger.journal import Journal
from tests.integration import sweep_helpers as h

pytestmark = pytest.mark.slow


def test_a_stop_sweep_leaves_no_simulator_running_and_says_so(tmp_path: Path, port: int) -> None:
    sweeps = tmp_path / "sweeps"
    code, out, sweep = h.run_sweep(
        ["-m", "candidate=baseline", "run.retained_after_sweep=stop"], sweeps=sweeps, port=port
    )
    assert code == 0, out
    assert h.sim_servers(port) == []
    assert h.journal_has(sweep, "validated")  # restored and validated first, then stopped
    finished = [e for e in Journal(sweep / "journal.jsonl").events() if isinstance(e, SweepFinished)]
    assert [e.retained for e in finished] == ["stopped"]
    assert Journal(sweep / "journal.jsonl").replay().live == {}
    last = out.strip().splitlines()[-1]
    assert last == "gauntlet: retained server stopped (run.retained_after_sweep=stop): nothing left running"
    status = h.run_cli(["status", str(sweep)], timeout=60)  # the intended stop is a state, not "not settled"
    assert status.returncode == 0, status.stdout + status.stderr
    assert "state: stopped (run.retained_after_sweep=stop)" in status.stdout


def test_stop_ends_the_kept_retained_server_twice_is_a_no_op_and_rollback_brings_it_back(
    tmp_path: Path, port: int
) -> None:
    sweeps = tmp_path / "sweeps"
    code, out, sweep = h.run_sweep(["-m", "candidate=baseline"], sweeps=sweeps, port=port)
    assert code == 0, out
    (live,) = Journal(sweep / "journal.jsonl").replay().live.values()
    last = out.strip().splitlines()[-1]
    assert last.startswith(f"gauntlet: retained server live: pid {live.pid} at http://127.0.0.1:{port} ")
    assert f"`python -m orchestrator stop {sweep}`" in last
    assert [p.pid for p in h.sim_servers(port)] == [live.pid]

    first = h.run_cli(["stop", str(sweep)], timeout=120)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "stopped 1 server(s)" in first.stdout
    assert h.sim_servers(port) == []
    second = h.run_cli(["stop", str(sweep)], timeout=120)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "nothing to stop" in second.stdout
    status = h.run_cli(["status", str(sweep)], timeout=60)
    assert "nothing gauntlet started is running" in status.stdout

    restored = h.run_cli(["rollback", str(sweep)])
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "rollback OK" in restored.stdout
    h.assert_one_healthy_retained(sweep, port)

"""The sweep helpers' own cleanup: a test that fails mid-sweep leaves nothing running for the next one."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from tests.integration.sweep_helpers import journal_has, reap_started, sim_servers, start, sweep_dir, wait_for

pytestmark = pytest.mark.slow


def test_reap_started_kills_a_running_sweep_and_its_servers(tmp_path: Path, port: int) -> None:
    """CI once lost three tests to one: a failed assertion left its sweep running, which took the next
    test's ports and, garbage-collected later, failed a third test with an unclosed pipe's warning."""
    proc = start(["-m", "candidate=tp4_dp2", "host.time_scale=2"], sweeps=tmp_path / "sweeps", port=port)
    sweep = sweep_dir(tmp_path / "sweeps")
    wait_for(lambda: journal_has(sweep, "load_started"), timeout=120, what="the sweep under load")
    tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    servers = sim_servers(port)
    assert servers and {s.pid for s in servers} <= {p.pid for p in tree}
    killed = reap_started()
    assert proc.pid in killed and proc.returncode is not None
    assert proc.stdout is not None and proc.stdout.closed
    assert not [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert sim_servers(port) == [] and reap_started() == []

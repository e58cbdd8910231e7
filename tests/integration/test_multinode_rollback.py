"""kill -9 of the orchestrator while a multi-node candidate is under load, then ``rollback``: the candidate's
head and follower are stopped and the 2-node retained configuration is restored and validated, so exactly
one healthy retained server (its head and its follower) runs and nothing else (issue 35, item 3)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from orchestrator.ledger.journal import Journal
from tests.integration.sweep_helpers import ROOT, journal_has, run_cli, sim_servers, sweep_dir, wait_for
from tests.ports import free_port

pytestmark = pytest.mark.slow


def test_sigkill_mid_multinode_candidate_then_rollback(tmp_path: Path, port: int) -> None:
    sweeps = tmp_path / "sweeps"
    command = [
        sys.executable, "-m", "orchestrator", "-m", "candidate=tp16", "+experiment=sim_small",
        "host=sim_2x8", "candidate@baseline=dp_nodes", f"host.rpc_port={free_port()}",
        "hydra.searchpath=[file://tests/integration/conf,file://examples/multinode]",
        f"run.sweeps_dir={sweeps}", f"service.port={port}",
    ]  # fmt: skip
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        sweep = sweep_dir(sweeps)
        wait_for(lambda: journal_has(sweep, "load_started", candidate="tp16"), timeout=180, what="tp16 load")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    (left,) = Journal(sweep / "journal.jsonl").replay().live.values()
    assert left.candidate == "tp16" and left.followers is not None  # the journal knows both nodes
    assert {p.pid for p in sim_servers(port)} == {left.pid, left.followers[0].pid}

    done = run_cli(["rollback", str(sweep)])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rollback OK" in done.stdout
    state = Journal(sweep / "journal.jsonl").replay()
    (retained,) = state.live.values()
    assert retained.role == "retained" and retained.fingerprint == state.retained_fingerprint
    assert retained.followers is not None and len(retained.followers) == 1
    assert {p.pid for p in sim_servers(port)} == {retained.pid, retained.followers[0].pid}
    assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
    assert "all 2 nodes joined" in Path(retained.log_path).read_text()

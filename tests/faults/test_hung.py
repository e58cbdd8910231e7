"""Fault matrix, a hung server: SIGSTOP of a candidate's server mid-profile. The watcher declares it
``hung`` within the stated bound (``launch.supervisor.HUNG_AFTER_S`` of unanswered /health probes), the
load's in-flight requests are cancelled at once (not at their 600 s request timeout), the sweep says what
it saw, the server is killed without a grace period it could never use, the candidate is REJECTed on
stability with "hung" as evidence, and one healthy retained server is left. Row of ``docs/reliability.md``.
"""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import datetime
from pathlib import Path

import pytest

from contracts.files import read_model
from contracts.results import CandidateRun
from launch.supervisor import HTTP_TIMEOUT_S, HUNG_AFTER_S
from orchestrator.ledger.events import LoadFinished, TornDown
from orchestrator.ledger.journal import Journal
from tests.integration.sweep_helpers import (
    assert_one_healthy_retained,
    journal_has,
    start,
    sweep_dir,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WATCH_INTERVAL_S = 1.0  # orchestrator.servers.seams.Seams.watch_interval_s
#: The stated bound: the last answered probe ends just before the hang, the next begins one interval later
#: and times out, and the one after it ends past HUNG_AFTER_S of silence.
DETECT_BOUND_S = 2 * (WATCH_INTERVAL_S + HTTP_TIMEOUT_S)
#: What the test allows on a loaded 2-core machine on top of the bound (the figure is printed either way).
SLACK_S = 10.0


def epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_a_sigstopped_candidate_server_is_hung_within_the_bound_killed_and_rejected(
    tmp_path: Path, port: int
) -> None:
    assert HUNG_AFTER_S < DETECT_BOUND_S
    sweeps = tmp_path / "sweeps"
    # Long enough that the stop lands mid-profile; request_timeout_s stays at its 600 s default.
    args = ["-m", "candidate=tp4_dp2", "workloads.decode_heavy.num_requests=400", "run.repeats=1"]
    proc = start(args, sweeps=sweeps, port=port)
    try:
        sweep = sweep_dir(sweeps)
        wait_for(
            lambda: journal_has(sweep, "load_started", candidate="tp4_dp2", profile="decode_heavy"),
            timeout=240,
            what="tp4_dp2 under load",
        )
        live = Journal(sweep / "journal.jsonl").replay().live.values()
        (server,) = [s for s in live if s.candidate == "tp4_dp2"]
        os.killpg(server.pgid, signal.SIGSTOP)
        stopped_at = time.time()
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    run = read_model(sweep / "candidates" / "tp4_dp2" / "run.json", CandidateRun)
    hung = [e for e in run.watch if e.kind == "hung"]
    assert hung, run.watch
    assert not [e for e in run.watch if e.kind == "died"], "a hung server is not reported as died"
    detected_s = epoch(hung[0].at) - stopped_at
    events = Journal(sweep / "journal.jsonl").events()
    finished = next(e for e in events if isinstance(e, LoadFinished) and e.candidate == "tp4_dp2"
                    and e.profile == "decode_heavy")  # fmt: skip
    killed = next(e for e in events if isinstance(e, TornDown) and e.candidate == "tp4_dp2")
    load_stopped_s = epoch(finished.at) - epoch(hung[0].at)
    torn_down_s = epoch(killed.at) - stopped_at
    print(
        f"FIGURE hung: detected {detected_s:.1f} s after SIGSTOP (bound {DETECT_BOUND_S:g} s), "
        f"profile ended {load_stopped_s:.2f} s after that, server killed {torn_down_s:.1f} s after SIGSTOP"
    )
    assert 0 < detected_s <= DETECT_BOUND_S + SLACK_S, detected_s
    assert load_stopped_s <= SLACK_S, "the in-flight requests are cancelled, not waited for (600 s)"
    assert f"tp4_dp2: decode_heavy r1: server hung: pid {server.pid} is alive (stopped)" in out, out[-3000:]
    assert run.teardown is not None and run.teardown.signal_sequence == ["SIGKILL"], run.teardown
    assert run.teardown.survivors == [] and run.teardown.port_free
    verdicts = {v["candidate"]: v for v in json.loads((sweep / "verdicts.json").read_text())["verdicts"]}
    assert verdicts["tp4_dp2"]["decision"] == "reject", verdicts["tp4_dp2"]["reason"]
    assert "stability" in verdicts["tp4_dp2"]["failed"]
    assert "server hung" in verdicts["tp4_dp2"]["reason"]
    assert proc.returncode == 0, out[-3000:]
    assert_one_healthy_retained(sweep, port)

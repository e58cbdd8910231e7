"""``rollback`` SIGTERMed on the simulator while its restored server starts: a real process, a real signal.

The unit rows (tests/unit/test_interrupted_rollback.py) send SIGTERM from the fakes' hooks; here `kill PID`
reaches ``python -m orchestrator rollback`` as soon as it says it is launching the retained server. It
unwinds as after Ctrl-C (exit 130) and says what it left: nothing (the server torn down while it started)
or the restored server, unvalidated (when it was ready before the signal landed: its validation was
interrupted); the journal names exactly what runs, and the next ``rollback`` leaves one healthy retained
server, validated. Row of ``docs/reliability.md``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.ledger.journal import Journal
from tests.integration.sweep_helpers import (
    ROOT,
    assert_one_healthy_retained,
    kill_servers,
    run_cli,
    run_sweep,
    sim_servers,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_sigtermed_rollback_says_what_it_left_and_the_next_repairs_it(tmp_path: Path, port: int) -> None:
    code, out, sweep = run_sweep(["-m", "candidate=baseline"], sweeps=tmp_path / "sweeps", port=port)
    try:
        assert code in (0, 8), out[-3000:]
        kill_servers(port)  # the live service died: rollback restores it
        proc = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "rollback", str(sweep)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        said: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            said.append(line)
            if "launching (retained)" in line:
                proc.send_signal(signal.SIGTERM)
                break
        rest, _ = proc.communicate(timeout=120)
        text = "".join(said) + rest
        assert proc.returncode == 130, text[-3000:]
        head = "gauntlet rollback: interrupted (signal SIGTERM) before it finished; what runs now:"
        assert head in text, text[-3000:]
        running = sim_servers(port)
        live = Journal(sweep / "journal.jsonl").replay().live
        assert len(running) == len(live) <= 1, (running, live, text[-3000:])
        if running:  # ready before the signal landed: kept, its validation interrupted
            assert "retained server live: pid " in text, text[-3000:]
        else:  # torn down while it started
            assert "nothing gauntlet started for this sweep is running" in text, text[-3000:]
        again = run_cli(["rollback", str(sweep)], timeout=300)
        assert again.returncode == 0, again.stdout + again.stderr
        assert_one_healthy_retained(sweep, port)
    finally:
        run_cli(["stop", str(sweep)], timeout=120)

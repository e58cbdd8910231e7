"""One owner of a sweep's servers: `stop` and `rollback` act through a running sweep, evidence is append-only,
and a deleted sweep directory strands nothing (the sweep's real processes on the simulator)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contracts.layout import RECOVERY_ROOT, ROLLBACKS_DIR, SERVER_LOG, VERDICTS_FILE
from orchestrator.ledger.events import Launching, SweepFinished
from orchestrator.ledger.journal import Journal
from tests.integration import sweep_helpers as h

pytestmark = pytest.mark.slow

#: Three candidates: the sweep is stopped under load of the second; the third must never launch.
SWEEP = ["-m", "candidate=twin,tp4_dp2,slow_start"]


def _verdicts(sweep: Path) -> dict[str, str]:
    data = json.loads((sweep / VERDICTS_FILE).read_text())
    return {v["candidate"]: v["decision"] for v in data["verdicts"]}


def _missing(sweep: Path) -> dict[str, set[str]]:
    """The kinds of missing evidence behind each verdict."""
    data = json.loads((sweep / VERDICTS_FILE).read_text())
    return {v["candidate"]: {m["kind"] for m in v.get("missing") or []} for v in data["verdicts"]}


def _records(folder: Path) -> dict[Path, bytes]:
    """Every file of ``folder`` but the server's log (the live retained server keeps appending to it)."""
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != SERVER_LOG}


def _launched(sweep: Path) -> list[str]:
    return [e.candidate for e in Journal(sweep / "journal.jsonl").events() if isinstance(e, Launching)]


def _pending(pid: int, sig: signal.Signals) -> bool:
    """``sig`` is pending for ``pid`` (sent while it is stopped: delivered when it continues)."""
    bit = 1 << (sig - 1)
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in {"SigPnd", "ShdPnd"} and int(value.strip(), 16) & bit:
            return True
    return False


def _request_while_frozen(proc: subprocess.Popen[str], sweep: Path, command: str) -> subprocess.Popen[str]:
    """Run ``gauntlet <command> <sweep>`` with the sweep frozen under tp4_dp2's load until its request is
    pending, so the request lands mid-measurement however fast the sweep runs and however long the command
    takes to start (tp4_dp2's whole measurement takes about 2 s on sim_small; the command's start-up as long
    on a quiet machine, several times that on CI's two shared cores)."""
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        assert not h.journal_has(sweep, "tearing_down", candidate="tp4_dp2"), "frozen after tp4_dp2's load"
        cli = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", command, str(sweep)],
            cwd=h.ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        h.wait_for(
            lambda: _pending(proc.pid, signal.SIGUSR1) or cli.poll() is not None,
            timeout=120,
            what=f"the {command}'s request signalled to the sweep",
        )
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    return cli


def test_stop_during_a_running_sweep_unwinds_it_and_nothing_keeps_running(tmp_path: Path, port: int) -> None:
    proc, sweep = h.start_until(
        SWEEP, sweeps=tmp_path / "sweeps", port=port, event="load_started", candidate="tp4_dp2", timeout=300
    )
    began = time.monotonic()
    cli = _request_while_frozen(proc, sweep, "stop")
    h.wait_for(lambda: h.sim_servers(port) == [], timeout=120, what="no simulator left")
    servers_gone = time.monotonic() - began
    out, _ = proc.communicate(timeout=120)
    sweep_gone = time.monotonic() - began
    said, err = cli.communicate(timeout=120)
    stopped = subprocess.CompletedProcess(cli.args, cli.returncode, said, err)
    # the figures for docs/reliability.md (from `stop` invoked: its own start-up included)
    print(f"FIGURE stop during a sweep: servers gone {servers_gone:.1f} s, sweep gone {sweep_gone:.1f} s")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "the running sweep" in stopped.stdout and "nothing was restored" in stopped.stdout
    assert proc.returncode == 130, out[-3000:]
    assert "slow_start" not in _launched(sweep)  # no later candidate launched
    assert h.journal_has(sweep, "sweep_finished", reason="stopped by the user")
    assert not h.journal_has(sweep, "restoring")  # the sweep restored nothing (the known bug)
    assert Journal(sweep / "journal.jsonl").replay().live == {}
    verdicts = _verdicts(sweep)
    assert verdicts["tp4_dp2"] == "incomplete", verdicts  # interrupted: not "server died", not REJECT
    missing = _missing(sweep)
    assert {"interrupted", "missing_repeats"} & missing["tp4_dp2"], missing
    # Finished before the stop: whatever its decision (on a loaded machine the gates may find the load
    # client too late to decide), it rests on nothing the stop cut short.
    assert not {"interrupted", "missing_repeats"} & missing["twin"], missing
    judged = h.run_cli(["judge", str(sweep)], timeout=120)
    assert judged.returncode in (0, 8), judged.stdout + judged.stderr
    assert _verdicts(sweep) == verdicts  # the stored results give the same verdicts again
    status = h.run_cli(["status", str(sweep)], timeout=60)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "stopped by the user" in status.stdout
    as_json = json.loads(h.run_cli(["status", "--json", str(sweep)], timeout=60).stdout)
    assert as_json["state"] == "stopped_by_user"


def test_rollback_during_a_running_sweep_leaves_one_healthy_retained_server(
    tmp_path: Path, port: int
) -> None:
    proc, sweep = h.start_until(
        SWEEP, sweeps=tmp_path / "sweeps", port=port, event="load_started", candidate="tp4_dp2", timeout=300
    )
    cli = _request_while_frozen(proc, sweep, "rollback")
    said, err = cli.communicate(timeout=600)
    rolled = subprocess.CompletedProcess(cli.args, cli.returncode, said, err)
    out, _ = proc.communicate(timeout=120)
    assert rolled.returncode == 0, rolled.stdout + rolled.stderr + out[-3000:]
    assert "rollback OK" in rolled.stdout and "running sweep" in rolled.stdout
    assert proc.returncode == 130, out[-3000:]
    assert "slow_start" not in _launched(sweep)
    h.assert_one_healthy_retained(sweep, port)


def test_a_deleted_sweep_directory_does_not_strand_the_service(tmp_path: Path, port: int) -> None:
    proc, sweep = h.start_until(
        SWEEP, sweeps=tmp_path / "sweeps", port=port, event="load_started", candidate="twin", timeout=300
    )
    shutil.rmtree(sweep)
    out, _ = proc.communicate(timeout=300)  # it can no longer write its records; it restores from the copy
    # The last line and status come from the process table and the copy beside the lock: the restored
    # server serves (it said "nothing gauntlet started for this sweep is running", status "(none recorded)")
    assert out.strip().splitlines()[-1].startswith("gauntlet: retained server live: pid "), out[-3000:]
    status = h.run_cli(["status", str(sweep)], timeout=120)
    assert "(none recorded)" not in status.stdout, status.stdout + status.stderr
    assert " retained  pid " in status.stdout and " healthy " in status.stdout, status.stdout
    rolled = h.run_cli(["rollback", str(sweep)], timeout=600)
    assert rolled.returncode == 0, rolled.stdout + rolled.stderr
    assert "rollback OK" in rolled.stdout
    h.assert_one_healthy_retained(sweep, port)


def test_judge_gives_the_same_verdicts_before_and_after_two_rollbacks(tmp_path: Path, port: int) -> None:
    code, out, sweep = h.run_sweep(["-m", "candidate=tp4_dp2"], sweeps=tmp_path / "sweeps", port=port)
    assert code in (0, 8), out[-3000:]
    before = h.run_cli(["judge", str(sweep)], timeout=120)
    assert before.returncode in (0, 8), before.stdout + before.stderr
    verdicts = (sweep / VERDICTS_FILE).read_bytes()
    recovery = _records(sweep / RECOVERY_ROOT)
    for _ in range(2):
        rolled = h.run_cli(["rollback", str(sweep)], timeout=600)
        assert rolled.returncode == 0, rolled.stdout + rolled.stderr
    assert len(list((sweep / ROLLBACKS_DIR).iterdir())) == 2  # each rollback: its own directory
    assert _records(sweep / RECOVERY_ROOT) == recovery
    after = h.run_cli(["judge", str(sweep)], timeout=120)
    assert after.returncode == before.returncode, after.stdout + after.stderr
    assert (sweep / VERDICTS_FILE).read_bytes() == verdicts
    h.assert_one_healthy_retained(sweep, port)
    finished = [e for e in Journal(sweep / "journal.jsonl").events() if isinstance(e, SweepFinished)]
    assert len(finished) == 1


def test_status_after_a_sweep_killed_during_its_restore_says_not_yet_validated(
    tmp_path: Path, port: int
) -> None:
    proc, sweep = h.start_until(
        ["-m", "candidate=baseline", "run.recovery_repeats=30"],  # a long validation to be killed in
        sweeps=tmp_path / "sweeps",
        port=port,
        event="restored",
        candidate="baseline",
        timeout=300,
    )
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert not h.journal_has(sweep, "validated")
    status = h.run_cli(["status", str(sweep)], timeout=60)
    assert status.returncode == 1, status.stdout + status.stderr
    assert "restored, not yet validated" in status.stdout
    data = json.loads(h.run_cli(["status", "--json", str(sweep)], timeout=60).stdout)
    assert (data["state"], data["settled"], data["exit_code"]) == ("restored_not_validated", False, 1)
    rolled = h.run_cli(["rollback", str(sweep)], timeout=600)
    assert rolled.returncode == 0, rolled.stdout + rolled.stderr
    h.assert_one_healthy_retained(sweep, port)  # validated now: status exits 0


def test_a_rollback_with_the_wrong_api_key_names_the_401_and_changes_no_verdict(
    tmp_path: Path, port: int
) -> None:
    env = "GAUNTLET_HANDOVER_API_KEY"
    quick = ["run.repeats=1", "run.profiles=[serial]", "run.recovery_profiles=[serial]",
             "gates.accepted_profiles=[serial]", "gates.loaded_profiles=[serial]"]  # fmt: skip
    args = ["-m", "candidate=baseline", *quick, f"service.api_key_env={env}"]
    proc = subprocess.Popen(
        h.orchestrator_cmd(args, sweeps=tmp_path / "sweeps", port=port),
        cwd=h.ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, env: "sk-right"},
    )
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    sweep = h.sweep_dir(tmp_path / "sweeps")
    verdicts = (sweep / VERDICTS_FILE).read_bytes()
    wrong = subprocess.run(
        [sys.executable, "-m", "orchestrator", "rollback", str(sweep)],
        cwd=h.ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, env: "sk-wrong"},
    )
    assert wrong.returncode == 7, wrong.stdout + wrong.stderr  # the validation failed: RollbackError's code
    assert "unauthorized: check service.api_key_env (HTTP 401 from /v1/models)" in wrong.stdout
    assert "model not listed" not in wrong.stdout
    judged = h.run_cli(["judge", str(sweep)], timeout=120)
    assert judged.returncode == 0, judged.stdout + judged.stderr
    assert (sweep / VERDICTS_FILE).read_bytes() == verdicts  # the failed rollback's evidence is its own

"""Helpers for sweep tests on the simulator: run the orchestrator as a user would, inspect what is left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx
import psutil

from contracts.layout import LaunchPaths, SweepPaths
from contracts.trials import read_search
from launch.command import clear_rpc_dir, rpc_dir
from launch.supervisor import DEFAULT_RPC_ROOT
from orchestrator.ledger.journal import Journal

ROOT = Path(__file__).resolve().parents[2]


def orchestrator_cmd(
    args: Sequence[str], *, sweeps: Path, port: int, experiment: str = "sim_small"
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "orchestrator",
        *args,
        f"run.sweeps_dir={sweeps}",
        f"service.port={port}",
        "hydra.searchpath=[file://tests/integration/conf]",
        f"+experiment={experiment}",
    ]


_STARTED: list[subprocess.Popen[str]] = []


def start(
    args: Sequence[str], *, sweeps: Path, port: int, experiment: str = "sim_small"
) -> subprocess.Popen[str]:
    """Start a sweep as a user would; ``reap_started`` kills it after the test if it still runs."""
    proc = subprocess.Popen(
        orchestrator_cmd(args, sweeps=sweeps, port=port, experiment=experiment),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    _STARTED.append(proc)
    return proc


def reap_started() -> list[int]:
    """Kill every sweep ``start`` began that still runs, with its whole process tree (submitit jobs,
    servers in their own sessions), and close its pipe; returns the pids it killed.

    A test that fails before its sweep ends must not leave it running: the next test on the worker would
    meet its processes, its servers' ports and, at interpreter exit, an unclosed pipe's ResourceWarning.
    """
    killed = []
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            try:
                root = psutil.Process(proc.pid)
                tree = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                tree = []
            for member in tree:
                try:
                    member.kill()
                    killed.append(member.pid)
                except psutil.NoSuchProcess:
                    continue
            psutil.wait_procs(tree, timeout=10)
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
    return killed


def run_sweep(args: Sequence[str], *, sweeps: Path, port: int, timeout: float = 300) -> tuple[int, str, Path]:
    """Run a sweep to its end: exit code, its output (stdout and stderr together), its directory."""
    proc = start(args, sweeps=sweeps, port=port)
    out, _ = proc.communicate(timeout=timeout)
    if not (sweeps / "latest").exists():  # it ended without one: refused at its opening, say why
        raise AssertionError(f"the sweep exited {proc.returncode} without a sweep directory:\n{out[-3000:]}")
    return proc.returncode, out, sweep_dir(sweeps)


def assert_finished(code: int, out: str, sweep: Path) -> None:
    """The sweep ran to its end with nothing that resuming measures: exit 0, or 8 where its only
    incomplete verdicts are comparisons within the load client's lag (a loaded machine's: every
    INCOMPLETE exits 8, issue 32 item 9)."""
    verdicts = json.loads((sweep / "verdicts.json").read_text())
    incomplete = [v for v in verdicts["verdicts"] if v["decision"] == "incomplete"]
    gaps = {g["kind"] for v in incomplete for g in v["missing"]}
    assert gaps <= {"client_lag"} and verdicts.get("resume") is None, (gaps, out[-3000:])
    assert code == (8 if incomplete else 0), out[-3000:]


def assert_finished_capacity_open(code: int, out: str, sweep: Path) -> None:
    """:func:`assert_finished` for a sweep whose capacity search is too short to bracket anything: the
    small searches' few levels all hold the SLO ("≥ 32" on both sides), which compares nothing, so the
    capacity gate says it could not run and what to change (a ``not_run`` gap, issue 42 item 16: before,
    it read both floors as a ratio of 1). Resuming measures nothing there either."""
    verdicts = json.loads((sweep / "verdicts.json").read_text())
    incomplete = [v for v in verdicts["verdicts"] if v["decision"] == "incomplete"]
    for gap in (g for v in incomplete for g in v["missing"]):
        open_capacity = gap["kind"] == "not_run" and gap["message"].startswith("capacity: could not run")
        assert gap["kind"] == "client_lag" or (open_capacity and "capacity.max_level" in gap["message"]), gap
    assert verdicts.get("resume") is None, out[-3000:]
    assert code == (8 if incomplete else 0), out[-3000:]


def run_cli(args: Sequence[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def a_trial_recorded_and_the_next_launched(sweep: Path) -> bool:
    """A search has recorded a launched trial and launched its next one (its spec is written): a Ctrl-C
    now lands inside a trial, before the search's budget is spent, however loaded the machine (waiting
    for the first trial alone let a loaded CI machine's search finish its second one first)."""
    paths = SweepPaths(sweep)
    record = read_search(sweep) if paths.trials.exists() else None
    if record is None or not any(t.launches for t in record.trials):
        return False
    recorded = {t.name for t in record.trials}
    trials = paths.trial("x").root.parent
    return any(d.name not in recorded and LaunchPaths(d).spec.exists() for d in trials.iterdir())


def wait_for(predicate: Callable[[], bool], *, timeout: float, what: str) -> None:
    """Poll a condition until it holds or the deadline passes (never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def sweep_dir(sweeps: Path) -> Path:
    latest = sweeps / "latest"
    wait_for(latest.exists, timeout=60, what=f"{latest}")
    return latest.resolve()


def journal_has(sweep: Path, event: str, **match: object) -> bool:
    """The sweep's journal has an ``event`` whose fields equal ``match``."""
    return any(
        e.name == event and all(getattr(e, k, None) == v for k, v in match.items())
        for e in Journal(sweep / "journal.jsonl").events()
    )


def start_until(
    args: Sequence[str], *, sweeps: Path, port: int, event: str, candidate: str, timeout: float
) -> tuple[subprocess.Popen[str], Path]:
    """Start a sweep and wait until its journal records ``event`` for ``candidate``."""
    proc = start(args, sweeps=sweeps, port=port)
    sweep = sweep_dir(sweeps)
    wait_for(
        lambda: journal_has(sweep, event, candidate=candidate),
        timeout=timeout,
        what=f"{event} of {candidate}",
    )
    return proc, sweep


def sim_servers(port: int) -> list[psutil.Process]:
    """Session leaders of simulator servers on ``port`` (what gauntlet starts there)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "launch.sim" in cmd and "--port" in cmd and cmd[cmd.index("--port") + 1] == str(port):
            try:
                if os.getpgid(proc.pid) == proc.pid:
                    found.append(proc)
            except ProcessLookupError:
                continue
    return found


def assert_one_healthy_retained(sweep: Path, port: int) -> None:
    """Exactly one healthy server runs, with the baseline fingerprint, and nothing else gauntlet started."""
    state = Journal(sweep / "journal.jsonl").replay()
    live = list(state.live.values())
    assert len(live) == 1, f"journal says live: {live}"
    (server,) = live
    assert server.role == "retained"
    assert server.fingerprint == state.retained_fingerprint
    pids = [p.pid for p in sim_servers(port)]
    assert pids == [server.pid], f"simulator processes on port {port}: {pids}, journal: {server.pid}"
    assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
    status = run_cli(["status", str(sweep)], timeout=60)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "the retained configuration is the one healthy server" in status.stdout


def kill_servers(port: int) -> None:
    """SIGKILL the simulator servers on ``port`` and remove the IPC directory the supervisor gave them
    (gauntlet's teardown would have; a kill from outside leaves it)."""
    for proc in sim_servers(port):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
    clear_rpc_dir(rpc_dir(DEFAULT_RPC_ROOT, port))


def completion_tokens(base_url: str, model: str) -> int:
    """One short chat completion from the server at ``base_url``: the completion tokens it reports."""
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
    answer = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=60)
    answer.raise_for_status()
    return int(answer.json()["usage"]["completion_tokens"])

"""A load client stopped mid-run (SIGSTOP for a fixed time, as a VM pause or Ctrl-Z would) against the
reference server: the run is classified as a paused client, a harness fault, never as a slow server.

The pause is the stimulus (a fixed sleep between SIGSTOP and SIGCONT); what is asserted is the
classification, never a timing. The stop is sent once both streams are in flight on the server (a
condition polled with a deadline), and each stream lasts longer than the pause, so the stop always
lands inside the measured window however loaded the machine is.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest

from contracts.errors import ClientPaused
from contracts.results import ProfileSummary, read_model
from contracts.schema import LengthConfig, LoadConfig, WorkloadConfig
from load.harness import PAUSE_MIN_S
from tests.integration.ref_load import Server, run

PAUSE_S = PAUSE_MIN_S + 1.5  # how long the client is stopped (wall seconds)
TOKENS, INTERVAL_MS = 240, 50  # each stream: 240 chunks, one per 50 ms: 12 s, longer than the pause


def running(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=5).text
    line = next(ln for ln in text.splitlines() if ln.startswith("vllm:num_requests_running"))
    return float(line.rsplit(" ", 1)[1])


def stop_when_streaming(url: str, target: str, done: list[str]) -> None:
    """Once both streams are in flight, stop ``target`` (``worker``: one load worker process; ``self``:
    this whole process, stopped and continued by a shell) for :data:`PAUSE_S`."""
    deadline = time.monotonic() + 300  # spawning the workers imports the runner: slow on a loaded machine
    while running(url) < 2:
        assert time.monotonic() < deadline, "the streams never started"
        time.sleep(0.02)
    if target == "self":  # this process cannot continue itself: a shell stops it and continues it
        pid = os.getpid()
        shell = subprocess.Popen(["sh", "-c", f"kill -STOP {pid}; sleep {PAUSE_S}; kill -CONT {pid}"])
        shell.wait(timeout=PAUSE_S + 60)  # returns once this process runs again
        done.append("self")
        return
    workers = [p for p in psutil.Process().children(recursive=True) if "spawn_main" in " ".join(p.cmdline())]
    victim = workers[0]
    os.kill(victim.pid, signal.SIGSTOP)
    try:
        time.sleep(PAUSE_S)
    finally:
        os.kill(victim.pid, signal.SIGCONT)
    done.append(f"worker {victim.pid}")


@pytest.mark.parametrize(("target", "workers"), [("worker", 2), ("self", 1)])
def test_a_client_stopped_mid_run_is_a_paused_harness_fault_not_a_slow_server(
    ref_server: Server, tmp_path: Path, target: str, workers: int
) -> None:
    url = ref_server("--interval-ms", str(INTERVAL_MS))
    wl = WorkloadConfig(
        name="paused",
        concurrency=2,
        num_requests=2,
        warmup_requests=0,
        prompt_tokens=LengthConfig(kind="fixed", mean=16),
        output_tokens=LengthConfig(kind="fixed", mean=TOKENS),
        ignore_eos=True,
        seed=5,
        time_limit_s=120,
    )
    done: list[str] = []
    pauser = threading.Thread(target=stop_when_streaming, args=(url, target, done))
    pauser.start()
    try:
        with pytest.raises(ClientPaused) as info:
            run(url, tmp_path, wl, load=LoadConfig(workers=workers))
    finally:
        pauser.join(timeout=120)
    assert done, "the pause was never sent"
    assert "the load client was paused for" in info.value.message
    summary = read_model(tmp_path / "summary.json", ProfileSummary)
    assert summary.completed == 2 and summary.failed == 0  # the server served both: nothing against it
    assert any(
        n.startswith("harness fault, not the server: the load client was paused") for n in summary.notes
    )

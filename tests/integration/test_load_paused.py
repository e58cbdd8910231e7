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
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil
import pytest

from contracts.errors import ClientPaused
from contracts.files import read_model
from contracts.results import ProfileSummary
from contracts.schema import LengthConfig, LoadConfig, WorkloadConfig
from load import run_profile
from load.harness import PAUSE_MIN_S
from tests.integration.ref_load import Server, run
from tests.integration.test_sim_server import candidate_argv, start

PAUSE_S = PAUSE_MIN_S + 1.5  # how long the client is stopped (wall seconds)
TOKENS, INTERVAL_MS = 240, 50  # each stream: 240 chunks, one per 50 ms: 12 s, longer than the pause
# The simulator at 2 host seconds per wall second streams 1,000 tokens in about 2.6 wall seconds here
# (speculative decoding): 5,000 tokens last about 13 s, longer than the pause.
SIM_SCALE, SIM_TOKENS = 2.0, 5000


def running(url: str) -> float:
    """Requests the server is streaming now (summed over its engines)."""
    text = httpx.get(f"{url}/metrics", timeout=5).text
    lines = [ln for ln in text.splitlines() if ln.startswith("vllm:num_requests_running")]
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in lines)


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


def two_streams(tokens: int) -> WorkloadConfig:
    return WorkloadConfig(
        name="paused",
        concurrency=2,
        num_requests=2,
        warmup_requests=0,
        prompt_tokens=LengthConfig(kind="fixed", mean=16),
        output_tokens=LengthConfig(kind="fixed", mean=tokens),
        ignore_eos=True,
        seed=5,
        time_limit_s=300,
        request_timeout_s=300,
    )


def paused_run(url: str, target: str, measure: Callable[[], object]) -> ClientPaused:
    """Run ``measure`` while ``target`` is stopped for :data:`PAUSE_S` mid-stream; the pause it raised."""
    done: list[str] = []
    pauser = threading.Thread(target=stop_when_streaming, args=(url, target, done))
    pauser.start()
    try:
        with pytest.raises(ClientPaused) as info:
            measure()
    finally:
        pauser.join(timeout=120)
    assert done, "the pause was never sent"
    return info.value


@pytest.mark.parametrize(("target", "workers"), [("worker", 2), ("self", 1)])
def test_a_client_stopped_mid_run_is_a_paused_harness_fault_not_a_slow_server(
    ref_server: Server, tmp_path: Path, target: str, workers: int
) -> None:
    url = ref_server("--interval-ms", str(INTERVAL_MS))
    wl = two_streams(TOKENS)
    pause = paused_run(url, target, lambda: run(url, tmp_path, wl, load=LoadConfig(workers=workers)))
    assert "the load client was paused for" in pause.message
    summary = read_model(tmp_path / "summary.json", ProfileSummary)
    assert summary.completed == 2 and summary.failed == 0  # the server served both: nothing against it
    assert any(
        n.startswith("harness fault, not the server: the load client was paused") for n in summary.notes
    )


def test_a_load_worker_stopped_mid_run_against_the_simulator_is_a_paused_harness_fault(
    tmp_path: Path,
) -> None:
    """The same against the simulator at 2 host seconds per wall second: its records count host seconds, the
    pause is measured in wall seconds."""
    with start(candidate_argv("baseline", "--sim-time-scale", str(SIM_SCALE))) as server:
        url = server.base_url
        wl = two_streams(SIM_TOKENS)

        def measure() -> ProfileSummary:
            return run_profile(
                url,
                "deepseek-v4-flash",
                wl,
                candidate="c",
                fingerprint="f",
                repeat=0,
                out_dir=tmp_path,
                backend="sim",
                host="sim",
                time_scale=SIM_SCALE,
                progress=False,
                load=LoadConfig(workers=2),
            )

        pause = paused_run(url, "worker", measure)
    assert "the load client was paused for" in pause.message
    summary = read_model(tmp_path / "summary.json", ProfileSummary)
    assert summary.completed == 2 and summary.failed == 0

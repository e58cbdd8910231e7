"""Fault matrix, load: 1,024 concurrent streams for a whole profile, no record lost, the runner's memory
bounded. Row of ``docs/reliability.md``; the figure is the runner's peak RSS."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from contracts.paths import PROJECT_ROOT
from tests.faults.conftest import SIM_TIME_SCALE
from tests.integration.test_sim_server import candidate_argv, start

pytestmark = [pytest.mark.integration, pytest.mark.slow]

STREAMS = 1024
REQUESTS = 2048
PEAK_RSS_LIMIT_MIB = 200  # measured 69 MiB (45 MiB of it imports) on the 2-core CI machine


def test_1024_concurrent_streams_lose_no_record_and_the_runner_stays_small(tmp_path: Path) -> None:
    argv = candidate_argv("baseline", "--sim-time-scale", str(SIM_TIME_SCALE), "--max-num-seqs", str(STREAMS))
    with start(argv) as server:
        probe = subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.faults.rss_probe",
                server.base_url,
                str(tmp_path),
                str(STREAMS),
                str(REQUESTS),
            ],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=500,
            check=False,
        )
    assert probe.returncode == 0, probe.stderr[-3000:]
    figures = json.loads(probe.stdout.strip().splitlines()[-1])
    print(f"FIGURE 1024 streams: {figures}")
    assert figures["records"] == REQUESTS, "every request has its record"
    assert figures["completed"] == REQUESTS and figures["errors"] == {}
    assert figures["peak_rss_mib"] < PEAK_RSS_LIMIT_MIB

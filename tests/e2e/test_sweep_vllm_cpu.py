"""A real sweep on real vLLM on CPU: baseline, a candidate the CPU refuses, one that is measured, restore."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from contracts.results import CandidateRun, read_model
from orchestrator.ledger.journal import Journal
from tests.e2e.conftest import ROOT, free_port

pytestmark = pytest.mark.slow


def _stop(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
        psutil.Process(pid).wait(timeout=60)
    except (ProcessLookupError, psutil.NoSuchProcess):
        return
    except psutil.TimeoutExpired:
        os.killpg(pid, signal.SIGKILL)


def test_small_sweep_on_real_vllm_restores_the_baseline(vllm_cpu: Path, tmp_path: Path) -> None:
    port = free_port()
    sweeps = tmp_path / "sweeps"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "-m",
            "candidate=cpu_baseline,cpu_fp8,cpu_seqs,cpu_bogus_flag",
            "hydra.searchpath=[file://tests/e2e/conf]",
            "+experiment=cpu_sweep",
            f"service.port={port}",
            f"run.sweeps_dir={sweeps}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    sweep = (sweeps / "latest").resolve()
    state = Journal(sweep / "journal.jsonl").replay()
    try:
        assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
        fp8 = read_model(sweep / "candidates" / "cpu_fp8" / "run.json", CandidateRun)
        assert (fp8.startup.ok, fp8.startup.kind) == (False, "incompatible")
        assert fp8.startup.matched_line and "fp8" in fp8.startup.matched_line.lower()
        bogus = read_model(sweep / "candidates" / "cpu_bogus_flag" / "run.json", CandidateRun)
        assert (bogus.startup.ok, bogus.startup.kind) == (False, "bad-args")  # doctor: never launched
        assert bogus.startup.matched_line and "--no-such-vllm-flag" in bogus.startup.matched_line
        launched = [e.candidate for e in Journal(sweep / "journal.jsonl").events() if e.name == "launching"]
        assert "cpu_bogus_flag" not in launched and "cpu_seqs" in launched
        seqs = read_model(sweep / "candidates" / "cpu_seqs" / "run.json", CandidateRun)
        assert seqs.startup.ok and seqs.backend == "vllm"
        assert seqs.profiles == ["serial/r1", "short/r1", "serial/r2", "short/r2"]
        summary = json.loads(
            (sweep / "candidates" / "cpu_seqs" / "short" / "r1" / "summary.json").read_text()
        )
        assert summary["completed"] == summary["num_requests"] == 16
        assert summary["server"]["generation_tokens"] > 0
        validation = json.loads((sweep / "recovery" / "validation.json").read_text())
        assert validation["ok"], validation
        assert "real vLLM" in (sweep / "report.md").read_text()
        live = list(state.live.values())
        assert [(s.role, s.fingerprint) for s in live] == [("retained", state.retained_fingerprint)]
        assert psutil.pid_exists(live[0].pid)
    finally:
        for server in state.live.values():
            _stop(server.pid)

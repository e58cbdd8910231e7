"""A small search on the simulator, end to end: trials as jobs, an infeasible point, the screen, the
winner measured again against the baseline, the restore, and search/trials.json."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import yaml

from contracts.layout import SweepPaths
from contracts.trials import read_search
from contracts.verdicts import decision_label, read_verdicts
from orchestrator.search.confirm import NO_BETTER
from tests.integration.sweep_helpers import (
    a_trial_recorded_and_the_next_launched,
    assert_finished_capacity_open,
    run_sweep,
    start,
    sweep_dir,
    wait_for,
)

#: A capacity search of a few levels at the small experiment's scale (seconds per trial).
SMALL_CAPACITY = [
    "capacity.profile=decode_heavy",
    "capacity.start=8",
    "capacity.max_points=3",
    "capacity.waves=1",
    "capacity.min_requests=8",
    "capacity.noise=0",
]


def test_a_small_search_finds_confirms_and_restores(tmp_path: Path, port: int) -> None:
    code, out, sweep = run_sweep(
        ["-m", "search=tiny", "run.confirm_runs=0", *SMALL_CAPACITY],
        sweeps=tmp_path / "sweeps",
        port=port,
        timeout=240,
    )
    assert_finished_capacity_open(code, out, sweep)
    assert "sweep of 1 job(s)" not in out and re.search(r"search tiny over 4 configurations \(budget: ", out)
    launched = re.search(r"search: launched (\d+) of 4 configurations \((.+)\)", out)
    assert launched is not None, out[-3000:]
    record = read_search(sweep)
    assert record is not None
    assert record.launches <= 5 and record.distinct_launched == int(launched.group(1))
    assert record.space_size == 4 and record.stopped == launched.group(2)
    states = {t.state for t in record.trials}
    assert states <= {"complete", "pruned", "infeasible"}, [(t.name, t.state, t.why) for t in record.trials]
    for trial in record.trials:
        if trial.state == "infeasible" and trial.broken:  # its screen broke a gated requirement
            assert (
                trial.why.startswith("screen breaks a constraint: ") and max(trial.constraints.values()) > 0
            )
        elif trial.state == "infeasible":  # 0.95 of the memory leaves none for CUDA graphs
            assert trial.params["gpu_memory_utilization"] == 0.95 and "out-of-memory" in trial.why
        if trial.launches:  # each launched trial's evidence is its own launch, outside candidates/
            assert SweepPaths(sweep).trial(trial.name).run_file.is_file()
    names = [w.name for w in record.finalists]
    if not names:  # every point launched broke a requirement at its screen, or the baseline's was best
        assert NO_BETTER in out or "your current configuration is the best found" in out, out[-3000:]
    else:
        winner = yaml.safe_load(SweepPaths(sweep).winner.read_text())
        assert winner["name"] == names[0] and winner["defaults"] == ["baseline", "_self_"]
    # Each finalist measured again as an ordinary candidate and judged, inside the budget; the gates' word
    # is the line's. Which word is the noise's to give (the point and the baseline differ by little on a
    # loaded machine): any verdict of a candidate that started, said in its one spelling, the same as
    # verdicts.json's; only a KEEP is recommended.
    # each confirmation with the baseline's interleaved block after it (run.interleave, on by default)
    assert record.launches <= 5 and record.confirm_launches == 2 * len(names)
    verdicts = {v.candidate: v for v in read_verdicts(sweep).verdicts}
    for i, finalist in enumerate(names):
        verdict = verdicts[finalist]
        assert verdict.decision in ("keep", "neutral", "reject", "inconclusive", "incomplete"), verdict.reason
        assert record.confirmations[i].decision == verdict.decision
        line = re.search(rf"search: confirmed {finalist} \({i + 1} of {len(names)}\): ([A-Z]+) ", out)
        assert line is not None, out[-3000:]
        assert line.group(1) == decision_label(verdict.decision), (line.group(0), verdict.reason)
    keeps = [n for n in names if verdicts[n].decision == "keep"]
    assert (record.recommended is not None) is bool(keeps)
    if record.recommended is not None:
        assert f"search: recommend {record.recommended}: KEEP (" in out
    elif names:
        assert f"{NO_BETTER}: " in out
    # The retained configuration at the sweep's start (the baseline) is restored whatever the verdict.
    assert "recovery validation passed: restored baseline byte-for-byte" in out
    # The trials never reach the judge: only the baseline and the finalists are candidates.
    assert {p.name for p in SweepPaths(sweep).root.joinpath("candidates").iterdir()} == {"baseline", *names}


def test_a_search_interrupted_by_ctrl_c_resumes_where_it_stopped(tmp_path: Path, port: int) -> None:
    sweeps = tmp_path / "sweeps"
    args = ["-m", "search=tiny", "run.confirm_runs=0", "run.interleave=false", "search.max_launches=4"]
    args += SMALL_CAPACITY
    proc = start(args, sweeps=sweeps, port=port)
    sweep = sweep_dir(sweeps)
    wait_for(
        lambda: a_trial_recorded_and_the_next_launched(sweep),
        timeout=120,
        what="a trial recorded, the next launched",
    )
    before = read_search(sweep)
    assert before is not None
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    assert proc.returncode != 0
    # The same command with the sweep directory: the study reopens where it stopped.
    code, out, _ = run_sweep([*args, f"hydra.sweep.dir={sweep}"], sweeps=sweeps, port=port, timeout=240)
    assert_finished_capacity_open(code, out, sweep)
    assert f"search: resuming study tiny ({len(before.trials)} trial(s) recorded)" in out
    after = read_search(sweep)
    assert after is not None
    assert after.trials[: len(before.trials)] == before.trials  # what was recorded stays as it was
    numbers = [t.number for t in after.trials]
    assert numbers == sorted(set(numbers))
    interrupted = [t for t in after.trials if t.why.startswith("interrupted")]
    assert len(interrupted) == 1 and interrupted[0].state == "failed" and interrupted[0].launches == 1
    # the lost launch spent budget too, and so did the confirmation (one launch kept for it: 4 in all)
    assert after.launches == sum(t.launches for t in after.trials) + after.confirm_launches <= 4
    assert sum(t.launches for t in after.trials) <= 3
    assert re.search(r"search: launched \d+ of 4 configurations", out), out[-3000:]

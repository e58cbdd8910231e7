"""A small search on the simulator, end to end: trials as jobs, an infeasible point, the screen, the
winner measured again against the baseline, the restore, and search/trials.json."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from contracts.layout import SweepPaths
from contracts.trials import read_search
from contracts.verdicts import read_verdicts
from tests.integration.sweep_helpers import assert_finished, run_sweep

#: A capacity search of a few levels at the small experiment's scale (seconds per trial).
SMALL_CAPACITY = [
    "capacity.profile=decode_heavy",
    "capacity.start=8",
    "capacity.max_points=3",
    "capacity.waves=1",
    "capacity.min_requests=8",
    "capacity.noise=0",
    "++host.sim_args.sim-startup-s=0.2",  # seven launches: the simulator's default second each adds up
]


def test_a_small_search_finds_confirms_and_restores(tmp_path: Path, port: int) -> None:
    code, out, sweep = run_sweep(
        ["-m", "search=tiny", "run.confirm_runs=0", *SMALL_CAPACITY],
        sweeps=tmp_path / "sweeps",
        port=port,
        timeout=240,
    )
    assert_finished(code, out, sweep)
    launched = re.search(r"search: launched (\d+) of 4 configurations \((.+)\)", out)
    assert launched is not None, out[-3000:]
    record = read_search(sweep)
    assert record is not None
    assert record.launches <= 3 and record.distinct_launched == int(launched.group(1))
    assert record.space_size == 4 and record.stopped == launched.group(2)
    states = {t.state for t in record.trials}
    assert states <= {"complete", "pruned", "infeasible"}, [(t.name, t.state, t.why) for t in record.trials]
    for trial in record.trials:
        if trial.state == "infeasible":  # 0.95 of the memory leaves none for CUDA graphs
            assert trial.params["gpu_memory_utilization"] == 0.95 and "out-of-memory" in trial.why
        if trial.launches:  # each launched trial's evidence is its own launch, outside candidates/
            assert SweepPaths(sweep).trial(trial.name).run_file.is_file()
    assert record.winner is not None, [(t.name, t.state, t.why) for t in record.trials]
    name = record.winner.name
    winner = yaml.safe_load(SweepPaths(sweep).winner.read_text())
    assert winner["name"] == name and winner["defaults"] == ["baseline", "_self_"]
    # The winner measured again as an ordinary candidate and judged; the gates' word is the line's.
    verdict = next(v for v in read_verdicts(sweep).verdicts if v.candidate == name)
    assert record.confirmation is not None and record.confirmation.decision == verdict.decision
    assert re.search(rf"search: winner {name}: [A-Z]+ \(search's estimate ", out), out[-3000:]
    assert "recovery validation passed: restored baseline byte-for-byte" in out
    # The trials never reach the judge: only the baseline and the winner are candidates.
    assert {p.name for p in SweepPaths(sweep).root.joinpath("candidates").iterdir()} == {"baseline", name}

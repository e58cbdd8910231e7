"""A search whose best point is the current configuration, end to end on the simulator (issue 43 item 11):
it says so and launches no confirmation; the utilisation that does not start is launched once (item 4)."""

from __future__ import annotations

from pathlib import Path

from contracts.layout import SweepPaths
from contracts.trials import read_search
from tests.integration.sweep_helpers import run_sweep
from tests.integration.test_search import SMALL_CAPACITY


def test_a_search_whose_best_point_is_the_baseline_says_so_and_confirms_nothing(
    tmp_path: Path, port: int
) -> None:
    code, out, sweep = run_sweep(
        ["-m", "search=current", "run.confirm_runs=0", *SMALL_CAPACITY],
        sweeps=tmp_path / "sweeps",
        port=port,
        timeout=240,
    )
    assert code in (0, 8), out[-3000:]
    record = read_search(sweep)
    assert record is not None, out[-3000:]
    assert "search: your current configuration is the best found" in out, out[-3000:]
    assert record.best_is_baseline and record.winner is None and record.confirmation is None
    # the baseline's point is the opening's measurement (nothing launched); 0.95 was launched once, did
    # not start, and was never launched again
    (base,) = [t for t in record.trials if t.baseline]
    assert base.launches == 0 and base.state == "complete" and base.params["gpu_memory_utilization"] == 0.81
    launched = [t for t in record.trials if t.launches]
    assert len(launched) == 1 and launched[0].startup == "out-of-memory", [(t.name, t.why) for t in launched]
    assert record.launches == 1
    # no confirmation: the winner's file is not written and the only candidate judged is the baseline
    assert not SweepPaths(sweep).winner.exists()
    assert {p.name for p in SweepPaths(sweep).root.joinpath("candidates").iterdir()} == {"baseline"}
    assert "search: winner" not in out
    assert "recovery validation passed: restored baseline byte-for-byte" in out

"""A search whose trials live in a team's PostgreSQL (``search.storage``: a database URL), on the simulator.

The same search interrupted (Ctrl-C during its second trial) and run again in its directory goes on where it
stopped: the trials measured before the interrupt are neither lost nor launched again, the budget counts
them, and the database's study agrees with ``search/trials.json``. A second sweep directory on the same
URL and search name (a colleague's) reads that study: its trials are numbered after the first sweep's and
the study holds both. The database is a throwaway server from Debian's package (tests/postgres.py).
"""

from __future__ import annotations

import signal
from pathlib import Path

import optuna
import pytest

from contracts.layout import SweepPaths
from contracts.trials import SearchRecord, read_search
from tests.integration.sweep_helpers import (
    a_trial_recorded_and_the_next_launched,
    assert_finished_capacity_open,
    kill_servers,
    run_sweep,
    start,
    sweep_dir,
    wait_for,
)
from tests.ports import free_port

pytestmark = pytest.mark.slow

#: A search of seconds per trial: one loaded profile, a capacity search of two levels, fast starts.
FAST = [
    "-m",
    "search=small",
    "run.profiles=[decode_heavy]",
    "gates.accepted_profiles=[decode_heavy]",
    "gates.loaded_profiles=[decode_heavy]",
    "run.confirm_runs=0",
    "host.time_scale=40",
    "capacity.profile=decode_heavy",
    "capacity.start=16",
    "capacity.max_level=32",
    "capacity.max_points=2",
    "capacity.max_repeats=1",
    "capacity.waves=1",
    "capacity.min_requests=8",
    "capacity.noise=0",
]


def _launched(record: SearchRecord | None) -> list[int]:
    return [t.number for t in record.trials if t.launches] if record is not None else []


def _study(url: str) -> list[optuna.trial.FrozenTrial]:
    storage = optuna.storages.RDBStorage(url)
    try:
        return optuna.load_study(study_name="small", storage=storage).trials
    finally:
        storage.engine.dispose()  # a pooled connection left open warns (an error in the tests)


def test_a_search_in_postgres_resumes_where_it_stopped_and_a_second_sweep_reads_its_study(
    tmp_path: Path, port: int, postgres_url: str
) -> None:
    # two trials, and two launches kept for the confirmation and the baseline's block after it
    # (search/small.yaml: confirm_top 1; run.interleave on)
    args = [*FAST, f"search.storage={postgres_url}", "search.max_launches=4"]
    proc = start(args, sweeps=tmp_path / "sweeps", port=port)
    sweep = sweep_dir(tmp_path / "sweeps")
    wait_for(
        lambda: a_trial_recorded_and_the_next_launched(sweep),
        timeout=120,
        what="a trial recorded, the next launched",
    )
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0, out[-3000:]
    before = read_search(sweep)
    assert before is not None and before.stopped == "", out[-3000:]  # interrupted: not a finished search
    first = {t.number: t for t in before.trials}
    assert not (SweepPaths(sweep).search / "study.db").exists()  # the URL, not the sweep's own SQLite
    assert {t.number for t in _study(postgres_url)} >= set(first)

    code, out, _ = run_sweep([*args, f"hydra.sweep.dir={sweep}"], sweeps=tmp_path / "sweeps", port=port)
    assert_finished_capacity_open(code, out, sweep)
    after = read_search(sweep)
    assert after is not None and after.stopped.startswith("budget spent"), out[-3000:]
    for number, trial in first.items():  # kept as they were, not measured again
        assert after.trials[[t.number for t in after.trials].index(number)] == trial
    assert after.launches == 2 + after.confirm_launches and len(_launched(after)) == 2
    numbers = [t.number for t in after.trials]
    assert numbers == sorted(set(numbers)), numbers  # the study numbers on: no trial number twice
    stored = {t.number: t for t in _study(postgres_url)}
    for trial in after.trials:  # the database's study and trials.json agree
        if trial.state == "complete":
            assert stored[trial.number].state == optuna.trial.TrialState.COMPLETE
            assert stored[trial.number].values == trial.values
    # a trial the interrupt cut short is in the study as failed, never left running
    assert all(t.state != optuna.trial.TrialState.RUNNING for t in stored.values())

    elsewhere = free_port()  # a colleague's own service (this one's retained server keeps its port)
    try:
        code, out, theirs = run_sweep(
            [*FAST, f"search.storage={postgres_url}", "search.max_launches=1"],
            sweeps=tmp_path / "team",
            port=elsewhere,
        )
    finally:
        kill_servers(elsewhere)
    assert_finished_capacity_open(code, out, theirs)
    record = read_search(theirs)
    assert record is not None and len(_launched(record)) == 1
    assert min(t.number for t in record.trials) > max(stored), (record.trials, sorted(stored))
    assert {t.name for t in record.trials}.isdisjoint(t.name for t in after.trials)
    assert set(stored) | {t.number for t in record.trials} <= {t.number for t in _study(postgres_url)}

"""Two sweeps sharing one study in PostgreSQL (issue 43 item 7): neither fails the other's running trials,
and a sweep measuring something else is refused at its opening, naming what differs.

The database is a throwaway server from Debian's package (tests/postgres.py). The first test drives the
Optuna adapter from two threads as two sweeps would (each asks, the other opens the study meanwhile, then
each tells); the second runs a real sweep on the simulator while a colleague's trial is in flight in the
same study, then a sweep with another SLO. Before, opening a study marked every running trial failed (the
colleague's next tell raised: the trial had finished), and a sweep with another SLO joined the study.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import optuna
import pytest

from contracts.search import SearchConfig
from contracts.trials import read_search
from orchestrator.config.space import parse_space
from orchestrator.measure.trial import TrialOutcome
from orchestrator.search.shared import FINGERPRINT_ATTR, SWEEP_ATTR
from orchestrator.search.study import SearchStudy
from tests.integration import sweep_helpers as h
from tests.integration.test_search_storage import FAST
from tests.ports import free_port

pytestmark = pytest.mark.slow

#: A fingerprint both sweeps of the adapter test share (what the sweep's opening computes).
PRINT = {"model": "m", "vllm": "vLLM 0.32.0", "host": "h", "slo": "s", "workload": "w", "space": "x"}


def _trials(url: str, name: str) -> list[optuna.trial.FrozenTrial]:
    storage = optuna.storages.RDBStorage(url)
    try:
        return optuna.load_study(study_name=name, storage=storage).trials
    finally:
        storage.engine.dispose()  # a pooled connection left open warns (an error in the tests)


def _attrs(url: str, name: str) -> dict[str, Any]:
    storage = optuna.storages.RDBStorage(url)
    try:
        return optuna.load_study(study_name=name, storage=storage).user_attrs
    finally:
        storage.engine.dispose()


def test_two_sweeps_ask_and_tell_in_one_postgresql_study_without_failing_each_others(
    postgres_url: str,
) -> None:
    search = SearchConfig(name="team", space={"max_num_seqs": "choice(8,16,32,64,128)"}, storage=postgres_url)
    space = parse_space(search)
    asked = threading.Barrier(2)
    opened = threading.Barrier(2)
    errors: list[BaseException] = []

    def sweep(sweep_id: str, value: float) -> None:
        try:
            study = SearchStudy(search, space, postgres_url, sweep=sweep_id, fingerprint=PRINT)
            first = study.ask()
            asked.wait(timeout=60)  # both sweeps hold a running trial
            # a resume of this sweep opens the study while the other's trial runs: only its own is failed
            resumed = SearchStudy(search, space, postgres_url, sweep=sweep_id, fingerprint=PRINT)
            assert resumed.interrupted == [(first.number, first.params)], resumed.interrupted
            opened.wait(timeout=60)
            for _ in range(3):
                trial = resumed.ask()
                resumed.tell(trial, TrialOutcome(state="complete", values=[value]))
            study.close()
            resumed.close()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            asked.abort()
            opened.abort()

    threads = [threading.Thread(target=sweep, args=(name, v)) for name, v in (("a", 1.0), ("b", 2.0))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors
    trials = _trials(postgres_url, "team")
    state = optuna.trial.TrialState
    by_sweep = {s: [t for t in trials if t.user_attrs.get(SWEEP_ATTR) == s] for s in ("a", "b")}
    for sweep_id, value in (("a", 1.0), ("b", 2.0)):
        mine = by_sweep[sweep_id]
        # its own interrupted trial failed by its own resume, its three told trials complete with its value
        assert [t.state for t in mine] == [state.FAIL, state.COMPLETE, state.COMPLETE, state.COMPLETE]
        assert all(t.values == [value] for t in mine[1:])
    assert len(trials) == 8 and {t.number for t in trials} == set(range(8))


def test_a_sweep_leaves_a_colleagues_running_trial_and_another_slo_is_refused(
    tmp_path: Path, port: int, postgres_url: str
) -> None:
    # A colleague's sweep has a trial in flight in the study the sweep below joins.
    search = SearchConfig(
        name="small",
        space={"max_num_seqs": "choice(64, 128, 256)", "max_num_batched_tokens": "choice(4096, 8192)"},
        storage=postgres_url,
    )
    colleague = SearchStudy(search, parse_space(search), postgres_url, sweep="colleague")
    live = colleague.ask()

    code, out, sweep = h.run_sweep(
        [*FAST, f"search.storage={postgres_url}", "search.max_launches=1"],
        sweeps=tmp_path / "sweeps",
        port=port,
    )
    h.assert_finished_capacity_open(code, out, sweep)
    record = read_search(sweep)
    assert record is not None and record.sweep_id and record.launches == 1, out[-3000:]
    trials = {t.number: t for t in _trials(postgres_url, "small")}
    assert trials[live.number].state == optuna.trial.TrialState.RUNNING  # left to its sweep
    assert {trials[t.number].user_attrs[SWEEP_ATTR] for t in record.trials} == {record.sweep_id}
    colleague.tell(live, TrialOutcome(state="complete", values=[5.0]))  # the colleague's tell still lands
    colleague.close()
    assert _trials(postgres_url, "small")[live.number].state == optuna.trial.TrialState.COMPLETE
    stored = _attrs(postgres_url, "small")[FINGERPRINT_ATTR]
    assert stored["host"].startswith("sim:") and stored["vllm"].startswith("simulator")

    # A sweep with another SLO on the same study: refused at its opening, naming what differs.
    elsewhere = free_port()
    proc = h.start(
        [*FAST, f"search.storage={postgres_url}", "search.max_launches=1", "slo.ttft_s=0.25"],
        sweeps=tmp_path / "other",
        port=elsewhere,
    )
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode != 0, out[-3000:]
    assert "study 'small' at postgresql+psycopg://" in out and ": slo = " in out, out[-3000:]
    assert "search.name=small_2" in out and "nothing was started or stopped" in out, out[-3000:]
    assert not h.sim_servers(elsewhere) and not (tmp_path / "other" / "latest").exists()  # nothing started
    assert len(_trials(postgres_url, "small")) == len(trials)  # and nothing asked

"""The test PostgreSQL (tests/postgres.py) holds an Optuna study: the storage a team's search shares.

One RDB storage writes a study's trials; a second storage object on the same URL (another process's view:
a new engine, no cache) reads them back and adds its own, and the first sees those.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import optuna
import pytest
from sqlalchemy import create_engine, inspect

from tests.postgres import Cluster, database_name

optuna.logging.set_verbosity(optuna.logging.WARNING)


@contextmanager
def storage(url: str) -> Iterator[optuna.storages.RDBStorage]:
    """An RDB storage whose pooled connections are closed on the way out (an open one warns: an error)."""
    rdb = optuna.storages.RDBStorage(url)
    try:
        yield rdb
    finally:
        rdb.engine.dispose()


def _square(trial: optuna.Trial) -> float:
    x = trial.suggest_int("x", -3, 3)
    return float(x * x)


def test_an_optuna_study_is_stored_in_postgres_and_read_by_a_second_storage(postgres_url: str) -> None:
    assert postgres_url.startswith("postgresql+psycopg://")
    with storage(postgres_url) as first, storage(postgres_url) as second:
        sampler = optuna.samplers.RandomSampler(seed=1)
        study = optuna.create_study(study_name="team", storage=first, sampler=sampler)
        study.optimize(_square, n_trials=3)

        engine = create_engine(postgres_url)
        try:
            tables = set(inspect(engine).get_table_names())
        finally:
            engine.dispose()
        assert {"studies", "trials", "trial_params", "trial_values"} <= tables

        again = optuna.load_study(study_name="team", storage=second)
        assert [t.params for t in again.trials] == [t.params for t in study.trials]
        again.optimize(_square, n_trials=2)
        assert len(optuna.load_study(study_name="team", storage=first).trials) == 5


def test_each_database_the_fixture_creates_is_empty_and_separate(postgres_cluster: Cluster) -> None:
    one, two = (postgres_cluster.create_database(database_name(f"x::{n}")) for n in ("one", "two"))
    with storage(one) as rdb_one, storage(two) as rdb_two:
        assert optuna.get_all_study_names(rdb_one) == []
        optuna.create_study(study_name="team", storage=rdb_one)
        assert optuna.get_all_study_names(rdb_one) == ["team"]
        assert optuna.get_all_study_names(rdb_two) == []
        with pytest.raises(KeyError):
            optuna.load_study(study_name="team", storage=rdb_two)

"""The error tree's exit codes: one table, read from each kind's class attribute."""

from __future__ import annotations

import pytest

from contracts.errors import (
    ConfigError,
    ConfigProblem,
    GateError,
    GauntletError,
    JournalError,
    LaunchError,
    LoadError,
    PortInUseError,
    ResultFileError,
    RollbackError,
    SpecError,
    SpecTamperedError,
    StartupFailure,
    TeardownError,
    exit_code_for,
)


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (GauntletError("x"), 1),
        (ConfigError([ConfigProblem("conf/x.yaml", "f", 1, "2")]), 2),
        (SpecError("x"), 3),
        (SpecTamperedError("x"), 3),
        (LaunchError("x"), 4),
        (PortInUseError("x"), 4),
        (StartupFailure("x", kind="bad-args", exit_code=2), 4),
        (TeardownError("x"), 4),
        (LoadError("x"), 5),
        (ResultFileError("x"), 6),
        (GateError("x"), 6),
        (JournalError("x"), 7),
        (RollbackError("x"), 7),
        (KeyboardInterrupt(), 130),
        (ValueError("not ours"), 1),
    ],
)
def test_exit_code_of_each_kind(exc: BaseException, code: int) -> None:
    assert exit_code_for(exc) == code


def test_a_startup_failure_keeps_the_process_exit_code_apart_from_its_own() -> None:
    failure = StartupFailure("died", kind="bad-args", exit_code=2)
    assert (failure.process_exit_code, failure.exit_code) == (2, 4)


def test_teardown_error_carries_what_survived() -> None:
    err = TeardownError("left 1 thing", evidence=["pid 42 still alive"], hint="kill -9 42")
    assert err.record is None
    assert "pid 42 still alive" in str(err) and "hint: kill -9 42" in str(err)

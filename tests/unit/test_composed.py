"""The unit tests' kept compositions (tests/unit/composed.py): composed again exactly when an input that
changes the result changed, and never shared between callers."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from contracts.errors import ConfigError
from orchestrator.config.compose import ConfigLocation
from orchestrator.config.validate import Sources
from orchestrator.ledger.lock import LOCK_DIR_ENV
from tests.unit import composed


@dataclasses.dataclass
class Fake:
    """``compose_load`` counted: a config whose ``run`` names the call, so a kept one reads as such."""

    calls: int = 0
    fail: bool = False

    def __call__(self, overrides: Sequence[str], **kw: Any) -> tuple[Any, Sources]:
        self.calls += 1
        if self.fail:
            raise ConfigError([], hint="refused")
        return {"call": self.calls, "overrides": list(overrides)}, Sources(overrides=list(overrides))


def _same(tmp: Path, mp: pytest.MonkeyPatch) -> list[str]:
    return ["run.repeats=3"]


def _env(tmp: Path, mp: pytest.MonkeyPatch) -> list[str]:
    mp.setenv("GAUNTLET_TEST_SECRET", "other")
    return ["run.repeats=3"]


def _next_test(tmp: Path, mp: pytest.MonkeyPatch) -> list[str]:
    mp.setenv("PYTEST_CURRENT_TEST", "tests/unit/test_other.py::test_next (call)")
    mp.setenv(LOCK_DIR_ENV, str(tmp / "other-locks"))
    return ["run.repeats=3"]


def _cwd(tmp: Path, mp: pytest.MonkeyPatch) -> list[str]:
    mp.chdir(tmp)
    return ["run.repeats=3"]


def _rewritten(tmp: Path, mp: pytest.MonkeyPatch) -> list[str]:
    (tmp / "set.jsonl").write_text('{"prompt": "a longer file now"}\n')
    return [f"gates.accuracy.labelled={tmp / 'set.jsonl'}"]


def _untouched(tmp: Path, mp: pytest.MonkeyPatch) -> list[str]:
    return [f"gates.accuracy.labelled={tmp / 'set.jsonl'}"]


def _other(tmp: Path, mp: pytest.MonkeyPatch) -> list[str]:
    return ["run.repeats=4"]


@pytest.mark.parametrize(
    ("change", "composed_again"),
    [
        (_same, False),  # the same overrides, files, directory and environment: the kept composition
        (_untouched, False),  # an override naming a file nobody rewrote
        (_next_test, False),  # what pytest and conftest.py set for each test: no composition reads it
        (_env, True),  # a secret's ${oc.env:...} reads the environment
        (_cwd, True),  # a relative path resolves against the working directory
        (_rewritten, True),  # a test rewrote the file its override names
        (_other, True),  # other overrides
    ],
)
def test_a_composition_is_kept_until_an_input_changes(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    change: Callable[[Path, pytest.MonkeyPatch], list[str]],
    composed_again: bool,
) -> None:
    fake = Fake()
    monkeypatch.setattr(composed, "compose_load", fake)
    monkeypatch.setattr(composed, "_KEPT", {})
    (tmp_path / "set.jsonl").write_text("{}\n")
    first = ["run.repeats=3"] if change not in (_rewritten, _untouched) else _untouched(tmp_path, monkeypatch)
    composed.load(first)
    again = change(tmp_path, monkeypatch)
    cfg, _ = composed.load(again)
    assert fake.calls == (2 if composed_again else 1)
    assert cfg == {"call": fake.calls, "overrides": again}


def test_each_caller_gets_its_own_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(composed, "compose_load", Fake())
    monkeypatch.setattr(composed, "_KEPT", {})
    mine, my_sources = composed.load(["run.repeats=3"])
    mine["overrides"].append("changed by a test")
    my_sources.derived.append("changed by a test")
    theirs, their_sources = composed.load(["run.repeats=3"])
    assert theirs["overrides"] == ["run.repeats=3"] and their_sources.derived == []


@pytest.mark.parametrize(
    "kw",
    [
        {},  # a refused composition raises on every call, composed each time
        {"config_dir": Path("elsewhere")},  # a test's copy of conf/ it may rewrite
        {"location": ConfigLocation(config_name="config")},
    ],
)
def test_what_is_not_kept_is_composed_on_every_call(
    monkeypatch: pytest.MonkeyPatch, kw: dict[str, Any]
) -> None:
    fake = Fake(fail=not kw)
    monkeypatch.setattr(composed, "compose_load", fake)
    monkeypatch.setattr(composed, "_KEPT", {})
    for _ in range(2):
        if fake.fail:
            with pytest.raises(ConfigError):
                composed.load(["run.repeats=3"], **kw)
        else:
            composed.load(["run.repeats=3"], **kw)
    assert fake.calls == 2

"""tests/postgres.py: where the server's programs are found, and a missing server skips or fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import postgres


def _programs(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name in ("initdb", "pg_ctl", "postgres"):
        (folder / name).write_text("#!/bin/sh\n")
        (folder / name).chmod(0o755)
    return folder


@pytest.mark.parametrize(
    ("on_path", "debian_versions", "expected"),
    [
        (True, ["15"], "path"),  # PATH first (a source build, a Homebrew-like prefix)
        (False, ["13", "15"], "debian/15/bin"),  # Debian's newest when PATH has none
        (False, ["9", "15", "10"], "debian/15/bin"),  # by number, not by name
        (False, [], None),
    ],
)
def test_find_bindir(tmp_path: Path, on_path: bool, debian_versions: list[str], expected: str | None) -> None:
    path = str(_programs(tmp_path / "path")) if on_path else str(tmp_path / "empty")
    for version in debian_versions:
        _programs(tmp_path / "debian" / version / "bin")
    found = postgres.find_bindir(path=path, debian=tmp_path / "debian")
    assert found == (None if expected is None else tmp_path / expected)


@pytest.mark.parametrize(("required", "outcome"), [("1", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_a_missing_server_skips_unless_required(
    monkeypatch: pytest.MonkeyPatch, required: str, outcome: type[BaseException]
) -> None:
    monkeypatch.setattr(postgres, "missing_reason", lambda: "no initdb here")
    monkeypatch.setenv(postgres.REQUIRE_ENV, required)
    with pytest.raises(outcome, match="no initdb here"):
        postgres.require_or_skip()


def test_database_names_are_legal_and_distinct() -> None:
    long_id = "tests/x.py::test_" + "a" * 80 + "[row-1]"
    names = {postgres.database_name(long_id) for _ in range(3)}
    assert len(names) == 3
    assert all(len(n) <= 63 and n.replace("_", "").isalnum() and n == n.lower() for n in names)

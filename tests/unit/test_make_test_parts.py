"""`make test`'s parts name the folders they collect (Makefile): every folder that holds tests is in one
of them, and each part's marker matches only tests of the folders it names, so no test is left out by the
folder lists that keep the parts from collecting each other's tests."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def parts(makefile: str) -> list[tuple[str, list[str]]]:
    """The test target's pytest commands: each one's marker expression and the folders it names."""
    body = makefile.split("\ntest: ", 1)[1].split("\n\n", 1)[0]
    found = []
    for line in body.splitlines():
        if "-m pytest" not in line:
            continue
        words = shlex.split(line.split("-m pytest", 1)[1].split("||", 1)[0])
        marker = words[words.index("-m") + 1]
        found.append((marker, [w.rstrip("/") for w in words if w.startswith("tests/")]))
    return found


def test_the_parts_are_the_three_markers_and_each_names_its_folders() -> None:
    found = parts((ROOT / "Makefile").read_text())
    assert [m for m, _ in found] == ["unit", "not unit and not e2e and not slurm", "e2e or slurm"]
    assert all(folders for _, folders in found), found


def test_every_folder_with_tests_is_collected_by_a_part() -> None:
    named = {f for _, folders in parts((ROOT / "Makefile").read_text()) for f in folders}
    holding = {
        str(p.parent.relative_to(ROOT))
        for p in (ROOT / "tests").rglob("test_*.py")
        if "__pycache__" not in p.parts
    }
    assert holding <= named, (
        f"folders with tests that no part of `make test` collects: {sorted(holding - named)}"
    )


@pytest.mark.parametrize(
    ("folder", "marker"),
    [
        ("tests/unit", "unit"),
        ("tests/integration", "integration"),
        ("tests/faults", "faults"),
        ("tests/e2e", "e2e"),
    ],
)
def test_each_folder_marks_its_own_tests(folder: str, marker: str) -> None:
    """The unit part collects tests/unit alone: only that folder's conftest marks tests `unit`."""
    conftest = (ROOT / folder / "conftest.py").read_text()
    assert re.search(rf"mark_folder\(items, __file__, pytest\.mark\.{marker}\)", conftest), folder
    others = [p for p in (ROOT / "tests").glob("*/conftest.py") if p.parent.name != Path(folder).name]
    assert not any(f"pytest.mark.{marker})" in p.read_text() for p in others), marker

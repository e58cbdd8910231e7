"""The examples in the product's docstrings run and print what they say (``>>>`` lines): a docstring
example that no longer holds is a failing test, not a stale page."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("contracts", "launch", "load", "gates", "report", "orchestrator")


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        names.append(package)
        for info in pkgutil.walk_packages([str(ROOT / package)], prefix=f"{package}."):
            if not info.name.endswith("__main__"):  # a program: importing it runs it
                names.append(info.name)
    return sorted(names)


def _with_examples(names: list[str]) -> list[str]:
    """The modules whose source holds an example (read as text: importing every module is the test's)."""
    found = []
    for name in names:
        parts = name.split(".")
        path = ROOT.joinpath(*parts)
        source = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        if source.is_file() and ">>> " in source.read_text():
            found.append(name)
    return found


MODULES = _with_examples(_modules())


def test_the_examples_are_found() -> None:
    """A guard on the finder: the tree has dozens of modules with examples (some of them known)."""
    assert len(MODULES) > 30 and {
        "gates.noninferiority",
        "launch.engines",
        "orchestrator.search.budget",
    } <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_a_modules_examples_hold(name: str) -> None:
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = [t for t in doctest.DocTestFinder().find(module) if t.examples]
    assert tests, f"{name}: its source has '>>> ' but no docstring example was found"
    failed: list[str] = []
    for test in tests:
        runner.run(test, out=failed.append)  # an example marked +SKIP is not attempted
    assert not failed, "".join(failed)

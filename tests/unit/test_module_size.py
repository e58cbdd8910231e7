"""The house's module size (docs/architecture.md): no module of the product or the benchmarks passes 600
lines; one that grows past it is split by concern (what each part does), not by line count."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("contracts", "launch", "load", "gates", "report", "orchestrator", "benchmarks")
LIMIT = 600


def test_no_module_passes_the_house_line_limit() -> None:
    sizes = {
        path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines())
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
    }
    assert len(sizes) > 100  # the walk found the packages
    over = {name: lines for name, lines in sizes.items() if lines > LIMIT}
    assert not over, f"split these by concern (at most {LIMIT} lines a module): {over}"

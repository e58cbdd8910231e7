"""The documentation's house rules (scripts/docs_check.py, `make docs-check`): reference pages within their
size targets, no dated figures outside fenced example output, an index linking every docs page, no broken
relative link. The rules are tested as tables over made-up pages; the last test checks this tree."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_check", ROOT / "scripts" / "docs_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_check"] = module
    spec.loader.exec_module(module)
    return module


dc = _load()

INDEX_OK = "[gates](gates.md) [load](load-runner.md)\n"
SMALL = {
    "README.md": "# gauntlet\n[docs](docs/README.md)\n",
    "docs/README.md": INDEX_OK,
    "docs/gates.md": "# Gates\n## Adding a gate\n",
    "docs/load-runner.md": "# Load\n",
}


def _with(path: str, text: str) -> dict[str, str]:
    return {**SMALL, path: text}


def _never(_: str) -> bool:
    return False


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("measured 2026-12-03 on 2 cores\n", [1]),
        ("no date here\n", []),
        ("```\nsweeps/2026-12-03 example output\n```\n", []),
        ("~~~\n2026-12-03\n~~~\nafter 2026-12-04\n", [4]),
        ("```bash\nrun\n```\ntext\n```\n2026-01-01\n```\n", []),
        ("a year alone: 2026\n", []),
    ],
)
def test_dates_count_outside_fenced_blocks_only(text: str, lines: list[int]) -> None:
    assert dc.dates_outside_fences(text) == lines


@pytest.mark.parametrize(
    ("path", "reference"),
    [
        ("README.md", True),
        ("docs/gates.md", True),
        ("docs/README.md", True),
        ("docs/measurements/decision-quality.md", False),
        ("NEWS.md", False),
        ("docs/notes.txt", False),
    ],
)
def test_which_pages_are_reference(path: str, reference: bool) -> None:
    assert dc.is_reference(path) is reference


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("On a real GPU cluster (SLURM)", "on-a-real-gpu-cluster-slurm"),
        ("Doctor: before anything is stopped", "doctor-before-anything-is-stopped"),
        ("The gates (conf/gates/default.yaml)", "the-gates-confgatesdefaultyaml"),
        ("`run.json`, the launch's record", "runjson-the-launchs-record"),
        ("cpu2_tiny_head80", "cpu2_tiny_head80"),
    ],
)
def test_heading_anchors_as_github_spells_them(heading: str, anchor: str) -> None:
    assert dc.slug(heading) == anchor


def test_a_repeated_heading_gets_a_numbered_anchor() -> None:
    assert dc.anchors("# A\n## Usage\n## Usage\n```\n# not a heading\n```\n") == {"a", "usage", "usage-1"}


@pytest.mark.parametrize(
    ("pages", "expected"),
    [
        (SMALL, []),
        (
            _with("docs/gates.md", "x" * 60_001),
            ["docs/gates.md: 60,001 bytes, over its target of 60,000 (60 KB)"],
        ),
        (_with("docs/gates.md", "x" * 60_000), []),
        (
            _with("README.md", "# g\n" + "y" * 25_000),
            ["README.md: 25,004 bytes, over its target of 25,000 (25 KB)"],
        ),
        (
            _with("docs/load-runner.md", "# Load\nmeasured 2026-12-04\n"),
            ["docs/load-runner.md:2: a '2026-' date in reference (see docs/measurements/)"],
        ),
        (_with("docs/measurements/load-client.md", "# Load client\n2026-12-04: 3 ms\n"), []),
        (
            _with("docs/cli.md", "# CLI\n"),
            ["docs/README.md: does not link docs/cli.md"],
        ),
        (
            _with("docs/gates.md", "# Gates\nsee [the client](load-runner.md#client)\n"),
            ["docs/gates.md:2: link to 'load-runner.md#client': docs/load-runner.md has no heading #client"],
        ),
        (
            _with("docs/gates.md", "# Gates\n[added](#adding-a-gate) [m](measurements/gone.md)\n"),
            [
                "docs/gates.md:2: link to '#adding-a-gate': docs/gates.md has no heading #adding-a-gate",
                "docs/gates.md:2: link to 'measurements/gone.md': no such file (docs/measurements/gone.md)",
            ],
        ),
        (
            _with(
                "docs/gates.md",
                "# Gates\n`[not](a-link.md)`\n```\n[nor](this.md)\n```\n[web](https://x.org/a.md)\n",
            ),
            [],
        ),
    ],
)
def test_problems(pages: dict[str, str], expected: list[str]) -> None:
    assert dc.problems(pages, _never) == expected


def test_the_index_is_required() -> None:
    pages = {k: v for k, v in SMALL.items() if k != "docs/README.md"}
    pages["README.md"] = "# gauntlet\n"
    assert dc.problems(pages, _never) == [
        "docs/README.md: missing (the docs index: which page answers which question)"
    ]


def test_a_link_to_an_existing_file_or_folder_outside_the_pages_is_fine() -> None:
    pages = _with("docs/gates.md", "# Gates\n[conf](../conf/gates/default.yaml) [bench](../benchmarks/)\n")
    existing = {"conf/gates/default.yaml", "benchmarks"}
    assert dc.problems(pages, existing.__contains__) == []
    assert dc.problems(pages, _never) == [
        "docs/gates.md:2: link to '../conf/gates/default.yaml': no such file (conf/gates/default.yaml)",
        "docs/gates.md:2: link to '../benchmarks/': no such file (benchmarks)",
    ]


def test_this_trees_docs_keep_the_house_rules() -> None:
    """What `make docs-check` runs: sizes, dates, the index and every relative link of this tree."""
    found, pages = dc.check(ROOT)
    assert "docs/README.md" in pages
    assert found == []

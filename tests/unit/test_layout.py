"""One owner of the sweep directory's layout: no product module or benchmark but :mod:`contracts.layout`
(with its parts split by concern, :mod:`contracts.layout_search`, :mod:`contracts.layout_lmeval`) spells a
name.

A name is spelled when a string (not a docstring) is a path with one of the layout's file names as a part
(``"run.json"``, ``f"{rel}/summary.json"``, ``.with_name("server.log")``), a path with one of its folder
names as a part (``f"candidates/{name}"``), or a folder name joined with ``/`` (``sweep_dir / "recovery"``).
Words in messages (``"write verdicts.json"``) and domain values that share a folder's name (the
``"capacity"`` gate, the ``"recovery"`` phase) are not paths and are not flagged.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from contracts import layout, layout_lmeval, layout_search

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("contracts", "launch", "load", "gates", "report", "orchestrator")
#: The benchmarks write and read sweep directories and load-run folders too (docs/architecture.md).
BENCHMARKS = ("benchmarks",)
#: The owner itself; the simulator's own files (a server program of its own, not a sweep's writer).
EXEMPT = {"contracts/layout.py", "contracts/layout_search.py", "contracts/layout_lmeval.py"}
EXEMPT_DIRS = ("launch/sim/",)
#: Strings that name another file of the same name: the project's primary config, not a sweep's record.
ALLOWED = {("orchestrator/config/validate.py", "conf/config.yaml")}
#: Being rewritten in issue 20 (the Hydra sweeper plugin): they switch to contracts.layout there.
PENDING: set[str] = set()

_NAMES = {
    value
    for owner in (layout, layout_search, layout_lmeval)  # the layout and its parts split by concern
    for key, value in vars(owner).items()
    if key.isupper() and isinstance(value, str) and not key.endswith("_PREFIX")
}
FILE_NAMES = {n for n in _NAMES if "." in n}
DIR_NAMES = _NAMES - FILE_NAMES


def _docstrings(tree: ast.Module) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def spelled(source: str, allowed: frozenset[str] = frozenset()) -> list[str]:
    """The layout names a module's source spells as paths: ``line: text`` for each (``allowed``: strings
    that name something else)."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    hits: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            right = node.right
            if isinstance(right, ast.Constant) and right.value in _NAMES:
                hits.append(f"{node.lineno}: / {right.value!r}")
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or id(node) in skip:
            continue
        if node.value in allowed:
            continue
        parts = node.value.split("/")
        if any(p in FILE_NAMES for p in parts) or (len(parts) > 1 and any(p in DIR_NAMES for p in parts)):
            hits.append(f"{node.lineno}: {node.value!r}")
    return hits


def _product_modules() -> list[Path]:
    return sorted(path for package in (*PACKAGES, *BENCHMARKS) for path in (ROOT / package).rglob("*.py"))


def test_no_product_module_or_benchmark_spells_a_name_of_the_sweep_directory() -> None:
    found = {}
    for path in _product_modules():
        rel = path.relative_to(ROOT).as_posix()
        if rel in EXEMPT or rel in PENDING or rel.startswith(EXEMPT_DIRS):
            continue
        hits = spelled(path.read_text(), frozenset(text for where, text in ALLOWED if where == rel))
        if hits:
            found[rel] = hits
    assert not found, f"spell these through contracts.layout: {found}"


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        ('p = sweep / "run.json"\n', True),
        ('p = sweep / "recovery"\n', True),
        ('root = f"candidates/{name}"\n', True),
        ('glob = "r*/summary.json"\n', True),
        ('log = spec.with_name("server.log")\n', True),
        ('gate = "capacity"\nphase = "recovery"\n', False),  # domain values, not paths
        ('msg = "judge the results and write verdicts.json"\n', False),  # a word in a message
        ('"""Results go to candidates/<name>/run.json."""\n', False),  # a docstring draws the layout
        ("p = sweep / RUN_FILE\n", False),
    ],
)
def test_what_counts_as_spelling_a_name(source: str, flagged: bool) -> None:
    assert bool(spelled(source)) is flagged


def test_every_name_of_the_layout_is_distinct() -> None:
    names = [v for k, v in vars(layout).items() if k.isupper() and isinstance(v, str)]
    assert len(names) == len(set(names))


# ---------------------------------------------------------------- joins: the typed paths
#: The layout's constants, by their names (``RUN_FILE``, ``RECOVERY_ROOT``, ...).
CONSTANTS = {key for key, value in vars(layout).items() if key.isupper() and isinstance(value, str)}
#: Modules that still join a directory and a layout name: each is converted to the typed paths
#: (:class:`contracts.layout.SweepPaths`, ``LaunchPaths``, ``RepeatPaths``, ``OffsitePaths``) and leaves.
JOINS_PENDING: set[str] = {
    "orchestrator/config/compose.py",
}


def joined(source: str) -> list[str]:
    """The places a module's source joins a path and a layout name itself (``sweep / RUN_FILE``,
    ``out / layout.SUMMARY_FILE``): ``line: expression`` for each. A name ending in ``_FILE`` counts as a
    layout name wherever it comes from."""
    hits: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
            continue
        right = node.right
        name = (
            right.id
            if isinstance(right, ast.Name)
            else right.attr
            if isinstance(right, ast.Attribute)
            else None
        )
        if name is not None and (name.endswith("_FILE") or name in CONSTANTS):
            hits.append(f"{node.lineno}: {ast.unparse(node)}")
    return hits


def _joins() -> dict[str, list[str]]:
    found = {}
    for path in _product_modules():
        rel = path.relative_to(ROOT).as_posix()
        if rel not in EXEMPT and (hits := joined(path.read_text())):
            found[rel] = hits
    return found


def test_no_product_module_or_benchmark_joins_a_path_and_a_layout_name() -> None:
    found = {rel: hits for rel, hits in _joins().items() if rel not in JOINS_PENDING}
    assert not found, f"read these through contracts.layout's SweepPaths / LaunchPaths / RepeatPaths: {found}"


def test_the_pending_joins_only_shrink() -> None:
    assert not JOINS_PENDING - set(_joins()), "converted: remove from JOINS_PENDING"


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        ("p = sweep / RUN_FILE\n", True),
        ("p = out / layout.SUMMARY_FILE\n", True),
        ("p = sweep / RECOVERY_ROOT / VALIDATION_FILE\n", True),
        ("p = sweep / root / BLOCKS_DIR\n", True),  # a folder of the layout
        ("p = ctx.candidate_dir(name) / SERVER_LOG\n", True),
        ("p = folder / HTML_FILE\n", True),  # any *_FILE, even one a module names itself
        ("p = SweepPaths(sweep).candidate(name).run\n", False),
        ("p = LaunchPaths(out).repeat(profile, k).summary\n", False),
        ("p = sweep / name\n", False),  # a variable, not a layout name
        ('p = f"{root}/{RUN_FILE}"\n', False),  # a relative root named in evidence, not a join
        ("n = total / COUNT\n", False),  # a division
    ],
)
def test_what_counts_as_joining_a_layout_name(source: str, flagged: bool) -> None:
    assert bool(joined(source)) is flagged


SWEEP = layout.SweepPaths(Path("/s"))


@pytest.mark.parametrize(
    ("path", "drawn"),
    [
        (SWEEP.config, "config.yaml"),
        (SWEEP.journal, "journal.jsonl"),
        (SWEEP.journals, "journals"),
        (SWEEP.verdicts, "verdicts.json"),
        (SWEEP.retained_spec, "retained/spec.json"),
        (SWEEP.candidate("tp4").run_file, "candidates/tp4/run.json"),
        (SWEEP.candidate("tp4").repeat("serial", 2).summary, "candidates/tp4/serial/r2/summary.json"),
        (SWEEP.candidate("tp4").capacity_run("c8", 1).records, "candidates/tp4/capacity/c8/a1/records.jsonl"),
        (
            SWEEP.candidate("base@n1").block("tp4").server_log,
            "candidates/base@n1/blocks/after-tp4/server.log",
        ),
        (
            SWEEP.at(layout.block_root("candidates/base", "tp4")).spec,
            "candidates/base/blocks/after-tp4/spec.json",
        ),
        (SWEEP.recovery.validation, "recovery/validation.json"),
        (SWEEP.rollback("20260101T000000").run_file, "rollbacks/20260101T000000/run.json"),
        (layout.OffsitePaths(Path("/s")).specs, "specs"),
    ],
)
def test_the_typed_paths_are_the_layout_its_docstring_draws(path: Path, drawn: str) -> None:
    assert path.relative_to("/s").as_posix() == drawn

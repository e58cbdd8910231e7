"""One writer of a measured launch (docs/architecture.md, "One measured launch"): no product module writes a
launch's ``run.json`` but :func:`orchestrator.measure.launch._write_run`, and no product module builds a
:class:`orchestrator.measure.launch.Launch` but :func:`orchestrator.measure.launch.measured_launch`.

A function writes the run file when its code (not its docstring) names it (``RUN_FILE``, ``"run.json"``,
a typed path's ``.run_file``: :class:`contracts.layout.LaunchPaths`)
and calls a writer (``write_model``, ``write_text``, ``open``, ...), or passes a ``CandidateRun(...)`` it
builds to a writer. The scan is by function, so a path held in a variable before the write is found too.
"""

from __future__ import annotations

import ast
import io
from pathlib import Path

import pytest

from contracts.files import read_model
from contracts.layout import RUN_FILE, SPEC_FILE, VALIDATION_FILE
from contracts.results import CandidateRun, RecoveryValidation
from orchestrator.recovery.rollback import rollback
from tests.unit.fakes import FakeSupervisor
from tests.unit.test_session import _config_yaml, restored_sweep

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("contracts", "launch", "load", "gates", "report", "orchestrator")
#: The one writer of run.json, and the one place a Launch is built: (module, function).
RUN_WRITER = ("orchestrator/measure/launch.py", "_write_run")
LAUNCH_BUILDER = ("orchestrator/measure/launch.py", "measured_launch")
WRITERS = {"write_model", "write_text", "write_bytes", "open", "dump", "os.replace", "os.rename"}

Scope = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef


def _docstrings(tree: ast.Module) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _scopes(tree: ast.Module) -> list[tuple[str, Scope]]:
    """Every function (qualified by its class or enclosing function) and the module, with its name."""
    found: list[tuple[str, Scope]] = [("<module>", tree)]

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                found.append((prefix + child.name, child))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return found


def _own_nodes(scope: Scope) -> list[ast.AST]:
    """The nodes of ``scope`` outside the functions and classes nested in it (scopes of their own)."""
    nodes: list[ast.AST] = []
    todo: list[ast.AST] = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        nodes.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return nodes


def _called(node: ast.Call) -> str | None:
    """The called name: ``f`` for ``f(...)`` and ``x.f(...)``, ``os.f`` for ``os.f(...)``."""
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return f"os.{func.attr}" if isinstance(func.value, ast.Name) and func.value.id == "os" else func.attr
    return None


def run_file_writers(source: str) -> list[str]:
    """The functions of a module's source that write a launch's run.json (``<module>`` for top-level code)."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    hits: list[str] = []
    for name, scope in _scopes(tree):
        nodes = _own_nodes(scope)
        names_run_file = any(
            (isinstance(n, ast.Name) and n.id == "RUN_FILE")
            or (isinstance(n, ast.Attribute) and n.attr in ("RUN_FILE", "run_file"))
            or (
                isinstance(n, ast.Constant)
                and isinstance(n.value, str)
                and "run.json" in n.value
                and id(n) not in skip
            )
            for n in nodes
        )
        writes = [n for n in nodes if isinstance(n, ast.Call) and _called(n) in WRITERS]
        builds_run = any(
            isinstance(arg, ast.Call) and _called(arg) == "CandidateRun"
            for call in writes
            for arg in call.args
        )
        if writes and (names_run_file or builds_run):
            hits.append(name)
    return hits


def launch_builders(source: str) -> list[str]:
    """The functions of a module's source that build a ``Launch`` themselves."""
    return [
        name
        for name, scope in _scopes(ast.parse(source))
        if any(isinstance(n, ast.Call) and _called(n) == "Launch" for n in _own_nodes(scope))
    ]


def _product_modules() -> list[tuple[str, str]]:
    paths = sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))
    return [(path.relative_to(ROOT).as_posix(), path.read_text()) for path in paths]


def test_only_the_one_writer_writes_a_launchs_run_json() -> None:
    found = {(rel, name) for rel, source in _product_modules() for name in run_file_writers(source)} - {
        RUN_WRITER
    }
    assert not found, f"write run.json through {RUN_WRITER[0]}'s {RUN_WRITER[1]} (a Launch's write): {found}"


def test_a_launch_is_built_only_by_measured_launch() -> None:
    found = {(rel, name) for rel, source in _product_modules() for name in launch_builders(source)}
    assert found == {LAUNCH_BUILDER}, f"build a Launch through measured_launch (running=...): {found}"


@pytest.mark.parametrize(
    ("source", "writers"),
    [
        ("def f(out, run):\n    write_model(out / RUN_FILE, run)\n", ["f"]),
        (
            "def f(out, run):\n    path = out / layout.RUN_FILE\n    path.write_text(run.to_json())\n",
            ["f"],
        ),
        ('def f(out, run):\n    write_model(out / "run.json", run)\n', ["f"]),
        ("def f(path):\n    write_model(path, CandidateRun(candidate='x'))\n", ["f"]),
        ("def f(out, run):\n    write_model(LaunchPaths(out).run_file, run)\n", ["f"]),  # the typed path
        ("def f(out):\n    return read_model(LaunchPaths(out).run_file, CandidateRun)\n", []),  # a reader
        (
            "class L:\n    def write(self):\n        write_model(self.out / RUN_FILE, self.record())\n",
            ["L.write"],
        ),
        ("write_model(OUT / RUN_FILE, RUN)\n", ["<module>"]),
        ("def f(tmp, out):\n    os.replace(tmp, out / RUN_FILE)\n", ["f"]),
        (
            "def f(ctx, out):\n    ctx = replace(ctx, x=1)\n    return out / RUN_FILE\n",
            [],
        ),  # not a path's replace
        ("def f(out):\n    return read_model(out / RUN_FILE, CandidateRun)\n", []),  # a reader
        ("def f(out, v):\n    write_model(out / VALIDATION_FILE, v)\n", []),  # another file
        ('def f(out):\n    """Writes run.json."""\n    write_model(out / SPEC_FILE, s)\n', []),  # a docstring
        ("def f(out, run):\n    _write_run(out, run)\n", []),  # through the one writer
        # a nested function is its own scope: the outer one neither names the file nor writes
        ("def f(out):\n    def g(run):\n        write_model(out / RUN_FILE, run)\n    return g\n", ["f.g"]),
    ],
)
def test_what_counts_as_writing_run_json(source: str, writers: list[str]) -> None:
    assert run_file_writers(source) == writers


@pytest.mark.parametrize(
    ("source", "builders"),
    [
        ("def f(ctx, s, out, run):\n    return Launch(ctx, s, out, run)\n", ["f"]),
        ("def f(ctx, s, out, run):\n    return launch.Launch(ctx, s, out, run)\n", ["f"]),
        (
            "def f(c, s, out):\n    with measured_launch(c, s.spec, out, running=s) as it:\n        pass\n",
            [],
        ),
        ("def f(launch: Launch) -> Launch:\n    return launch\n", []),  # an annotation builds nothing
    ],
)
def test_what_counts_as_building_a_launch(source: str, builders: list[str]) -> None:
    assert launch_builders(source) == builders


def test_a_healthy_retained_server_is_validated_where_it_runs_through_the_measured_launch(
    tmp_path: Path,
) -> None:
    """A rollback that finds the retained server healthy validates it in place (``running=``): nothing is
    launched or torn down, and its directory gets the launch's record (a start, the recovery runs) and the
    validation, as before the in-place launch went through :func:`measured_launch`."""
    sup = FakeSupervisor()
    ctx = restored_sweep(tmp_path, sup)
    (ctx.dir / "config.yaml").write_text(_config_yaml(ctx))
    (retained,) = ctx.journal.replay().live.values()
    launches = list(sup.started)
    out = io.StringIO()
    result = rollback(ctx.dir, ctx.seams, out=out)
    assert result.ok and result.pid == retained.pid, result.reason
    assert sup.started == launches and list(sup.alive) == [retained.pid]  # nothing launched, nothing stopped
    after = [e.name for e in ctx.journal.events()]
    after = after[after.index("rollback_requested") :]
    assert "restoring" not in after and after[-1] == "validated", after
    (target,) = (ctx.dir / "rollbacks").iterdir()
    run = read_model(target / RUN_FILE, CandidateRun)
    assert run.startup.ok and run.is_baseline and run.phase == "recovery" and run.teardown is None
    assert run.profiles == [f"{p}/r{k}" for k in range(1, ctx.cfg.run.recovery_repeats + 1)
                            for p in ctx.cfg.run.recovery_profiles]  # fmt: skip
    assert read_model(target / VALIDATION_FILE, RecoveryValidation).ok
    assert not (target / SPEC_FILE).exists()  # launched from nothing: the recorded spec is the journal's
